#!/usr/bin/env bash
# Installs what tern needs on Debian 12, through apt-get, and only the packages that are missing.
# Usage: scripts/install-deps.sh [--dev]   (--dev adds the fuzzing and analysis tools)
set -euo pipefail

pkgs=(build-essential cmake pkg-config libcjson-dev libopenblas-dev zlib1g-dev python3 python3-numpy python3-torch
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev python3-onnx python3-sklearn
      libdnnl-dev python3-torchvision
      libopenmpi-dev openmpi-bin)  # Open MPI: mpirun -np K tern collective (optional for the build, used by CI)
if [[ "${1:-}" == "--dev" ]]; then
  pkgs+=(clang libclang-rt-14-dev afl++ cppcheck valgrind)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
