#!/usr/bin/env bash
# One call on a lent GPU machine (no Rust there): runs the carried `--features cuda` binaries
# from gpu-bin/ (or the directory given as $1) — the PTX check, the CUDA-vs-CPU twin tests of the
# scoring kernels, of the Qwen3 model and of the BERT-family encoder, the scoring benchmark, the
# MiniLM-shaped and Qwen3-Embedding-0.6B-shaped forward benchmarks, the Python bindings with
# device="cuda" against device="cpu" — and the PyTorch baselines (top-k; transformers BertModel in
# fp16 computing what sentence-transformers does, and Qwen3Model with SDPA, on the same weights and
# token ids, with the deviation of the pooled vectors), then prints a results table last and
# writes it to $OUT/gpu-results.md. All steps together stay within 9 minutes (each step's timeout
# is cut to what is left). Build the binaries first with
# scripts/build-gpu-bins.sh.
# Exit status: 0 all passed; 1 a check failed; 3 no GPU here (nothing run); 4 no binaries.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-gpu-bin}"
[[ -d "$bin" ]] && bin="$(cd "$bin" && pwd)"
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: no GPU on this machine (nvidia-smi missing or lists no device); nothing run, exit status 3" >&2
    exit 3
fi
if [[ ! -x "$bin/twins" || ! -x "$bin/gpu_scoring" || ! -x "$bin/qwen3_twin" || ! -x "$bin/gpu_qwen3"
      || ! -x "$bin/bert_twin" || ! -x "$bin/gpu_bert" ]]; then
    echo "gpu-check: no binaries in $bin; run scripts/build-gpu-bins.sh on the build machine and carry $bin" >&2
    exit 4
fi

export TRAJWIKI_REQUIRE_GPU=1 TRAJWIKI_REQUIRE_NVRTC=1
if [[ -z "${TRAJWIKI_CUDA_INCLUDE:-}" && ! -f /usr/local/cuda/include/cuda_fp16.h && -d "$bin/cuda-include" ]]; then
    export TRAJWIKI_CUDA_INCLUDE="$bin/cuda-include"
fi
# NVRTC and cuBLAS from the toolkit or from pip-installed wheels (PyTorch's), if the loader does
# not find them already.
nv_root="$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__file__))' 2>/dev/null || true)"
for d in /usr/local/cuda/lib64 ${nv_root:+"$nv_root"/cu13/lib "$nv_root"/cublas/lib "$nv_root"/cuda_nvrtc/lib}; do
    if [[ -f "$d/libnvrtc.so.13" || -f "$d/libcublas.so.13" || -f "$d/libcublas.so.12" ]]; then
        export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
done
export TRAJWIKI_QWEN3_FIXTURE="$bin/qwen3_tiny"
qwen3_dir="$(mktemp -d)"  # the benchmark model (1.2 GB): outside $OUT, which comes back
bert_dir="$(mktemp -d)"   # the MiniLM-shaped one (90 MB) and its outputs
trap 'rm -rf "$qwen3_dir" "$bert_dir"' EXIT

device="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
status=0
rows=()
budget=540 # seconds for all steps together
step() { # $1 = label, $2 = timeout seconds, rest = command; logs to $out/<label>.log
    local label=$1 limit=$2; shift 2
    local t0=$SECONDS left=$((budget - SECONDS))
    if (( left < 10 )); then
        rows+=("| $label | skipped (9-minute budget spent) | |")
        status=1
        return
    fi
    (( limit > left )) && limit=$left
    timeout "$limit" "$@" >"$out/$label.log" 2>&1
    local rc=$?
    local verdict=pass
    [[ $rc -ne 0 ]] && verdict="FAIL (exit $rc)" && status=1
    rows+=("| $label | $verdict | $((SECONDS - t0)) s |")
    grep '^RESULT|' "$out/$label.log" >>"$out/results.txt" || true
    echo "== $label: $verdict" >&2
    tail -5 "$out/$label.log" >&2
}
: >"$out/results.txt"
step ptx 60 "$bin/ptx" --nocapture
step twins 90 "$bin/twins" --test-threads 1
step qwen3_twin 60 "$bin/qwen3_twin" --test-threads 1 --nocapture
step bert_twin 60 "$bin/bert_twin" --test-threads 1 --nocapture
step gpu_bert 90 env TRAJWIKI_BERT_BENCH_DIR="$bert_dir" "$bin/gpu_bert" --bench
step gpu_qwen3 120 env TRAJWIKI_QWEN3_BENCH_DIR="$qwen3_dir" "$bin/gpu_qwen3" --bench
step gpu_scoring 120 "$bin/gpu_scoring" --bench
if [[ -d "$bin/python/trajwiki" ]] && python3 -c 'import numpy' >/dev/null 2>&1; then
    step python_cuda 60 python3 "$bin/gpu_python_check.py" "$bin/python" "$PWD" "$bin/qwen3_tiny"
else
    rows+=("| python_cuda | skipped (no extension in $bin/python, or no NumPy) | |")
fi
if python3 -c 'import torch, transformers' >/dev/null 2>&1; then
    step torch_bert 120 python3 "$bin/torch_bert.py" "$bert_dir"
    step torch_qwen3 120 python3 "$bin/torch_qwen3.py" "$qwen3_dir"
    step torch_topk 60 python3 "$bin/torch_topk.py"
else
    rows+=("| torch_bert, torch_qwen3, torch_topk | skipped (no torch or transformers) | |")
fi

{
    echo "# GPU check — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Device: $device"
    echo "Command: scripts/gpu-check.sh $bin"
    echo
    echo "| step | verdict | time |"
    echo "|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "| measurement | value | unit |"
    echo "|---|---|---|"
    awk -F'|' '{ printf "| %s | %s | %s |\n", $2, $3, $4 }' "$out/results.txt"
    # Ratios against PyTorch where both ran.
    awk -F'|' '{ v[$2] = $3 } END {
        for (b = 1; b <= 64; b *= 64) {
            r = "topk_b" b "_ms"; t = "torch_topk_b" b "_ms";
            if ((r in v) && (t in v) && v[r] > 0) printf "| speed-up vs torch, batch %d | %.2f | x |\n", b, v[t] / v[r];
        }
        r = "minilm_texts_per_s";
        for (b = 32; b <= 256; b *= 8) {
            t = "torch_minilm_b" b "_texts_per_s";
            if ((r in v) && (t in v) && v[t] > 0) printf "| MiniLM speed vs sentence-transformers computation, batch %d (texts/s ratio) | %.2f | x |\n", b, v[r] / v[t];
        }
        r = "qwen3_tokens_per_s"; t = "torch_qwen3_tokens_per_s";
        if ((r in v) && (t in v) && v[t] > 0) printf "| Qwen3 forward speed vs transformers (tokens/s ratio) | %.2f | x |\n", v[r] / v[t];
    }' "$out/results.txt"
} >"$out/gpu-results.md"
cat "$out/gpu-results.md"
exit $status
