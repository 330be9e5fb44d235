# Thin wrapper over CMake: `make` builds build/tern, `make check` runs every test, `make demo` shows tern's
# main job, `make bench` prints benchmark figures. `make sanitize` runs the suite under ASan+UBSan.
BUILD ?= build
PREFIX ?= /usr/local
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure check demo bench bench-big sanitize clean conformance install
all: configure
	cmake --build $(BUILD) -j $(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

check: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: all
	@echo "== The machine catalogue"; $(BUILD)/tern info
	@echo; echo "== trn2.48xlarge in detail"; $(BUILD)/tern info trn2.48xlarge
	@echo; echo "== A small GPT-2 style transformer (data/models/gpt2_tiny.onnx) compiled for trn1 and trn2"
	$(BUILD)/tern compile data/models/gpt2_tiny.onnx -o $(BUILD)/gpt2_tiny.trn1.tern --machine trn1
	$(BUILD)/tern compile data/models/gpt2_tiny.onnx -o $(BUILD)/gpt2_tiny.trn2.tern --machine trn2
	@echo; echo "== Run on a simulated trn1 NeuronCore, with the profiler"
	$(BUILD)/tern run $(BUILD)/gpt2_tiny.trn1.tern --input input_ids=data/models/gpt2_tiny.in.npy --profile --svg $(BUILD)/gpt2_tiny.svg
	@echo; echo "== The same model on trn2"
	$(BUILD)/tern run $(BUILD)/gpt2_tiny.trn2.tern --input input_ids=data/models/gpt2_tiny.in.npy

bench: all
	@for b in $(BUILD)/bench/bench_*; do $$b || exit 1; done

# Opt-in, not part of `bench` or `check`: a ~4.3 GB ONNX model with external data generated under $(BUILD)/bench-big,
# run timing-only; prints its peak RSS against its weight bytes (docs/performance.md).
bench-big: all
	bench/bench_big.sh $(BUILD)

# ONNX's backend node tests (generated once into $(BUILD)/onnx-node-tests), run on the simulated device: a per-op
# table and `onnx_node_tests: P passed, F failed, U unsupported` (docs/conformance.md). Not part of `check`.
conformance: all
	BUILD=$(BUILD) JOBS=$(JOBS) scripts/conformance.sh

# Installs the CLI, libtern.a, the headers, the machine files and tern.pc under $(DESTDIR)$(PREFIX). The prefix is
# configured into the build (an installed tern finds its machine files there), so it is set on every install.
install: configure
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

# Debug at -O1: the sanitizers' own advice for a usable speed (asserts kept; 2-3x faster than -O0 here).
sanitize:
	cmake -S . -B build-san -DTERN_SANITIZE=ON -DTERN_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1"
	cmake --build build-san -j $(JOBS)
	cd build-san && ctest --output-on-failure -j $(JOBS) -LE long

clean:
	rm -rf $(BUILD) build-san
