#!/usr/bin/env python3
"""PyTorch baseline for the Qwen3-Embedding benchmark (run by scripts/gpu-check.sh after the Rust
bench `gpu_qwen3`, on the files it wrote into the folder given as argv[1]): transformers'
Qwen3Model in bf16 with SDPA attention on the same random weights and the same token ids,
left-padded with the attention mask and positions counted from each text's first real token (as
the Rust model does), last-token pooling, L2 normalisation. Prints, as RESULT lines, tokens per
second (real tokens of the batch, host to host, median of 7) and the largest deviation of the
pooled vectors from the Rust output (rust_pooled.f32). Exit status 1 when the vectors disagree
(min cosine < 0.99): random weights through 28 bf16 layers differ by rounding, not by meaning.
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from transformers import Qwen3Config, Qwen3Model


def result(name, value, unit):
    print(f"RESULT|{name}|{value:.4f}|{unit}", flush=True)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TRAJWIKI_QWEN3_BENCH_DIR")
    if not d or not os.path.isfile(os.path.join(d, "tokens.json")):
        print("torch_qwen3: no benchmark folder (run the gpu_qwen3 bench first)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_qwen3: torch sees no GPU", file=sys.stderr)
        return 2
    cfg = Qwen3Config.from_pretrained(d)
    kwargs = dict(config=cfg, attn_implementation="sdpa")
    try:
        model = Qwen3Model.from_pretrained(d, dtype=torch.bfloat16, **kwargs)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = Qwen3Model.from_pretrained(d, torch_dtype=torch.bfloat16, **kwargs)
    model = model.cuda().eval()

    with open(os.path.join(d, "tokens.json")) as f:
        meta = json.load(f)
    seqs, pad_id = meta["ids"], meta["pad_id"]
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, length - len(s):] = torch.tensor(s)
        mask[i, length - len(s):] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    tokens = sum(len(s) for s in seqs)

    def run():
        with torch.inference_mode():
            out = model(
                input_ids=ids.cuda(),
                attention_mask=mask.cuda(),
                position_ids=positions.cuda(),
            ).last_hidden_state[:, -1].float()
            out = torch.nn.functional.normalize(out, dim=-1)
            return out.cpu().numpy()

    for _ in range(2):
        run()
    times = []
    for _ in range(7):
        torch.cuda.synchronize()
        t = time.perf_counter()
        pooled = run()
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    result("torch_qwen3_batch_ms", med * 1e3, "ms")
    result("torch_qwen3_tokens_per_s", tokens / med, "tok/s")

    with open(os.path.join(d, "rust_pooled.json")) as f:
        shape = json.load(f)
    rust = np.fromfile(os.path.join(d, "rust_pooled.f32"), dtype="<f4").reshape(
        shape["rows"], shape["dim"]
    )
    torch_rows = pooled[:, : shape["dim"]]
    torch_rows = torch_rows / np.linalg.norm(torch_rows, axis=1, keepdims=True)
    max_dev = float(np.abs(rust - torch_rows).max())
    min_cos = float((rust * torch_rows).sum(axis=1).min())
    result("qwen3_max_abs_dev_vs_torch", max_dev, "abs")
    result("qwen3_min_cos_vs_torch", min_cos, "cosine")
    if not np.isfinite(max_dev) or min_cos < 0.99:
        print(f"torch_qwen3: Rust and transformers disagree (min cosine {min_cos})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
