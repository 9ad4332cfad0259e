#!/usr/bin/env bash
# Builds the `--features cuda` test and bench binaries of trajwiki-cuda here (the GPU machine has
# no Rust) and collects them in gpu-bin/ with stable names, plus the CUDA headers NVRTC needs at
# run time (from scripts/fetch-nvrtc.sh) and the PyTorch baseline. Carry `gpu-bin` to the device
# and run `scripts/gpu-check.sh` there. Binaries: ptx, twins, qwen3_twin, bert_twin (tests),
# gpu_scoring, gpu_qwen3, gpu_bert (benches); the Python extension built with `cuda` (python/)
# and its check gpu_python_check.py; scripts torch_topk.py, torch_qwen3.py, torch_bert.py; the
# qwen3_tiny fixture.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/fetch-nvrtc.sh)"
rm -rf gpu-bin && mkdir -p gpu-bin
collect() { # $1 = label, rest = cargo command; copies the built executables
    local label=$1; shift
    "$@" --message-format=json-render-diagnostics \
        | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("ptx", "twins", "qwen3_twin", "bert_twin", "gpu_scoring", "gpu_qwen3", "gpu_bert"):
        print(m["target"]["name"], m["executable"])' \
        | while read -r name exe; do
            cp "$exe" "gpu-bin/$name"
            # Debug info and symbols would take the folder past the device tool's 64 MiB carry
            # limit (55 MiB stripped, with the BERT twin and benchmark); a panic still prints
            # its message.
            strip --strip-all "gpu-bin/$name" 2>/dev/null || true
            echo "gpu-bin/$name ($label)"
        done
}
collect test cargo test -p trajwiki-cuda --features cuda --no-run
collect bench cargo bench -p trajwiki-cuda --features cuda --no-run
# The Python extension with the CUDA backend, unpacked (the device has Python but no network:
# gpu-check.sh puts the folder on sys.path). Stripped to stay within the carry limit.
venv=target/py-venv
[[ -x "$venv/bin/maturin" ]] || { python3 -m venv "$venv" && "$venv/bin/python" -m pip install --quiet "maturin>=1.9,<2"; }
"$venv/bin/maturin" build --profile dev --strip --features cuda --manifest-path python/Cargo.toml \
    --interpreter "$venv/bin/python" --out gpu-bin/wheel-build
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    gpu-bin/wheel-build/trajwiki-*.whl gpu-bin/python
rm -rf gpu-bin/wheel-build
cp scripts/gpu_python_check.py gpu-bin/
cp -r "$TRAJWIKI_CUDA_INCLUDE" gpu-bin/cuda-include
cp scripts/torch_topk.py scripts/torch_qwen3.py scripts/torch_bert.py gpu-bin/
# The tiny random Qwen3 model the twin test compares on (gpu-check.sh points the test at it).
cp -r crates/trajwiki-embed/tests/fixtures/qwen3_tiny gpu-bin/qwen3_tiny
size_kib=$(du -sk gpu-bin | cut -f1)
if (( size_kib > 60 * 1024 )); then
    echo "build-gpu-bins: gpu-bin is ${size_kib} KiB, over the 60 MiB this script allows (64 MiB carry limit)" >&2
    exit 1
fi
du -sh gpu-bin
echo "carry gpu-bin to the device and run: scripts/gpu-check.sh gpu-bin"
