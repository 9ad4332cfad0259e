#!/usr/bin/env python3
"""A tiny random Qwen3 embedding model and its reference outputs, for the Rust parity test.

Requirements (a throwaway venv; CI only reads the committed fixture):
    pip install torch==2.15.0 transformers==5.24.0 tokenizers==0.23.3 safetensors==0.8.0

Usage:
    python scripts/make_qwen3_fixture.py [OUT_DIR]   # default crates/trajwiki-embed/tests/fixtures/qwen3_tiny

Writes config.json, tokenizer.json (a byte-level BPE trained here, with <|endoftext|> appended
to every text by its post-processor, as Qwen3-Embedding's tokenizer does), model.safetensors
(bf16, no `model.` prefix, as Qwen3-Embedding checkpoints are saved) and reference.json: the
last-token-pooled, L2-normalised outputs of a mixed-length batch run with left padding, eager
attention and fp32, for documents, for queries with the instruction prefix, and truncated to an
MRL dimension then renormalised. No hub access.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

END = "<|endoftext|>"
TASK = "Given a question about a conversation, retrieve the turns that answer it"
MRL_DIM = 32

DOCUMENTS = [
    "Hi",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise by the lake last year; she says painting helps her relax after "
    "long days at work, and she wants to take her kids camping in June before the summer gets "
    "too hot. Ünïcödé and 🎉 bytes too.",
    "",
    "What a day!",
]
QUERIES = [
    "When did Caroline go to the support group?",
    "painting",
    "What does Melanie want to do in June with her kids?",
]

CORPUS = DOCUMENTS + QUERIES + [
    f"Instruct: {TASK}\nQuery:",
    "the a and to of in is was she her he his they we you it on at for with by from",
    "Caroline Melanie support group painting camping kids sunrise lake summer work",
]


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    end_id = tok.token_to_id(END)
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {END}", special_tokens=[(END, end_id)]
    )
    return tok


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "crates/trajwiki-embed/tests/fixtures/qwen3_tiny"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1234)
    tok = build_tokenizer()
    tok.save(os.path.join(out, "tokenizer.json"))

    config = Qwen3Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        eos_token_id=tok.token_to_id(END),
        pad_token_id=tok.token_to_id(END),
    )
    config._attn_implementation = "eager"
    model = Qwen3Model(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))  # make the norms matter
            else:
                p.copy_(0.08 * torch.randn_like(p))
        # Store in bf16 (keeps the fixture small) and compute the reference from exactly those values.
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    config.save_pretrained(out)
    state = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=END)
    hf_tok.padding_side = "left"

    def embed(texts):
        batch = hf_tok(texts, padding=True, return_tensors="pt")
        assert all(row[-1] == config.eos_token_id for row in batch["input_ids"].tolist())
        with torch.no_grad():
            h = model(**batch).last_hidden_state[:, -1]
        return h, [int(m.sum()) for m in batch["attention_mask"]]

    doc_h, doc_lens = embed(DOCUMENTS)
    query_texts = [f"Instruct: {TASK}\nQuery:{q}" for q in QUERIES]
    query_h, query_lens = embed(query_texts)
    data = {
        "task": TASK,
        "mrl_dim": MRL_DIM,
        "documents": DOCUMENTS,
        "queries": QUERIES,
        "document_token_counts": doc_lens,
        "query_token_counts": query_lens,
        "documents_embeddings": F.normalize(doc_h, dim=-1).tolist(),
        "queries_embeddings": F.normalize(query_h, dim=-1).tolist(),
        "queries_embeddings_mrl": F.normalize(query_h[:, :MRL_DIM], dim=-1).tolist(),
        "documents_embeddings_mrl": F.normalize(doc_h[:, :MRL_DIM], dim=-1).tolist(),
    }
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {out}: vocab {tok.get_vocab_size()}, doc tokens {doc_lens}, query tokens {query_lens}")


if __name__ == "__main__":
    main()
