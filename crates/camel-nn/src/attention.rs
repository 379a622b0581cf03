//! Multi-head self-attention, `softmax(q·kᵀ/√d, causal mask) · v` per head, and a key/value
//! cache for generation. Two paths compute it ([`MultiHeadAttention::path`] says which runs):
//! the fused kernel ([`Tensor::attention`], no `T × T` score matrix) on the GPU where it
//! applies, and the naive one elsewhere — `q·kᵀ`, the scale, mask and softmax in one kernel
//! ([`Tensor::scaled_masked_softmax`]), attention dropout, `· v` — which is the reference the
//! fused one is tested against.

use crate::{Linear, LinearOptions, Module, Parameter, TrainingFlag};
use camel_core::{DType, Device, Error, Result, Tensor};
use std::fmt;

/// Options of [`MultiHeadAttention::with_options`].
#[derive(Clone, Copy, Debug)]
pub struct AttentionOptions {
    /// Mask the future: query `i` sees keys `j ≤ i` (GPT). On by default.
    pub causal: bool,
    /// Dropout probability on the attention weights and on the output (nanoGPT's `attn_dropout`
    /// and `resid_dropout`), applied in training mode only. 0 by default.
    pub dropout: f32,
    /// Biases in the `c_attn` and `c_proj` projections. On by default.
    pub bias: bool,
    /// Seed of the projections' initialization: `None` draws from the process-wide generator;
    /// `Some(seed)` gives `c_attn` the seed and `c_proj` the seed + 1.
    pub seed: Option<u64>,
    /// Device of the parameters.
    pub device: Device,
    /// The longest sequence, key/value cache included; `None`: no limit.
    pub block_size: Option<usize>,
    /// Run the fused attention kernel where it applies ([`AttentionPath`]). On by default.
    pub fused: bool,
}

/// The attention a [`MultiHeadAttention`] runs for an input ([`MultiHeadAttention::path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionPath {
    /// [`Tensor::attention`] (or [`Tensor::attention_dropout`] in training): one fused kernel,
    /// no score matrix.
    Fused,
    /// `matmul_t`, [`Tensor::scaled_masked_softmax`], dropout, `matmul`, and why the fused kernel
    /// does not apply.
    Naive(&'static str),
}

impl fmt::Display for AttentionPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttentionPath::Fused => write!(f, "fused (Tensor::attention)"),
            AttentionPath::Naive(why) => write!(f, "naive ({why})"),
        }
    }
}

impl Default for AttentionOptions {
    fn default() -> Self {
        AttentionOptions {
            causal: true,
            dropout: 0.0,
            bias: true,
            seed: None,
            device: Device::Cpu,
            block_size: None,
            fused: true,
        }
    }
}

/// The keys and values of the positions an attention layer has seen, so that generation feeds
/// one new position at a time instead of the whole context: `[B, n_head, len, head_dim]` each.
/// One cache per attention layer; [`KvCache::new`] is empty.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    kv: Option<(Tensor, Tensor)>,
}

impl KvCache {
    /// An empty cache.
    pub fn new() -> KvCache {
        KvCache { kv: None }
    }

    /// The number of cached positions.
    pub fn len(&self) -> usize {
        self.kv.as_ref().map_or(0, |(k, _)| k.shape()[2])
    }

    /// True when no position is cached.
    pub fn is_empty(&self) -> bool {
        self.kv.is_none()
    }

    /// Forget every position.
    pub fn clear(&mut self) {
        self.kv = None;
    }

    /// The cached keys and values, `[B, n_head, len, head_dim]` each.
    pub fn keys_values(&self) -> Option<(&Tensor, &Tensor)> {
        self.kv.as_ref().map(|(k, v)| (k, v))
    }
}

/// Multi-head self-attention on `x: [B, T, C]` (nanoGPT's `CausalSelfAttention`): one linear
/// layer `c_attn` (`C → 3C`) gives q | k | v, split into `n_head` heads of `C / n_head` by
/// views; per head `softmax(q·kᵀ / √d)` with the causal mask, attention dropout, `· v`; the heads
/// merged and projected by `c_proj` (`C → C`), then dropout. Parameters: `c_attn.weight`
/// `[3C, C]`, `c_attn.bias`, `c_proj.weight` `[C, C]`, `c_proj.bias`.
#[derive(Clone)]
pub struct MultiHeadAttention {
    /// The q | k | v projection, `C → 3C`.
    pub c_attn: Linear,
    /// The output projection, `C → C`.
    pub c_proj: Linear,
    n_embd: usize,
    n_head: usize,
    causal: bool,
    dropout: f32,
    block_size: Option<usize>,
    fused: bool,
    training: TrainingFlag,
}

impl fmt::Debug for MultiHeadAttention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MultiHeadAttention(n_embd={}, n_head={}, causal={}, dropout={}\n  (c_attn): {:?}\n  \
             (c_proj): {:?}\n)",
            self.n_embd, self.n_head, self.causal, self.dropout, self.c_attn, self.c_proj
        )
    }
}

/// Dropout of `x` with probability `p` in training mode; the identity in eval mode or at 0.
pub(crate) fn dropout(x: &Tensor, p: f32, training: bool) -> Result<Tensor> {
    x.dropout(p, training)
}

/// Error unless `p` is a probability in [0, 1], as [`crate::Dropout`] takes.
pub(crate) fn check_dropout(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("dropout must be in [0, 1], got {p}"),
        });
    }
    Ok(())
}

impl MultiHeadAttention {
    /// Causal attention of `n_head` heads over `n_embd` features on the CPU, with biases and
    /// no dropout. `n_embd` must be divisible by `n_head`.
    ///
    /// ```
    /// use camel_nn::{Device, Module, MultiHeadAttention, Tensor};
    /// let attn = MultiHeadAttention::new(8, 2)?;
    /// let y = attn.forward(&Tensor::randn_seeded(&[2, 5, 8], 0, Device::Cpu)?)?;
    /// assert_eq!(y.shape(), &[2, 5, 8]);
    /// assert!(MultiHeadAttention::new(8, 3).is_err()); // 8 is not divisible by 3
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(n_embd: usize, n_head: usize) -> Result<MultiHeadAttention> {
        MultiHeadAttention::with_options(n_embd, n_head, AttentionOptions::default())
    }

    /// Attention with explicit options (causal, dropout, bias, seed, device, block size).
    pub fn with_options(
        n_embd: usize,
        n_head: usize,
        o: AttentionOptions,
    ) -> Result<MultiHeadAttention> {
        if n_embd == 0 || n_head == 0 || !n_embd.is_multiple_of(n_head) {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: format!("n_embd = {n_embd} must be a positive multiple of n_head = {n_head}"),
            });
        }
        check_dropout("MultiHeadAttention", o.dropout)?;
        if o.block_size == Some(0) {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: "block_size must be ≥ 1".into(),
            });
        }
        let lin = |seed: Option<u64>| LinearOptions {
            bias: o.bias,
            seed,
            device: o.device,
            ..Default::default()
        };
        Ok(MultiHeadAttention {
            c_attn: Linear::with_options(n_embd, 3 * n_embd, lin(o.seed))?,
            c_proj: Linear::with_options(n_embd, n_embd, lin(o.seed.map(|s| s + 1)))?,
            n_embd,
            n_head,
            causal: o.causal,
            dropout: o.dropout,
            block_size: o.block_size,
            fused: o.fused,
            training: TrainingFlag::new(),
        })
    }

    /// Number of heads.
    pub fn n_head(&self) -> usize {
        self.n_head
    }

    /// Features per position.
    pub fn n_embd(&self) -> usize {
        self.n_embd
    }

    /// Whether the future is masked.
    pub fn causal(&self) -> bool {
        self.causal
    }

    /// The attention this layer runs for input `x` in its current mode: [`AttentionPath::Fused`]
    /// on a GPU (f32, or f16/bf16 inside an autocast scope or for 16-bit input) for a head dim
    /// the kernels have ([`camel_core::ATTENTION_HEAD_DIMS`]), with attention dropout inside the
    /// kernel in training ([`Tensor::attention_dropout`]) unless it is 1; otherwise
    /// [`AttentionPath::Naive`] with the reason.
    pub fn path(&self, x: &Tensor) -> AttentionPath {
        let d = self.n_embd / self.n_head;
        if !self.fused {
            AttentionPath::Naive("the fused kernel is switched off")
        } else if !x.device().is_cuda() {
            AttentionPath::Naive("the CPU runs the reference")
        } else if !camel_core::ATTENTION_HEAD_DIMS.contains(&d) {
            AttentionPath::Naive("a head dim the fused kernel lacks")
        } else if self.dropout >= 1.0 && self.is_training() {
            AttentionPath::Naive("attention dropout of 1 (the fused kernel takes p < 1)")
        } else {
            AttentionPath::Fused
        }
    }

    /// `[B, T, C]` of `x`, checked: rank 3, `C == n_embd`, `T ≥ 1`, and `past + T` within the
    /// block size.
    fn check_input(&self, x: &Tensor, past: usize) -> Result<(usize, usize)> {
        let s = x.shape();
        if s.len() != 3 || s[2] != self.n_embd || s[1] == 0 {
            return Err(Error::BadShape {
                op: "MultiHeadAttention",
                shape: s.to_vec(),
                expected: format!("[B, T ≥ 1, C = n_embd = {}]", self.n_embd),
            });
        }
        if let Some(bs) = self.block_size {
            if past + s[1] > bs {
                return Err(Error::InvalidArgument {
                    op: "MultiHeadAttention",
                    msg: format!(
                        "{} cached + {} new positions exceed block_size = {bs}",
                        past, s[1]
                    ),
                });
            }
        }
        Ok((s[0], s[1]))
    }

    /// q, k, v of `x: [B, T, C]`, each `[B, n_head, T, head_dim]` (views of its projection).
    /// `c_attn` is applied as three products, one per `C`-row block of its weight and bias:
    /// the same values as one `C → 3C` product split three ways, but the backward adds three
    /// `[B, T, C]` input gradients, where views of one `[B, T, 3C]` output would each pad its
    /// gradient with zeros to the full `3C` width and then add the three.
    fn qkv(&self, x: &Tensor, b: usize, t: usize) -> Result<(Tensor, Tensor, Tensor)> {
        let (c, h) = (self.n_embd, self.n_head);
        let w = self.c_attn.weight.tensor();
        let bias = self.c_attn.bias.as_ref().map(|p| p.tensor());
        let act = self.c_attn.activation();
        // inside an autocast scope, x is cast once here rather than by each of the three products
        let x = match camel_core::autocast_dtype() {
            Some(d) if x.dtype() == DType::F32 => x.to_dtype(d)?,
            _ => x.clone(),
        };
        // [B, T, C] → [B, T, H, D] → [B, H, T, D]: views, no copy
        let head = |i: usize| -> Result<Tensor> {
            let wi = w.narrow(0, i * c, c)?;
            let bi = bias.as_ref().map(|b| b.narrow(0, i * c, c)).transpose()?;
            x.linear(&wi, bi.as_ref(), act)?
                .reshape(&[b, t, h, c / h])?
                .permute(&[0, 2, 1, 3])
        };
        Ok((head(0)?, head(1)?, head(2)?))
    }

    /// The attention of queries `q: [B, H, Tq, D]` over keys and values `[B, H, Tk, D]`, heads
    /// merged and projected: `[B, Tq, C]`, by `path`.
    fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor, path: AttentionPath) -> Result<Tensor> {
        let (b, tq) = (q.shape()[0], q.shape()[2]);
        let d = self.n_embd / self.n_head;
        let scale = 1.0 / (d as f32).sqrt();
        let training = self.is_training();
        if path == AttentionPath::Fused {
            // [B, H, Tq, D] stored as [B, Tq, H, D]: merging the heads is a view
            let p = if training { self.dropout } else { 0.0 };
            let y = q
                .attention_dropout(k, v, scale, self.causal, p)?
                .transpose(1, 2)?
                .reshape(&[b, tq, self.n_embd])?;
            return dropout(&self.c_proj.forward(&y)?, self.dropout, training);
        }
        // [B, H, Tq, Tk]: q · kᵀ, then scale, mask and softmax in one kernel
        let att = q
            .matmul_t(k, false, true)?
            .scaled_masked_softmax(scale, self.causal)?;
        let att = dropout(&att, self.dropout, training)?;
        // [B, H, Tq, D] → [B, Tq, H, D] → [B, Tq, C]
        let y = att
            .matmul(v)?
            .transpose(1, 2)?
            .reshape(&[b, tq, self.n_embd])?;
        dropout(&self.c_proj.forward(&y)?, self.dropout, training)
    }

    /// The output for the new positions `x: [B, T, C]` that follow the positions in `cache`,
    /// which gains their keys and values: feeding a sequence in chunks gives the outputs
    /// [`Module::forward`] gives for the whole. A cache of another batch size is an error, as
    /// is going past the block size; neither changes the cache.
    pub fn forward_cached(&self, x: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let (b, t) = self.check_input(x, cache.len())?;
        if let Some((k0, _)) = &cache.kv {
            if k0.shape()[0] != b || k0.device() != x.device() {
                return Err(Error::ShapeMismatch {
                    op: "MultiHeadAttention::forward_cached",
                    lhs: x.shape().to_vec(),
                    rhs: k0.shape().to_vec(),
                    expected: format!(
                        "the cache's batch size and device ({} on {})",
                        k0.shape()[0],
                        k0.device()
                    ),
                });
            }
        }
        let path = self.path(x);
        let (q, k, v) = self.qkv(x, b, t)?;
        let (k, v) = match &cache.kv {
            None => (k.contiguous()?, v.contiguous()?),
            Some((k0, v0)) => (Tensor::cat(&[k0, &k], 2)?, Tensor::cat(&[v0, &v], 2)?),
        };
        let y = self.attend(&q, &k, &v, path)?;
        cache.kv = Some((k, v));
        Ok(y)
    }
}

impl Module for MultiHeadAttention {
    /// Self-attention of `x: [B, T, C]`, `[B, T, C]` out.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t) = self.check_input(x, 0)?;
        let (q, k, v) = self.qkv(x, b, t)?;
        self.attend(&q, &k, &v, self.path(x))
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut v = Vec::new();
        for (prefix, l) in [("c_attn", &self.c_attn), ("c_proj", &self.c_proj)] {
            v.extend(
                l.named_parameters()
                    .into_iter()
                    .map(|(n, p)| (format!("{prefix}.{n}"), p)),
            );
        }
        v
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.c_attn.set_training(on);
        self.c_proj.set_training(on);
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
