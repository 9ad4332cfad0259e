//! BERT-family sentence encoders (all-MiniLM-L6-v2, BGE, E5 …): a bidirectional encoder, then mean
//! or CLS pooling as the model folder's sentence-transformers pooling config says, then L2
//! normalisation.

use std::path::Path;

use rayon::prelude::*;

use trajwiki_core::embed::{EmbedError, EmbedKind, Embedder, Embeddings};

use crate::engine::{offsets, out_dim, EmbedOptions, Runtime};
use crate::linear::{Linear, Then};
use crate::ops::{self, AttnShape, Dense};
use crate::resolve::{fingerprint, read_json};
use crate::scratch;
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

/// The shape of a BERT-family encoder, as its `config.json` gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BertShape {
    /// Vocabulary size.
    pub vocab: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward size.
    pub intermediate: usize,
    /// Position limit.
    pub max_positions: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f32,
}

impl BertShape {
    /// Size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads.max(1)
    }
}

/// What running a BERT-family model folder takes on any backend, the weights aside: the shape,
/// the tokenizer, the pooling, the output dimension and the model id.
pub struct BertSpec {
    shape: BertShape,
    tok: Tok,
    pooling: Pooling,
    dim: usize,
    model_id: String,
}

impl std::fmt::Debug for BertSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertSpec")
            .field("shape", &self.shape)
            .field("pooling", &self.pooling)
            .field("dim", &self.dim)
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

impl BertSpec {
    /// The model's shape.
    pub fn shape(&self) -> BertShape {
        self.shape
    }

    /// How token states become one vector.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Output dimension (the hidden size, or the smaller one asked for: the first values,
    /// renormalised).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The model id (see [`Embedder::model_id`]): it names the weights, pooling and output
    /// dimension, not the backend.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Token ids of `texts` as the model sees them (special tokens added, truncated to the
    /// token limit); a text that gives no token gets one padding token, so that every sequence
    /// has a row to pool.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let mut seqs = self.tok.encode(texts, None)?;
        seqs.iter_mut()
            .filter(|s| s.is_empty())
            .for_each(|s| s.push(0));
        Ok(seqs)
    }
}

/// A projection `y = x · Wᵀ + b`, as stored: `weight` is `[out, in]` row-major.
#[derive(Debug, Clone)]
pub struct BertLinear {
    /// `[out, in]` row-major.
    pub weight: Vec<f32>,
    /// `out` values (zeros where the checkpoint has none).
    pub bias: Vec<f32>,
}

/// A LayerNorm's scale and shift.
#[derive(Debug, Clone)]
pub struct BertNorm {
    /// Scale (`weight` or `gamma`).
    pub weight: Vec<f32>,
    /// Shift (`bias` or `beta`).
    pub bias: Vec<f32>,
}

/// One encoder layer's weights, f32.
#[derive(Debug, Clone)]
pub struct BertLayerWeights {
    /// Query, key and value projections stacked along `out` (`[3·hidden, hidden]`).
    pub qkv: BertLinear,
    /// Attention output projection.
    pub attn_out: BertLinear,
    /// LayerNorm after attention (with the residual).
    pub attn_norm: BertNorm,
    /// Feed-forward up projection (GELU after it).
    pub inter: BertLinear,
    /// Feed-forward down projection.
    pub out: BertLinear,
    /// LayerNorm after the feed-forward block (with the residual).
    pub out_norm: BertNorm,
}

/// A BERT-family model's weights as f32 host matrices, for a backend to keep or upload.
#[derive(Debug, Clone)]
pub struct BertWeights {
    /// Word embeddings, `[vocab, hidden]`.
    pub word: Vec<f32>,
    /// Position embeddings, `[max_positions, hidden]`.
    pub position: Vec<f32>,
    /// The token-type embedding every token gets (type 0), `[hidden]`.
    pub token_type: Vec<f32>,
    /// LayerNorm of the embeddings.
    pub embed_norm: BertNorm,
    /// Encoder layers.
    pub layers: Vec<BertLayerWeights>,
}

/// LayerNorm weights, under either naming (`weight`/`bias` or the older `gamma`/`beta`).
fn ln(w: &Weights, prefix: &str, dim: usize) -> Result<BertNorm, EmbedError> {
    let (wn, bn) = if w.contains(&format!("{prefix}.gamma")) {
        ("gamma", "beta")
    } else {
        ("weight", "bias")
    };
    Ok(BertNorm {
        weight: w.get(&format!("{prefix}.{wn}"), &[dim])?,
        bias: w.get(&format!("{prefix}.{bn}"), &[dim])?,
    })
}

fn linear(
    w: &Weights,
    prefix: &str,
    in_dim: usize,
    out_dim: usize,
) -> Result<BertLinear, EmbedError> {
    let l = w.linear(prefix, in_dim, out_dim)?;
    Ok(BertLinear {
        bias: l.bias.unwrap_or_else(|| vec![0.0; out_dim]),
        weight: l.weight,
    })
}

/// Opens a BERT-family model folder for any backend: `config.json` (validated), `tokenizer.json`,
/// the safetensors weights (one file or shards, with or without the `bert.` prefix) and the
/// sentence-transformers pooling config if any. The token limit is `opts.max_len`, else
/// `sentence_bert_config.json`'s `max_seq_length`, else `max_position_embeddings`.
pub fn open_bert(dir: &Path, opts: &EmbedOptions) -> Result<(BertSpec, BertWeights), EmbedError> {
    let config_path = dir.join("config.json");
    let cfg: BertConfig = read_json(&config_path)?;
    let invalid = |what: String| EmbedError::InvalidModel {
        path: config_path.clone(),
        what,
    };
    if cfg.num_attention_heads == 0 || !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
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
    if cfg.vocab_size == 0 || cfg.type_vocab_size == 0 || cfg.max_position_embeddings == 0 {
        return Err(invalid(
            "vocab_size, type_vocab_size and max_position_embeddings must be positive".into(),
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
    let mut token_type = w.get(
        "embeddings.token_type_embeddings.weight",
        &[cfg.type_vocab_size, h],
    )?;
    token_type.truncate(h);
    let embed_norm = ln(&w, "embeddings.LayerNorm", h)?;
    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for i in 0..cfg.num_hidden_layers {
        let p = format!("encoder.layer.{i}");
        let (q, k, v) = (
            linear(&w, &format!("{p}.attention.self.query"), h, h)?,
            linear(&w, &format!("{p}.attention.self.key"), h, h)?,
            linear(&w, &format!("{p}.attention.self.value"), h, h)?,
        );
        let qkv = BertLinear {
            weight: [q.weight, k.weight, v.weight].concat(),
            bias: [q.bias, k.bias, v.bias].concat(),
        };
        layers.push(BertLayerWeights {
            qkv,
            attn_out: linear(&w, &format!("{p}.attention.output.dense"), h, h)?,
            attn_norm: ln(&w, &format!("{p}.attention.output.LayerNorm"), h)?,
            inter: linear(
                &w,
                &format!("{p}.intermediate.dense"),
                h,
                cfg.intermediate_size,
            )?,
            out: linear(&w, &format!("{p}.output.dense"), cfg.intermediate_size, h)?,
            out_norm: ln(&w, &format!("{p}.output.LayerNorm"), h)?,
        });
    }
    let model_id = format!("bert-{}-d{dim}-{}", pooling.name(), fingerprint(dir)?);
    let shape = BertShape {
        vocab: cfg.vocab_size,
        hidden: h,
        layers: cfg.num_hidden_layers,
        heads: cfg.num_attention_heads,
        intermediate: cfg.intermediate_size,
        max_positions: cfg.max_position_embeddings,
        layer_norm_eps: cfg.layer_norm_eps as f32,
    };
    let spec = BertSpec {
        shape,
        tok,
        pooling,
        dim,
        model_id,
    };
    let weights = BertWeights {
        word,
        position,
        token_type,
        embed_norm,
        layers,
    };
    Ok((spec, weights))
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: BertNorm,
    inter: Linear,
    out: Linear,
    out_norm: BertNorm,
}

impl From<BertLinear> for Dense {
    fn from(l: BertLinear) -> Dense {
        let (out_dim, in_dim) = (l.bias.len(), l.weight.len() / l.bias.len().max(1));
        Dense {
            weight: l.weight,
            bias: Some(l.bias),
            in_dim,
            out_dim,
        }
    }
}

/// A BERT-family sentence encoder on the CPU.
pub struct BertEmbedder {
    spec: BertSpec,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: BertNorm,
    layers: Vec<Layer>,
    rt: Runtime,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl BertEmbedder {
    /// Loads a BERT-family model folder (see [`open_bert`]) to run on the CPU.
    pub fn load(dir: &Path, opts: &EmbedOptions) -> Result<BertEmbedder, EmbedError> {
        let (mut spec, w) = open_bert(dir, opts)?;
        spec.model_id.push_str(&opts.precision.id_suffix());
        let rt = Runtime::new(opts)?;
        let layers = w
            .layers
            .into_iter()
            .map(|l| Layer {
                qkv: rt.linear_sensitive(l.qkv.into()),
                attn_out: rt.linear(l.attn_out.into()),
                attn_norm: l.attn_norm,
                inter: rt.linear(l.inter.into()),
                out: rt.linear_sensitive(l.out.into()),
                out_norm: l.out_norm,
            })
            .collect();
        Ok(BertEmbedder {
            spec,
            word: w.word,
            position: w.position,
            token_type: w.token_type,
            embed_norm: w.embed_norm,
            layers,
            rt,
        })
    }

    /// The pooling this model uses.
    pub fn pooling(&self) -> Pooling {
        self.spec.pooling
    }

    /// The model's shape, tokenizer, pooling and output dimension.
    pub fn spec(&self) -> &BertSpec {
        &self.spec
    }

    /// Token ids of `texts` as the model sees them (special tokens added, truncated).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        self.rt.pool.install(|| self.spec.tokenize(texts))
    }

    /// Pooled (not normalised) hidden states of a packed batch: `batch × hidden`.
    fn forward(&self, batch: &[&[u32]]) -> Vec<f32> {
        let shape = self.spec.shape;
        let h = shape.hidden;
        let eps = shape.layer_norm_eps;
        let seqs = offsets(batch);
        let rows: usize = seqs.iter().map(|s| s.1).sum();

        // Every value of `x` is written below.
        let mut x = scratch::F32.take(rows * h);
        let tokens: Vec<(usize, usize)> = batch
            .iter()
            .flat_map(|ids| ids.iter().enumerate())
            .map(|(pos, &id)| ((id as usize).min(shape.vocab - 1), pos))
            .collect();
        x.par_chunks_mut(h)
            .zip(tokens.par_iter())
            .with_min_len(64)
            .for_each(|(dst, &(id, pos))| {
                let wv = &self.word[id * h..(id + 1) * h];
                let pv = &self.position[pos * h..(pos + 1) * h];
                let tv = &self.token_type[..h];
                for (((d, a), b), c) in dst.iter_mut().zip(wv).zip(pv).zip(tv) {
                    *d = a + b + c;
                }
            });
        ops::layer_norm(
            &mut x,
            h,
            &self.embed_norm.weight,
            &self.embed_norm.bias,
            eps,
        );

        let attn_shape = AttnShape {
            heads: shape.heads,
            kv_heads: shape.heads,
            head_dim: shape.head_dim(),
            causal: false,
        };
        for layer in &self.layers {
            let qkv = layer.qkv.forward(&x, rows, Then::Store);
            let ctx = ops::attention(&qkv, &seqs, attn_shape);
            scratch::F32.give(qkv);
            let attn = layer.attn_out.forward(&ctx, rows, Then::Store);
            scratch::F32.give(ctx);
            ops::add_layer_norm(
                &mut x,
                &attn,
                h,
                &layer.attn_norm.weight,
                &layer.attn_norm.bias,
                eps,
            );
            scratch::F32.give(attn);
            let inter = layer.inter.forward(&x, rows, Then::Gelu);
            let out = layer.out.forward(&inter, rows, Then::Store);
            scratch::F32.give(inter);
            ops::add_layer_norm(
                &mut x,
                &out,
                h,
                &layer.out_norm.weight,
                &layer.out_norm.bias,
                eps,
            );
            scratch::F32.give(out);
        }

        let mut pooled = vec![0.0f32; batch.len() * h];
        for (dst, &(off, len)) in pooled.chunks_exact_mut(h).zip(&seqs) {
            match self.spec.pooling {
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
        scratch::F32.give(x);
        pooled
    }
}

impl Embedder for BertEmbedder {
    fn kernel(&self) -> Option<String> {
        Some(self.rt.kernel.describe(self.rt.precision))
    }

    fn model_id(&self) -> &str {
        self.spec.model_id()
    }

    fn dim(&self) -> usize {
        self.spec.dim
    }

    fn embed(&self, texts: &[&str], _kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let seqs = self.tokenize(texts)?;
        self.rt
            .run_batched(&seqs, self.spec.shape.hidden, self.spec.dim, |b| {
                self.forward(b)
            })
    }
}
