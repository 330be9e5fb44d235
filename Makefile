# Thin wrapper over CMake: `make` builds build/tern, `make check` runs every test, `make demo` shows tern's
# main job, `make bench` prints benchmark figures. `make sanitize` runs the suite under ASan+UBSan.
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure check demo bench sanitize clean
all: configure
	cmake --build $(BUILD) -j $(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

check: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: all
	@for m in $$($(BUILD)/tern info --names); do echo "== $$m"; $(BUILD)/tern info $$m || exit 1; echo; done

bench: all
	@for b in $(BUILD)/bench/bench_*; do $$b || exit 1; done

sanitize:
	cmake -S . -B build-san -DTERN_SANITIZE=ON -DTERN_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-san -j $(JOBS)
	cd build-san && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) build-san
