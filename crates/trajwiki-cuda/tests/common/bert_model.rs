//! A small random BERT-family model folder written from a seed, shared by the twin test and the
//! GPU benchmark (`#[path]`-included by both).
#![allow(dead_code)] // each includer uses a part

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};

/// A small BERT model folder.
pub struct Shape {
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub cls: bool,
    /// Vocabulary size: the tokenizer's words, then `[unused…]` entries up to it (`None`: the
    /// words alone).
    pub vocab: Option<usize>,
}

/// xorshift64*: the same weights on every run and machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        v as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    fn fill(&mut self, n: usize, centre: f32, spread: f32) -> Vec<f32> {
        (0..n).map(|_| centre + spread * self.uniform()).collect()
    }
}

const WORDS: &[&str] = &[
    "the", "i", "we", "went", "to", "a", "and", "my", "caroline", "melanie", "painting", "camping",
    "adoption", "support", "group", "last", "week", "friday", "with", "kids", "beach", "book",
];

fn vocab(size: Option<usize>) -> Vec<String> {
    let mut v: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for c in ('a'..='z').chain('0'..='9') {
        v.push(c.to_string());
        v.push(format!("##{c}"));
    }
    for p in [".", ",", "!", "?", "'", "-", ":"] {
        v.push(p.to_string());
    }
    v.extend(WORDS.iter().map(|w| w.to_string()));
    let words = v.len();
    v.extend((words..size.unwrap_or(0)).map(|i| format!("[unused{i}]")));
    v
}

/// Writes a BERT model folder of shape `s` with weights drawn from `seed`: `config.json`, the
/// sentence-transformers pooling config, a WordPiece `tokenizer.json` (lower-cased words, letters
/// and `##` letters, so any text tokenises) and f32 `model.safetensors`. Returns the vocabulary
/// size.
pub fn write_model(dir: &Path, s: &Shape, seed: u64) -> usize {
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    let vocab = vocab(s.vocab);
    let max_pos = 512;
    let config = serde_json::json!({
        "model_type": "bert", "vocab_size": vocab.len(), "hidden_size": s.hidden,
        "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
        "intermediate_size": s.intermediate, "max_position_embeddings": max_pos,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let pooling = serde_json::json!({
        "word_embedding_dimension": s.hidden,
        "pooling_mode_cls_token": s.cls, "pooling_mode_mean_tokens": !s.cls,
    });
    std::fs::write(dir.join("1_Pooling/config.json"), pooling.to_string()).unwrap();
    let special = |id: usize, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                           "rstrip": false, "normalized": false, "special": true})
    };
    let ids: serde_json::Map<String, serde_json::Value> = vocab
        .iter()
        .enumerate()
        .map(|(i, w)| (w.clone(), serde_json::json!(i)))
        .collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
                         special(3, "[SEP]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true,
                       "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();

    let mut rng = Rng(seed);
    let h = s.hidden;
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, centre: f32, spread: f32| {
        let n = shape.iter().product();
        tensors.push((name, shape, rng.fill(n, centre, spread)));
    };
    add(
        "embeddings.word_embeddings.weight".into(),
        vec![vocab.len(), h],
        0.0,
        0.5,
    );
    add(
        "embeddings.position_embeddings.weight".into(),
        vec![max_pos, h],
        0.0,
        0.2,
    );
    add(
        "embeddings.token_type_embeddings.weight".into(),
        vec![2, h],
        0.0,
        0.1,
    );
    add("embeddings.LayerNorm.weight".into(), vec![h], 1.0, 0.2);
    add("embeddings.LayerNorm.bias".into(), vec![h], 0.0, 0.1);
    let scale = |fan_in: usize| 1.7 / (fan_in as f32).sqrt();
    for l in 0..s.layers {
        let p = format!("encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", s.intermediate, h),
            ("output.dense", h, s.intermediate),
        ] {
            add(
                format!("{p}.{name}.weight"),
                vec![out, inp],
                0.0,
                scale(inp),
            );
            add(format!("{p}.{name}.bias"), vec![out], 0.0, 0.1);
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            add(format!("{p}.{norm}.weight"), vec![h], 1.0, 0.2);
            add(format!("{p}.{norm}.bias"), vec![h], 0.0, 0.1);
        }
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(n, shape, v)| (n, shape, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(n, shape, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, shape.clone(), b).unwrap(),
            )
        })
        .collect();
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(views, Some(meta), &dir.join("model.safetensors")).unwrap();
    vocab.len()
}
