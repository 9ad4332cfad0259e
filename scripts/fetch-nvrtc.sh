#!/usr/bin/env bash
# Fetches NVRTC (the library) and the CUDA runtime headers (cuda_fp16.h, cuda_bf16.h) from the
# PyPI wheels into .cache/cuda/ without installing anything, so that kernels can be compiled to
# PTX on a machine without CUDA. Prints two lines:
#   TRAJWIKI_NVRTC_LIB_DIR=<dir holding libnvrtc.so.13>
#   TRAJWIKI_CUDA_INCLUDE=<dir holding cuda_fp16.h>
# Usage: eval "$(scripts/fetch-nvrtc.sh)"   (progress goes to stderr)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/.cache/cuda"
nvrtc_version="${TRAJWIKI_NVRTC_VERSION:-13.0.88}"
runtime_spec="${TRAJWIKI_CUDA_RUNTIME_SPEC:-nvidia-cuda-runtime>=13.0,<13.1}"
mkdir -p "$root/wheels" "$root/unpacked"

find_dir() { # $1 = file name; prints the directory of the first match under unpacked/
    find "$root/unpacked" -name "$1" -print -quit 2>/dev/null | xargs -r dirname
}

if [[ -z "$(find_dir libnvrtc.so.13)" || -z "$(find_dir cuda_fp16.h)" ]]; then
    pip=(python3 -m pip)
    "${pip[@]}" --version >/dev/null 2>&1 || pip=(pip3)
    echo "fetch-nvrtc: downloading nvidia-cuda-nvrtc==$nvrtc_version and $runtime_spec" >&2
    "${pip[@]}" download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux_2_12_x86_64 \
        -d "$root/wheels" "nvidia-cuda-nvrtc==$nvrtc_version" "$runtime_spec" >&2
    for whl in "$root"/wheels/*.whl; do
        python3 -m zipfile -e "$whl" "$root/unpacked" >&2
    done
fi

lib="$(find_dir libnvrtc.so.13)"
inc="$(find_dir cuda_fp16.h)"
if [[ -z "$lib" || -z "$inc" ]]; then
    echo "fetch-nvrtc: libnvrtc.so.13 or cuda_fp16.h missing from the wheels under $root" >&2
    exit 1
fi
[[ -f "$inc/cuda_bf16.h" ]] || { echo "fetch-nvrtc: cuda_bf16.h missing in $inc" >&2; exit 1; }
echo "TRAJWIKI_NVRTC_LIB_DIR=$lib"
echo "TRAJWIKI_CUDA_INCLUDE=$inc"
