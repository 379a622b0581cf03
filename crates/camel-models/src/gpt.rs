//! GPT-mini: a character-level decoder-only transformer in nanoGPT's layout.
//!
//! `idx [B, T]` (i64 tokens) → token embedding `wte` + learned positions `wpe` → dropout →
//! `n_layer` pre-LN [`Block`]s `h.0 … h.{n_layer−1}` → final LayerNorm `ln_f` → `lm_head`
//! (a bias-free Linear to the vocabulary, or `wte`'s matrix when the weights are tied) →
//! logits `[B, T, vocab]`.
//!
//! Parameter names are nanoGPT's without its `transformer.` prefix (`wte.weight`,
//! `wpe.weight`, `h.0.ln_1.weight`, `h.0.attn.c_attn.weight`, …, `ln_f.weight`,
//! `lm_head.weight`), and every Linear weight is `[out, in]` as in PyTorch, so a checkpoint maps
//! onto nanoGPT's `GPT` by adding `transformer.` to every name but `lm_head.weight`. With tied
//! weights the state dict holds `wte.weight` only (nanoGPT's `lm_head.weight` is the same
//! tensor). LayerNorms always carry a bias; `bias: false` drops the Linear layers' biases.
//!
//! Initialisation is nanoGPT's: every Linear and Embedding weight N(0, 0.02²), biases zero,
//! LayerNorms ones and zeros, and the residual projections (`c_proj.weight` of attention and
//! MLP) N(0, (0.02/√(2·n_layer))²).
//!
//! [`GptMini::generate`] samples with a key/value cache, so each new token runs one position
//! through the model; see its documentation for how the context is bounded by `block_size`.

use crate::{Error, Result};
use camel_nn::{
    no_grad, Block, BlockOptions, Device, Dropout, Embedding, EmbeddingOptions, Generator, KvCache,
    LayerNorm, LayerNormOptions, Module, Parameter, PositionalEncoding, Tensor, TrainingFlag,
};
use serde::{Deserialize, Serialize};

/// The shape of a [`GptMini`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Number of tokens.
    pub vocab_size: usize,
    /// Longest context, in tokens (the number of learned positions).
    pub block_size: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block; must divide `n_embd`.
    pub n_head: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Dropout probability after the embeddings, on the attention weights and after each
    /// residual branch, in `[0, 1)`.
    pub dropout: f32,
    /// Whether the Linear layers have biases.
    pub bias: bool,
    /// Whether `lm_head` reuses `wte`'s matrix.
    pub tie_weights: bool,
    /// Run the fused attention kernel where it applies ([`GptMini::attention_path`]); off
    /// runs the naive attention everywhere (to compare them). On by default.
    #[serde(default = "fused_by_default")]
    pub fused_attention: bool,
}

fn fused_by_default() -> bool {
    true
}

impl GptConfig {
    /// The small model: 4 layers, 4 heads, 128 wide, block 128, no dropout, biases, untied.
    pub fn small(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            block_size: 128,
            n_layer: 4,
            n_head: 4,
            n_embd: 128,
            dropout: 0.0,
            bias: true,
            tie_weights: false,
            fused_attention: true,
        }
    }

    /// nanoGPT's Shakespeare-char model: 6 layers, 6 heads, 384 wide, block 256, dropout 0.2.
    pub fn shakespeare_char(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            block_size: 256,
            n_layer: 6,
            n_head: 6,
            n_embd: 384,
            dropout: 0.2,
            bias: true,
            tie_weights: false,
            fused_attention: true,
        }
    }

    /// Checks every field: sizes at least 1, `n_embd` divisible by `n_head`, dropout in
    /// `[0, 1)`. The error names the field and the value.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("vocab_size", self.vocab_size),
            ("block_size", self.block_size),
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_embd", self.n_embd),
        ] {
            if v == 0 {
                return Err(Error::Invalid(format!(
                    "GptConfig: {name} must be at least 1, got 0"
                )));
            }
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return Err(Error::Invalid(format!(
                "GptConfig: n_embd ({}) must be divisible by n_head ({})",
                self.n_embd, self.n_head
            )));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(Error::Invalid(format!(
                "GptConfig: dropout must be in [0, 1), got {}",
                self.dropout
            )));
        }
        Ok(())
    }
}

/// The key/value caches of every block of a [`GptMini`], for [`GptMini::forward_cached`].
#[derive(Debug)]
pub struct GptCache {
    layers: Vec<KvCache>,
}

impl GptCache {
    /// Empty caches for a model of `n_layer` blocks.
    pub fn new(n_layer: usize) -> GptCache {
        GptCache {
            layers: (0..n_layer).map(|_| KvCache::new()).collect(),
        }
    }

    /// Positions cached so far.
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, |c| c.len())
    }

    /// Whether no position is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The character-level GPT (see the module documentation).
#[derive(Debug)]
pub struct GptMini {
    config: GptConfig,
    wte: Embedding,
    wpe: PositionalEncoding,
    drop: Dropout,
    h: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Option<Parameter>,
    training: TrainingFlag,
}

impl GptMini {
    /// A model of `config` on `device`, initialised from the process-wide generator (see
    /// [`camel_nn::manual_seed`]).
    pub fn new(config: &GptConfig, device: Device) -> Result<GptMini> {
        let seed = camel_nn::core::rng::with_global(|g| g.next_u64());
        GptMini::with_seed(config, seed, device)
    }

    /// A model of `config` on `device`, initialised from `seed`.
    pub fn with_seed(config: &GptConfig, seed: u64, device: Device) -> Result<GptMini> {
        config.validate()?;
        let c = config.n_embd;
        let wte = Embedding::with_options(
            config.vocab_size,
            c,
            EmbeddingOptions {
                seed: Some(seed),
                device,
            },
        )?;
        let wpe = PositionalEncoding::learned_with(
            config.block_size,
            c,
            EmbeddingOptions {
                seed: Some(seed.wrapping_add(1)),
                device,
            },
        )?;
        let mut h = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let block = Block::with_options(
                c,
                config.n_head,
                BlockOptions {
                    dropout: config.dropout,
                    bias: config.bias,
                    seed: Some(seed.wrapping_add(2 + 4 * i as u64)),
                    device,
                    block_size: Some(config.block_size),
                    causal: true,
                    fused_attention: config.fused_attention,
                },
            )?;
            h.push(block);
        }
        let ln_f = LayerNorm::with_options(
            c,
            LayerNormOptions {
                device,
                ..Default::default()
            },
        )?;
        let lm_head = if config.tie_weights {
            None
        } else {
            Some(Parameter::new(Tensor::zeros(
                &[config.vocab_size, c],
                device,
            )?)?)
        };
        let model = GptMini {
            config: config.clone(),
            wte,
            wpe,
            drop: Dropout::new(config.dropout)?,
            h,
            ln_f,
            lm_head,
            training: TrainingFlag::new(),
        };
        model.init_weights(seed)?;
        Ok(model)
    }

    /// nanoGPT's initialisation (see the module documentation), drawn from `seed`.
    fn init_weights(&self, seed: u64) -> Result<()> {
        let mut g = Generator::new(seed ^ 0x9e37_79b9_7f4a_7c15);
        let std = 0.02f32;
        let proj_std = std / (2.0 * self.config.n_layer as f32).sqrt();
        for (name, p) in self.named_parameters() {
            let t = p.tensor();
            let (shape, device) = (t.shape().to_vec(), t.device());
            let value = if name.starts_with("ln") || name.contains(".ln_") {
                continue;
            } else if name.ends_with(".bias") {
                Tensor::zeros(&shape, device)?
            } else if name.ends_with("c_proj.weight") {
                Tensor::randn_with(&shape, &mut g, device)?.mul_scalar(proj_std)?
            } else {
                Tensor::randn_with(&shape, &mut g, device)?.mul_scalar(std)?
            };
            p.set(&value)?;
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// The attention the blocks run in the current mode for activations like `x`
    /// (`[B, T, n_embd]`; its device and dtype are what matter), with the reason when it is the
    /// naive one.
    pub fn attention_path(&self, x: &Tensor) -> Option<camel_nn::AttentionPath> {
        self.h.first().map(|b| b.attn.path(x))
    }

    fn check_idx(&self, idx: &Tensor, start: usize) -> Result<(usize, usize)> {
        let &[b, t] = idx.shape() else {
            return Err(Error::Invalid(format!(
                "GptMini: expected token ids [batch, time], got shape {:?}",
                idx.shape()
            )));
        };
        if t == 0 || b == 0 {
            return Err(Error::Invalid(format!(
                "GptMini: token ids {:?} hold no tokens",
                idx.shape()
            )));
        }
        if start + t > self.config.block_size {
            return Err(Error::Invalid(format!(
                "GptMini: positions {start}..{} (token ids {:?}) exceed the block size {}",
                start + t,
                idx.shape(),
                self.config.block_size
            )));
        }
        Ok((b, t))
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.ln_f.forward(x)?;
        let w = match &self.lm_head {
            Some(p) => p.tensor(),
            None => self.wte.weight.tensor(),
        };
        Ok(x.linear(&w, None, camel_nn::Activation::Identity)?)
    }

    /// Logits `[B, T, vocab]` of token ids `idx [B, T]` (i64, `T ≤ block_size`).
    pub fn logits(&self, idx: &Tensor) -> Result<Tensor> {
        self.check_idx(idx, 0)?;
        let x = self.wpe.forward(&self.wte.forward(idx)?)?;
        let mut x = self.drop.forward(&x)?;
        for block in &self.h {
            x = block.forward(&x)?;
        }
        self.head(&x)
    }

    /// Logits `[B, T, vocab]` of `idx [B, T]` taken as the positions that follow those already
    /// in `cache` (which grows by `T`). Equal to the last `T` positions of [`GptMini::logits`]
    /// over the whole sequence; the cached positions plus `T` must fit in `block_size`.
    pub fn forward_cached(&self, idx: &Tensor, cache: &mut GptCache) -> Result<Tensor> {
        if cache.layers.len() != self.h.len() {
            return Err(Error::Invalid(format!(
                "GptMini::forward_cached: the cache has {} layers, the model {}",
                cache.layers.len(),
                self.h.len()
            )));
        }
        let start = cache.len();
        self.check_idx(idx, start)?;
        let x = self.wpe.forward_at(&self.wte.forward(idx)?, start)?;
        let mut x = self.drop.forward(&x)?;
        for (block, c) in self.h.iter().zip(cache.layers.iter_mut()) {
            x = block.forward_cached(&x, c)?;
        }
        self.head(&x)
    }

    /// Mean cross-entropy of `logits [B, T, V]` against `targets [B, T]` (i64).
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        let s = logits.shape();
        if s.len() != 3 || targets.shape() != &s[..2] {
            return Err(Error::Invalid(format!(
                "GptMini::loss: logits {:?} and targets {:?}; expected [B, T, V] and [B, T]",
                s,
                targets.shape()
            )));
        }
        let n = s[0] * s[1];
        Ok(logits
            .reshape(&[n, s[2]])?
            .cross_entropy(&targets.reshape(&[n])?)?)
    }

    /// `prompt` followed by `n_tokens` sampled tokens.
    ///
    /// - Sampling: the last position's logits are divided by `temperature` and, with
    ///   `top_k = Some(k)`, all but the `k` largest are dropped (`k` above the vocabulary keeps
    ///   every token); the next token is drawn from their softmax with one draw of `g`, so a
    ///   seed gives the same text on every run. `temperature == 0` takes the argmax (greedy,
    ///   no division). A negative or non-finite temperature, `top_k = Some(0)`, an empty prompt
    ///   or a token outside the vocabulary is an error; so are NaN logits.
    /// - Context: the model sees at most `block_size` tokens. A longer prompt is cropped to
    ///   its last `block_size` tokens. Each new token runs one position through the model
    ///   against the key/value cache; when the cache holds `block_size` positions, the window
    ///   slides: the cache is rebuilt from the last `block_size / 2` tokens (rounded up) in one
    ///   pass, after which single positions follow again.
    /// - The model runs in evaluation mode (no dropout) without autograd; its training flag is
    ///   restored afterwards.
    pub fn generate(
        &self,
        prompt: &[i64],
        n_tokens: usize,
        temperature: f32,
        top_k: Option<usize>,
        g: &mut Generator,
    ) -> Result<Vec<i64>> {
        let block = self.config.block_size;
        self.generate_in(prompt, n_tokens, temperature, top_k, block, g)
    }

    /// [`GptMini::generate`] with the context bounded by `context` tokens instead of
    /// `block_size`; `context` must be in `1..=block_size`.
    pub fn generate_in(
        &self,
        prompt: &[i64],
        n_tokens: usize,
        temperature: f32,
        top_k: Option<usize>,
        context: usize,
        g: &mut Generator,
    ) -> Result<Vec<i64>> {
        let v = self.config.vocab_size;
        if context == 0 || context > self.config.block_size {
            return Err(Error::Invalid(format!(
                "generate: the context ({context} tokens) must be between 1 and the block size ({})",
                self.config.block_size
            )));
        }
        if prompt.is_empty() {
            return Err(Error::Invalid(
                "generate: the prompt is empty; give at least one token".into(),
            ));
        }
        if let Some((i, &t)) = prompt
            .iter()
            .enumerate()
            .find(|(_, &t)| !(0..v as i64).contains(&t))
        {
            return Err(Error::Invalid(format!(
                "generate: prompt token {t} at position {i} is outside the vocabulary 0..{v}"
            )));
        }
        if !(temperature.is_finite() && temperature >= 0.0) {
            return Err(Error::Invalid(format!(
                "generate: temperature must be finite and at least 0 (0 = greedy), got \
                 {temperature}"
            )));
        }
        if top_k == Some(0) {
            return Err(Error::Invalid(
                "generate: top_k must be at least 1 (or none, to keep every token), got 0".into(),
            ));
        }
        let was_training = self.is_training();
        self.set_training(false);
        let out = no_grad(|| self.sample_loop(prompt, n_tokens, temperature, top_k, context, g));
        self.set_training(was_training);
        out
    }

    fn sample_loop(
        &self,
        prompt: &[i64],
        n_tokens: usize,
        temperature: f32,
        top_k: Option<usize>,
        block: usize,
        g: &mut Generator,
    ) -> Result<Vec<i64>> {
        let device = self.wte.weight.tensor().device();
        let mut seq = prompt.to_vec();
        if n_tokens == 0 {
            return Ok(seq);
        }
        let mut cache = GptCache::new(self.h.len());
        // The positions not yet run through the model: at first the (cropped) prompt.
        let mut pending: Vec<i64> = seq[seq.len().saturating_sub(block)..].to_vec();
        for step in 0..n_tokens {
            if cache.len() + pending.len() > block {
                // slide the window: restart the cache from the last half-block of tokens
                let keep = block.div_ceil(2);
                cache = GptCache::new(self.h.len());
                pending = seq[seq.len() - keep..].to_vec();
            }
            let idx = Tensor::from_vec_i64(pending.clone(), &[1, pending.len()], device)?;
            let logits = self.forward_cached(&idx, &mut cache)?;
            let last = logits
                .narrow(1, pending.len() - 1, 1)?
                .reshape(&[self.config.vocab_size])?
                .to_vec()?;
            let next = sample(&last, temperature, top_k, g)
                .map_err(|m| Error::Invalid(format!("generate: new token {step}: {m}")))?;
            seq.push(next);
            pending = vec![next];
        }
        Ok(seq)
    }
}

/// One token from `logits`: the argmax at `temperature == 0`, else a draw of `g` from the
/// softmax of `logits / temperature` restricted to the `top_k` largest. NaN logits are an error.
pub fn sample(
    logits: &[f32],
    temperature: f32,
    top_k: Option<usize>,
    g: &mut Generator,
) -> std::result::Result<i64, String> {
    if let Some(i) = logits.iter().position(|x| x.is_nan()) {
        return Err(format!("the logit of token {i} is NaN"));
    }
    if logits.is_empty() {
        return Err("no logits".into());
    }
    let argmax = logits
        .iter()
        .enumerate()
        .fold(0, |best, (i, &x)| if x > logits[best] { i } else { best });
    if temperature == 0.0 {
        return Ok(argmax as i64);
    }
    let scaled: Vec<f64> = logits
        .iter()
        .map(|&x| f64::from(x) / f64::from(temperature))
        .collect();
    let mut keep = vec![true; scaled.len()];
    if let Some(k) = top_k {
        if k < scaled.len() {
            let mut sorted = scaled.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let kth = sorted[k - 1];
            keep = scaled.iter().map(|&x| x >= kth).collect();
        }
    }
    let max = scaled[argmax];
    if !max.is_finite() {
        // an infinite logit takes all the probability
        return Ok(argmax as i64);
    }
    let weights: Vec<f64> = scaled
        .iter()
        .zip(&keep)
        .map(|(&x, &k)| if k { (x - max).exp() } else { 0.0 })
        .collect();
    let total: f64 = weights.iter().sum();
    let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
    let mut acc = 0.0;
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        if u < acc {
            return Ok(i as i64);
        }
    }
    Ok(argmax as i64)
}

impl Module for GptMini {
    fn forward(&self, idx: &Tensor) -> camel_nn::Result<Tensor> {
        self.logits(idx).map_err(|e| match e {
            Error::Core(e) => e,
            e => camel_nn::Error::InvalidArgument {
                op: "GptMini",
                msg: e.to_string(),
            },
        })
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        let mut v = Vec::new();
        let mut add = |prefix: &str, m: &dyn Module| {
            for (n, p) in m.named_parameters() {
                v.push((format!("{prefix}.{n}"), p));
            }
        };
        add("wte", &self.wte);
        add("wpe", &self.wpe);
        for (i, b) in self.h.iter().enumerate() {
            add(&format!("h.{i}"), b);
        }
        add("ln_f", &self.ln_f);
        if let Some(p) = &self.lm_head {
            v.push(("lm_head.weight".to_string(), p.clone()));
        }
        v
    }

    fn named_buffers(&self) -> Vec<(String, camel_nn::Buffer)> {
        let mut v = Vec::new();
        let mut add = |prefix: &str, m: &dyn Module| {
            for (n, b) in m.named_buffers() {
                v.push((format!("{prefix}.{n}"), b));
            }
        };
        add("wpe", &self.wpe);
        for (i, b) in self.h.iter().enumerate() {
            add(&format!("h.{i}"), b);
        }
        v
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.wte.set_training(on);
        self.wpe.set_training(on);
        self.drop.set_training(on);
        self.h.iter().for_each(|b| b.set_training(on));
        self.ln_f.set_training(on);
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
