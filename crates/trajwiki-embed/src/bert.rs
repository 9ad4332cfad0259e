//! BERT-family sentence encoders (all-MiniLM-L6-v2, BGE, E5 …): a bidirectional encoder, then mean
//! or CLS pooling as the model folder's sentence-transformers pooling config says, then L2
//! normalisation.

use std::path::Path;

use trajwiki_core::embed::{EmbedError, EmbedKind, Embedder, Embeddings};

use crate::engine::{offsets, out_dim, EmbedOptions, Runtime};
use crate::ops::{self, AttnShape, Linear};
use crate::resolve::{fingerprint, read_json};
use crate::tokenize::Tok;
use crate::weights::Weights;

/// How token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over the tokens of the text (special tokens included, as sentence-transformers does).
    Mean,
    /// The state of the first (`[CLS]`) token.
    Cls,
}

impl Pooling {
    fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
}

/// The fields of a BERT `config.json` that the forward pass needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct BertConfig {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub(crate) type_vocab_size: usize,
    #[serde(default = "default_ln_eps")]
    pub(crate) layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub(crate) hidden_act: String,
    #[serde(default)]
    pub(crate) position_embedding_type: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}
fn default_ln_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}

#[derive(serde::Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(serde::Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// Reads the pooling mode from the sentence-transformers files of `dir`: the `Pooling` module
/// named in `modules.json`, else `1_Pooling/config.json`, else `pooling_config.json`; mean pooling
/// when there is none.
pub fn pooling_of(dir: &Path) -> Result<Pooling, EmbedError> {
    let mut candidates = Vec::new();
    let modules = dir.join("modules.json");
    if modules.is_file() {
        let mods: Vec<Module> = read_json(&modules)?;
        for m in mods.iter().filter(|m| m.kind.ends_with("Pooling")) {
            candidates.push(dir.join(&m.path).join("config.json"));
        }
    }
    candidates.push(dir.join("1_Pooling").join("config.json"));
    candidates.push(dir.join("pooling_config.json"));
    let Some(path) = candidates.into_iter().find(|p| p.is_file()) else {
        return Ok(Pooling::Mean);
    };
    let cfg: PoolingConfig = read_json(&path)?;
    match (
        cfg.pooling_mode_cls_token,
        cfg.pooling_mode_mean_tokens,
        cfg.pooling_mode_max_tokens || cfg.pooling_mode_mean_sqrt_len_tokens,
    ) {
        (true, false, false) => Ok(Pooling::Cls),
        (false, true, false) => Ok(Pooling::Mean),
        _ => Err(EmbedError::InvalidModel {
            path,
            what: "unsupported pooling: exactly one of pooling_mode_cls_token and \
                   pooling_mode_mean_tokens must be true"
                .into(),
        }),
    }
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    ln1_w: Vec<f32>,
    ln1_b: Vec<f32>,
    inter: Linear,
    out: Linear,
    ln2_w: Vec<f32>,
    ln2_b: Vec<f32>,
}

/// A BERT-family sentence encoder on the CPU.
pub struct BertEmbedder {
    cfg: BertConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln_w: Vec<f32>,
    emb_ln_b: Vec<f32>,
    layers: Vec<Layer>,
    tok: Tok,
    pooling: Pooling,
    dim: usize,
    model_id: String,
    rt: Runtime,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder")
            .field("model_id", &self.model_id)
            .field("layers", &self.layers.len())
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

/// LayerNorm weights, under either naming (`weight`/`bias` or the older `gamma`/`beta`).
fn ln(w: &Weights, prefix: &str, dim: usize) -> Result<(Vec<f32>, Vec<f32>), EmbedError> {
    if w.contains(&format!("{prefix}.gamma")) {
        Ok((
            w.get(&format!("{prefix}.gamma"), &[dim])?,
            w.get(&format!("{prefix}.beta"), &[dim])?,
        ))
    } else {
        Ok((
            w.get(&format!("{prefix}.weight"), &[dim])?,
            w.get(&format!("{prefix}.bias"), &[dim])?,
        ))
    }
}

impl BertEmbedder {
    /// Loads a BERT-family model folder: `config.json`, `tokenizer.json`, `model.safetensors`
    /// (or shards), and the sentence-transformers pooling config if any. The token limit is
    /// `sentence_bert_config.json`'s `max_seq_length`, else `max_position_embeddings`.
    pub fn load(dir: &Path, opts: &EmbedOptions) -> Result<BertEmbedder, EmbedError> {
        let config_path = dir.join("config.json");
        let cfg: BertConfig = read_json(&config_path)?;
        let invalid = |what: String| EmbedError::InvalidModel {
            path: config_path.clone(),
            what,
        };
        if cfg.num_attention_heads == 0 || !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads)
        {
            return Err(invalid(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        if !matches!(cfg.hidden_act.as_str(), "gelu" | "gelu_new" | "gelu_python") {
            return Err(invalid(format!(
                "unsupported hidden_act {}",
                cfg.hidden_act
            )));
        }
        if cfg
            .position_embedding_type
            .as_deref()
            .is_some_and(|t| t != "absolute")
        {
            return Err(invalid(
                "only absolute position embeddings are supported".into(),
            ));
        }
        let st_cfg = dir.join("sentence_bert_config.json");
        let st_max = if st_cfg.is_file() {
            read_json::<SentenceBertConfig>(&st_cfg)?.max_seq_length
        } else {
            None
        };
        let max_len = opts
            .max_len
            .or(st_max)
            .unwrap_or(cfg.max_position_embeddings)
            .min(cfg.max_position_embeddings);
        let tok = Tok::open(dir, max_len)?;
        let pooling = pooling_of(dir)?;
        let dim = out_dim(opts.dim, cfg.hidden_size)?;

        let w = Weights::open(dir, "embeddings.word_embeddings.weight", &["", "bert."])?;
        let h = cfg.hidden_size;
        let word = w.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?;
        let position = w.get(
            "embeddings.position_embeddings.weight",
            &[cfg.max_position_embeddings, h],
        )?;
        let token_type = w.get(
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        let (emb_ln_w, emb_ln_b) = ln(&w, "embeddings.LayerNorm", h)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let qkv = Linear::concat(vec![
                w.linear(&format!("{p}.attention.self.query"), h, h)?,
                w.linear(&format!("{p}.attention.self.key"), h, h)?,
                w.linear(&format!("{p}.attention.self.value"), h, h)?,
            ]);
            let (ln1_w, ln1_b) = ln(&w, &format!("{p}.attention.output.LayerNorm"), h)?;
            let (ln2_w, ln2_b) = ln(&w, &format!("{p}.output.LayerNorm"), h)?;
            layers.push(Layer {
                qkv,
                attn_out: w.linear(&format!("{p}.attention.output.dense"), h, h)?,
                ln1_w,
                ln1_b,
                inter: w.linear(&format!("{p}.intermediate.dense"), h, cfg.intermediate_size)?,
                out: w.linear(&format!("{p}.output.dense"), cfg.intermediate_size, h)?,
                ln2_w,
                ln2_b,
            });
        }
        let model_id = format!("bert-{}-d{dim}-{}", pooling.name(), fingerprint(dir)?);
        Ok(BertEmbedder {
            cfg,
            word,
            position,
            token_type,
            emb_ln_w,
            emb_ln_b,
            layers,
            tok,
            pooling,
            dim,
            model_id,
            rt: Runtime::new(opts)?,
        })
    }

    /// The pooling this model uses.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Token ids of `texts` as the model sees them (special tokens added, truncated).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        self.rt.pool.install(|| self.tok.encode(texts, None))
    }

    /// Pooled (not normalised) hidden states of a packed batch: `batch × hidden`.
    fn forward(&self, batch: &[&[u32]]) -> Vec<f32> {
        let cfg = &self.cfg;
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps as f32;
        let threads = self.rt.threads;
        let seqs = offsets(batch);
        let rows: usize = seqs.iter().map(|s| s.1).sum();

        let mut x = vec![0.0f32; rows * h];
        let mut r = 0;
        for ids in batch {
            for (pos, &id) in ids.iter().enumerate() {
                let dst = &mut x[r * h..(r + 1) * h];
                let id = (id as usize).min(cfg.vocab_size - 1);
                let wv = &self.word[id * h..(id + 1) * h];
                let pv = &self.position[pos * h..(pos + 1) * h];
                let tv = &self.token_type[..h];
                for (((d, a), b), c) in dst.iter_mut().zip(wv).zip(pv).zip(tv) {
                    *d = a + b + c;
                }
                r += 1;
            }
        }
        ops::layer_norm(&mut x, h, &self.emb_ln_w, &self.emb_ln_b, eps);

        let shape = AttnShape {
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            causal: false,
        };
        for layer in &self.layers {
            let qkv = layer.qkv.forward(&x, rows, threads);
            let ctx = ops::attention(&qkv, &seqs, shape);
            let attn = layer.attn_out.forward(&ctx, rows, threads);
            ops::add_layer_norm(&mut x, &attn, h, &layer.ln1_w, &layer.ln1_b, eps);
            let mut inter = layer.inter.forward(&x, rows, threads);
            ops::gelu_erf(&mut inter);
            let out = layer.out.forward(&inter, rows, threads);
            ops::add_layer_norm(&mut x, &out, h, &layer.ln2_w, &layer.ln2_b, eps);
        }

        let mut pooled = vec![0.0f32; batch.len() * h];
        for (dst, &(off, len)) in pooled.chunks_exact_mut(h).zip(&seqs) {
            match self.pooling {
                Pooling::Cls => dst.copy_from_slice(&x[off * h..(off + 1) * h]),
                Pooling::Mean => {
                    for row in x[off * h..(off + len) * h].chunks_exact(h) {
                        for (d, v) in dst.iter_mut().zip(row) {
                            *d += v;
                        }
                    }
                    let inv = 1.0 / len.max(1) as f32;
                    dst.iter_mut().for_each(|d| *d *= inv);
                }
            }
        }
        pooled
    }
}

impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str], _kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let mut seqs = self.tokenize(texts)?;
        // A tokenizer without special tokens can return nothing for an empty text; give such a
        // text one padding token so that every sequence has a row to pool.
        seqs.iter_mut()
            .filter(|s| s.is_empty())
            .for_each(|s| s.push(0));
        self.rt
            .run_batched(&seqs, self.cfg.hidden_size, self.dim, |b| self.forward(b))
    }
}
