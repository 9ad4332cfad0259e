#!/usr/bin/env python3
"""PyTorch baseline for the MiniLM benchmark (run by scripts/gpu-check.sh after the Rust bench
`gpu_bert`, on the files it wrote into the folder given as argv[1]): what sentence-transformers
computes for a BERT model with mean pooling, written out with transformers (the device has no
network, and sentence-transformers may not be installed there): texts sorted by length (longest
first, as `SentenceTransformer.encode` does), batches of `batch_size`, padded to the batch's
longest with the attention mask, `BertModel` in fp16 with SDPA attention, mean pooling over the
mask, L2 normalisation, results back on the host (the `Transformer` + `Pooling` modules of a
sentence-transformers model run exactly this).

Prints RESULT lines: texts and tokens per second at batch 32 (sentence-transformers' default) and
256 (median of 3 passes over all texts), and the lowest cosine between the Rust output
(rust_pooled.f32) and transformers in fp32 on the first 2,000 texts. Exit status 1 when they
disagree (min cosine < 0.999).
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from transformers import BertConfig, BertModel


def result(name, value, unit):
    print(f"RESULT|{name}|{value:.4f}|{unit}", flush=True)


def encode(model, seqs, batch_size, dtype):
    """Embeds token-id lists as sentence-transformers does; returns (rows in input order, s)."""
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    out = [None] * len(seqs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            longest = max(len(seqs[i]) for i in idx)
            ids = torch.zeros((len(idx), longest), dtype=torch.long)
            mask = torch.zeros((len(idx), longest), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, : len(seqs[i])] = torch.tensor(seqs[i])
                mask[r, : len(seqs[i])] = 1
            ids, mask = ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1).cpu()
            for r, i in enumerate(idx):
                out[i] = pooled[r]
    torch.cuda.synchronize()
    return torch.stack(out).numpy(), time.perf_counter() - t0


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TRAJWIKI_BERT_BENCH_DIR")
    if not d or not os.path.isfile(os.path.join(d, "tokens.json")):
        print("torch_bert: no benchmark folder (run the gpu_bert bench first)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_bert: torch sees no GPU", file=sys.stderr)
        return 2
    seqs = json.load(open(os.path.join(d, "tokens.json")))["ids"]
    tokens = sum(len(s) for s in seqs)
    cfg = BertConfig.from_pretrained(d)
    model16 = BertModel.from_pretrained(
        d, config=cfg, attn_implementation="sdpa", add_pooling_layer=False
    ).half().cuda().eval()
    for batch in (32, 256):
        encode(model16, seqs[:2000], batch, torch.float16)  # warm-up
        times = [encode(model16, seqs, batch, torch.float16)[1] for _ in range(3)]
        med = statistics.median(times)
        result(f"torch_minilm_b{batch}_texts_per_s", len(seqs) / med, "texts/s")
        result(f"torch_minilm_b{batch}_tokens_per_s", tokens / med, "tok/s")
    del model16
    ours_path = os.path.join(d, "rust_pooled.f32")
    if not os.path.isfile(ours_path):
        print("torch_bert: no rust_pooled.f32 to compare with", file=sys.stderr)
        return 2
    ours = np.fromfile(ours_path, dtype=np.float32).reshape(len(seqs), -1)
    model32 = BertModel.from_pretrained(
        d, config=cfg, attn_implementation="sdpa", add_pooling_layer=False
    ).float().cuda().eval()
    n = min(2000, len(seqs))
    ref, _ = encode(model32, seqs[:n], 64, torch.float32)
    cos = (ref * ours[:n]).sum(1)
    result("minilm_min_cosine_vs_transformers_fp32", float(cos.min()), "")
    return 0 if cos.min() >= 0.999 else 1


if __name__ == "__main__":
    sys.exit(main())
