"""PyTorch baseline for the fused top-k benchmark: matmul + topk over N x d fp16 on the GPU,
query batch 1 and 64, timed with CUDA events. Prints RESULT|name|value|unit lines like the
Rust benchmark. Run by scripts/gpu-check.sh; needs torch with CUDA."""
import os
import sys

try:
    import torch
except ImportError:
    print("torch not available; skipping the PyTorch baseline")
    sys.exit(0)
if not torch.cuda.is_available():
    print("torch sees no GPU; skipping the PyTorch baseline")
    sys.exit(0)

n = int(os.environ.get("TRAJWIKI_BENCH_N", 1_000_000))
d = int(os.environ.get("TRAJWIKI_BENCH_D", 1024))
k = int(os.environ.get("TRAJWIKI_BENCH_K", 10))
g = torch.Generator(device="cuda").manual_seed(0)
m = (torch.rand(n, d, device="cuda", generator=g, dtype=torch.float16) - 0.5) * 0.0625
for b in (1, 64):
    q = (torch.rand(b, d, device="cuda", generator=g, dtype=torch.float16) - 0.5) * 0.0625
    for _ in range(3):
        torch.topk(m @ q.T, k, dim=0)
    torch.cuda.synchronize()
    times = []
    for _ in range(30 if b == 1 else 10):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        s, i = torch.topk((m @ q.T).float(), k, dim=0)
        i.cpu()  # results on the host, like the Rust call
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = sorted(times)[len(times) // 2]
    print(f"RESULT|torch_topk_b{b}_ms|{ms:.4f}|ms")
    print(f"RESULT|torch_topk_b{b}_qps|{b / ms * 1e3:.4f}|queries/s")
