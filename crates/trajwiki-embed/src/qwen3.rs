//! Qwen3-Embedding (0.6B/4B/8B) on the CPU: a causal decoder (grouped-query attention, RMSNorm,
//! q/k norms, rotary positions, SwiGLU) without a KV cache, pooled at the last token, which is the
//! `<|endoftext|>` appended to every text. Queries are prefixed with
//! `Instruct: {task}\nQuery:`; documents are embedded as they are. Output vectors may be truncated
//! to a smaller dimension (Matryoshka/MRL) and are then renormalised.
//!
//! Sequences are packed without padding (see the crate's `ops` module); with causal attention and rotary
//! positions this computes what the reference's left-padded, masked batch computes: a token only
//! sees earlier tokens of its own text, and rotary attention depends on relative positions only.

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

/// The task of the query instruction when none is given (Qwen3-Embedding's own default).
pub const DEFAULT_TASK: &str =
    "Given a web search query, retrieve relevant passages that answer the query";

/// The token appended to every text and pooled.
pub const END_TOKEN: &str = "<|endoftext|>";

/// Default token limit when the options give none (Qwen3's positions reach much further, but
/// attention on the CPU grows with the square of the length).
pub const DEFAULT_MAX_LEN: usize = 8192;

#[derive(Debug, Clone, serde::Deserialize)]
struct RopeParameters {
    rope_theta: Option<f64>,
    rope_type: Option<String>,
}

/// The fields of a Qwen3 `config.json` that the forward pass needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Qwen3Config {
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    rms_norm_eps: f64,
    rope_theta: Option<f64>,
    rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    rope_scaling: Option<serde_json::Value>,
    max_position_embeddings: usize,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default)]
    use_sliding_window: bool,
}

fn default_eps() -> f64 {
    1e-6
}
fn default_act() -> String {
    "silu".into()
}

struct Layer {
    input_norm: Vec<f32>,
    qkv: Linear,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    o: Linear,
    post_norm: Vec<f32>,
    gate_up: Linear,
    down: Linear,
}

/// The validated shape of a Qwen3 model, from its `config.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Qwen3Shape {
    /// Vocabulary size (rows of the token embedding).
    pub vocab: usize,
    /// Hidden size.
    pub hidden: usize,
    /// MLP intermediate size.
    pub intermediate: usize,
    /// Decoder layers.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention: `heads` is a multiple of it).
    pub kv_heads: usize,
    /// Size of one head (even).
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f32,
    /// Rotary base θ.
    pub rope_theta: f64,
    /// Longest sequence the model takes.
    pub max_positions: usize,
}

impl Qwen3Shape {
    /// The rotary inverse frequencies `θ^(-2i/head_dim)`, `i < head_dim / 2`, computed in f64
    /// and rounded to f32 (every backend uses this table).
    pub fn inv_freq(&self) -> Vec<f32> {
        let d = self.head_dim;
        (0..d / 2)
            .map(|i| (1.0 / self.rope_theta.powf((2 * i) as f64 / d as f64)) as f32)
            .collect()
    }
}

/// Everything of a Qwen3-Embedding checkpoint but its weights: the shape, the tokenizer, the
/// query instruction and the output configuration. Shared by the CPU model and other backends
/// (the CUDA model in `trajwiki-cuda`) so that they tokenise and identify models identically.
pub struct Qwen3Spec {
    /// The model's shape.
    pub shape: Qwen3Shape,
    tok: Tok,
    end_id: u32,
    task: String,
    dim: usize,
    model_id: String,
}

impl std::fmt::Debug for Qwen3Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Spec")
            .field("shape", &self.shape)
            .field("dim", &self.dim)
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

impl Qwen3Spec {
    /// Output dimension (the hidden size, or the MRL dimension asked for).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The model id (see [`Embedder::model_id`]); it names the weights and the output dimension,
    /// not the backend.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The text the model sees for `text` embedded as `kind`.
    pub fn format_input(&self, text: &str, kind: EmbedKind) -> String {
        match kind {
            EmbedKind::Query => format!("Instruct: {}\nQuery:{text}", self.task),
            EmbedKind::Document => text.to_string(),
        }
    }

    /// Token ids of each text as the model sees it (instruction for queries, truncated to the
    /// token limit, ending with `<|endoftext|>`, the token that is pooled).
    pub fn tokenize(&self, texts: &[&str], kind: EmbedKind) -> Result<Vec<Vec<u32>>, EmbedError> {
        let inputs: Vec<String> = texts.iter().map(|t| self.format_input(t, kind)).collect();
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        self.tok.encode(&refs, Some(self.end_id))
    }

    /// The id of `<|endoftext|>`.
    pub fn end_id(&self) -> u32 {
        self.end_id
    }
}

/// The weights of a Qwen3 checkpoint, read tensor by tensor as `f32` (whatever the stored type),
/// named as in the checkpoint without the optional `model.` prefix, e.g.
/// `layers.0.self_attn.q_proj.weight`.
pub struct Qwen3Tensors {
    w: Weights,
}

impl std::fmt::Debug for Qwen3Tensors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Qwen3Tensors")
    }
}

impl Qwen3Tensors {
    /// The tensor `name`, checked against `shape`, flattened row-major.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        self.w.get(name, shape)
    }

    /// Whether the checkpoint has a tensor `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.w.contains(name)
    }
}

/// Opens a Qwen3 model folder for any backend: validates `config.json` (attention shape,
/// activation, rotary settings), loads the tokenizer, checks the output dimension and indexes the
/// safetensors weights (one file or shards, with or without the `model.` prefix).
pub fn open_checkpoint(
    dir: &Path,
    opts: &EmbedOptions,
) -> Result<(Qwen3Spec, Qwen3Tensors), EmbedError> {
    let config_path = dir.join("config.json");
    let cfg: Qwen3Config = read_json(&config_path)?;
    let invalid = |what: String| EmbedError::InvalidModel {
        path: config_path.clone(),
        what,
    };
    let head_dim = cfg
        .head_dim
        .unwrap_or(cfg.hidden_size / cfg.num_attention_heads.max(1));
    if cfg.num_key_value_heads == 0
        || !cfg
            .num_attention_heads
            .is_multiple_of(cfg.num_key_value_heads)
        || head_dim == 0
        || !head_dim.is_multiple_of(2)
    {
        return Err(invalid(format!(
            "inconsistent attention shape: {} heads, {} key/value heads, head_dim {head_dim}",
            cfg.num_attention_heads, cfg.num_key_value_heads
        )));
    }
    if cfg.vocab_size == 0 || cfg.hidden_size == 0 || cfg.intermediate_size == 0 {
        return Err(invalid(format!(
            "empty model: vocab_size {}, hidden_size {}, intermediate_size {}",
            cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size
        )));
    }
    if cfg.use_sliding_window {
        return Err(invalid("sliding-window attention is not supported".into()));
    }
    if cfg.hidden_act != "silu" {
        return Err(invalid(format!(
            "unsupported hidden_act {}",
            cfg.hidden_act
        )));
    }
    if cfg.rope_scaling.as_ref().is_some_and(|v| {
        !v.is_null() && v.get("rope_type").and_then(|t| t.as_str()) != Some("default")
    }) {
        return Err(invalid("rope_scaling is not supported".into()));
    }
    let rp = cfg.rope_parameters.as_ref();
    if rp
        .and_then(|r| r.rope_type.as_deref())
        .is_some_and(|t| t != "default")
    {
        return Err(invalid("only the default rope_type is supported".into()));
    }
    let rope_theta = cfg
        .rope_theta
        .or_else(|| rp.and_then(|r| r.rope_theta))
        .unwrap_or(1_000_000.0);

    let max_len = opts
        .max_len
        .unwrap_or(DEFAULT_MAX_LEN)
        .min(cfg.max_position_embeddings)
        .max(2);
    let tok = Tok::open(dir, max_len)?;
    let end_id = tok
        .token_id(END_TOKEN)
        .ok_or_else(|| EmbedError::InvalidModel {
            path: dir.join("tokenizer.json"),
            what: format!("the vocabulary has no {END_TOKEN}"),
        })?;
    let dim = out_dim(opts.dim, cfg.hidden_size)?;
    let w = Weights::open(dir, "embed_tokens.weight", &["", "model."])?;
    let model_id = format!("qwen3-last-d{dim}-{}", fingerprint(dir)?);
    let shape = Qwen3Shape {
        vocab: cfg.vocab_size,
        hidden: cfg.hidden_size,
        intermediate: cfg.intermediate_size,
        layers: cfg.num_hidden_layers,
        heads: cfg.num_attention_heads,
        kv_heads: cfg.num_key_value_heads,
        head_dim,
        rms_norm_eps: cfg.rms_norm_eps as f32,
        rope_theta,
        max_positions: cfg.max_position_embeddings,
    };
    let spec = Qwen3Spec {
        shape,
        tok,
        end_id,
        task: opts
            .task
            .clone()
            .unwrap_or_else(|| DEFAULT_TASK.to_string()),
        dim,
        model_id,
    };
    Ok((spec, Qwen3Tensors { w }))
}

/// A Qwen3-Embedding model on the CPU.
pub struct Qwen3Embedder {
    spec: Qwen3Spec,
    embed: Vec<f32>,
    layers: Vec<Layer>,
    final_norm: Vec<f32>,
    rt: Runtime,
}

impl std::fmt::Debug for Qwen3Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Embedder")
            .field("model_id", &self.spec.model_id)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

impl Qwen3Embedder {
    /// Loads a Qwen3 model folder: `config.json`, `tokenizer.json` (which must know
    /// `<|endoftext|>`) and safetensors weights, one file or sharded, with or without the `model.`
    /// name prefix.
    pub fn load(dir: &Path, opts: &EmbedOptions) -> Result<Qwen3Embedder, EmbedError> {
        let (mut spec, tensors) = open_checkpoint(dir, opts)?;
        spec.model_id.push_str(&opts.precision.id_suffix());
        let rt = Runtime::new(opts)?;
        let w = &tensors.w;
        let s = spec.shape;
        let (h, nh, nkv, d, inter) = (s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate);
        let embed = w.get("embed_tokens.weight", &[s.vocab, h])?;
        let mut layers = Vec::with_capacity(s.layers);
        for i in 0..s.layers {
            let p = format!("layers.{i}");
            layers.push(Layer {
                input_norm: w.get(&format!("{p}.input_layernorm.weight"), &[h])?,
                qkv: rt.linear_sensitive(Dense::concat(vec![
                    w.linear(&format!("{p}.self_attn.q_proj"), h, nh * d)?,
                    w.linear(&format!("{p}.self_attn.k_proj"), h, nkv * d)?,
                    w.linear(&format!("{p}.self_attn.v_proj"), h, nkv * d)?,
                ])),
                q_norm: w.get(&format!("{p}.self_attn.q_norm.weight"), &[d])?,
                k_norm: w.get(&format!("{p}.self_attn.k_norm.weight"), &[d])?,
                o: rt.linear(w.linear(&format!("{p}.self_attn.o_proj"), nh * d, h)?),
                post_norm: w.get(&format!("{p}.post_attention_layernorm.weight"), &[h])?,
                gate_up: rt.linear(Dense::concat(vec![
                    w.linear(&format!("{p}.mlp.gate_proj"), h, inter)?,
                    w.linear(&format!("{p}.mlp.up_proj"), h, inter)?,
                ])),
                down: rt.linear_sensitive(w.linear(&format!("{p}.mlp.down_proj"), inter, h)?),
            });
        }
        let final_norm = w.get("norm.weight", &[h])?;
        Ok(Qwen3Embedder {
            embed,
            layers,
            final_norm,
            rt,
            spec,
        })
    }

    /// The text the model sees for `text` embedded as `kind`.
    pub fn format_input(&self, text: &str, kind: EmbedKind) -> String {
        self.spec.format_input(text, kind)
    }

    /// Pooled (final-normed, not L2-normalised) last-token states of a packed batch.
    fn forward(&self, batch: &[&[u32]]) -> Vec<f32> {
        let cfg = &self.spec.shape;
        let (h, d) = (cfg.hidden, cfg.head_dim);
        let (nh, nkv) = (cfg.heads, cfg.kv_heads);
        let eps = cfg.rms_norm_eps;
        let seqs = offsets(batch);
        let rows: usize = seqs.iter().map(|s| s.1).sum();
        let positions: Vec<usize> = seqs.iter().flat_map(|&(_, len)| 0..len).collect();

        // Rotary table: cos and sin of position · θ^(-2i/d), i < d/2.
        let half = d / 2;
        let max_pos = seqs.iter().map(|s| s.1).max().unwrap_or(0);
        let inv_freq = cfg.inv_freq();
        let mut cos = vec![0.0f32; max_pos * half];
        let mut sin = vec![0.0f32; max_pos * half];
        for p in 0..max_pos {
            for (i, f) in inv_freq.iter().enumerate() {
                let a = p as f32 * f;
                cos[p * half + i] = a.cos();
                sin[p * half + i] = a.sin();
            }
        }

        // Every row of `x` is written below.
        let mut x = scratch::F32.take(rows * h);
        for (dst, &id) in x
            .chunks_exact_mut(h)
            .zip(batch.iter().flat_map(|s| s.iter()))
        {
            let id = (id as usize).min(cfg.vocab - 1);
            dst.copy_from_slice(&self.embed[id * h..(id + 1) * h]);
        }

        let stride = (nh + 2 * nkv) * d;
        let shape = AttnShape {
            heads: nh,
            kv_heads: nkv,
            head_dim: d,
            causal: true,
        };
        for layer in &self.layers {
            let hn = ops::rms_norm(&x, h, &layer.input_norm, eps);
            let mut qkv = layer.qkv.forward(&hn, rows, Then::Store);
            scratch::F32.give(hn);
            qkv.par_chunks_mut(stride)
                .zip(positions.par_iter())
                .for_each(|(row, &p)| {
                    let (c, s) = (
                        &cos[p * half..(p + 1) * half],
                        &sin[p * half..(p + 1) * half],
                    );
                    let mut tmp = vec![0.0f32; d];
                    for (hi, head) in row[..(nh + nkv) * d].chunks_exact_mut(d).enumerate() {
                        let norm = if hi < nh {
                            &layer.q_norm
                        } else {
                            &layer.k_norm
                        };
                        ops::rms_norm_row(head, norm, eps, &mut tmp);
                        for i in 0..half {
                            let (a, b) = (tmp[i], tmp[i + half]);
                            head[i] = a * c[i] - b * s[i];
                            head[i + half] = b * c[i] + a * s[i];
                        }
                    }
                });
            let ctx = ops::attention(&qkv, &seqs, shape);
            scratch::F32.give(qkv);
            layer.o.forward_add(&ctx, rows, &mut x);
            scratch::F32.give(ctx);
            let hn = ops::rms_norm(&x, h, &layer.post_norm, eps);
            let gu = layer.gate_up.forward(&hn, rows, Then::Store);
            scratch::F32.give(hn);
            let act = ops::swiglu(&gu, cfg.intermediate);
            scratch::F32.give(gu);
            layer.down.forward_add(&act, rows, &mut x);
            scratch::F32.give(act);
        }

        let mut pooled = vec![0.0f32; batch.len() * h];
        for (dst, &(off, len)) in pooled.chunks_exact_mut(h).zip(&seqs) {
            let last = off + len - 1;
            ops::rms_norm_row(&x[last * h..(last + 1) * h], &self.final_norm, eps, dst);
        }
        scratch::F32.give(x);
        pooled
    }
}

impl Embedder for Qwen3Embedder {
    fn kernel(&self) -> Option<String> {
        Some(self.rt.kernel.describe(self.rt.precision))
    }

    fn model_id(&self) -> &str {
        self.spec.model_id()
    }

    fn dim(&self) -> usize {
        self.spec.dim()
    }

    fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let seqs = self.rt.pool.install(|| self.spec.tokenize(texts, kind))?;
        self.rt
            .run_batched(&seqs, self.spec.shape.hidden, self.spec.dim(), |b| {
                self.forward(b)
            })
    }
}
