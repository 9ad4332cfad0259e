#!/usr/bin/env bash
# One call on a lent GPU machine (no Rust there): runs the carried `--features cuda` binaries
# from gpu-bin/ (or the directory given as $1) — the PTX check, the CUDA-vs-CPU twin tests, the
# scoring benchmark — and the PyTorch baseline, then prints a results table last and writes it
# to $OUT/gpu-results.md. Build the binaries first with scripts/build-gpu-bins.sh.
# Exit status: 0 all passed; 1 a check failed; 3 no GPU here (nothing run); 4 no binaries.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-gpu-bin}"
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: no GPU on this machine (nvidia-smi missing or lists no device); nothing run, exit status 3" >&2
    exit 3
fi
if [[ ! -x "$bin/twins" || ! -x "$bin/gpu_scoring" ]]; then
    echo "gpu-check: no binaries in $bin; run scripts/build-gpu-bins.sh on the build machine and carry $bin" >&2
    exit 4
fi

export TRAJWIKI_REQUIRE_GPU=1 TRAJWIKI_REQUIRE_NVRTC=1
if [[ -z "${TRAJWIKI_CUDA_INCLUDE:-}" && ! -f /usr/local/cuda/include/cuda_fp16.h && -d "$bin/cuda-include" ]]; then
    export TRAJWIKI_CUDA_INCLUDE="$PWD/$bin/cuda-include"
fi
# NVRTC from the toolkit or from a pip-installed wheel, if the loader does not find it already.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__file__))' 2>/dev/null | sed 's|$|/cu13/lib|'); do
    [[ -f "$d/libnvrtc.so.13" ]] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

device="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
status=0
rows=()
step() { # $1 = label, $2 = timeout seconds, rest = command; logs to $out/<label>.log
    local label=$1 limit=$2; shift 2
    local t0=$SECONDS
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
step ptx 120 "$bin/ptx" --nocapture
step twins 240 "$bin/twins" --test-threads 1
step gpu_scoring 300 "$bin/gpu_scoring" --bench
if python3 -c 'import torch' >/dev/null 2>&1; then
    step torch_topk 180 python3 "$bin/torch_topk.py"
else
    rows+=("| torch_topk | skipped (no torch) | |")
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
        } }' "$out/results.txt"
} >"$out/gpu-results.md"
cat "$out/gpu-results.md"
exit $status
