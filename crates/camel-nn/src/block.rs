//! The pre-LayerNorm transformer block of GPT-2 / nanoGPT: `x + attn(ln_1(x))`, then
//! `x + mlp(ln_2(x))`.

use crate::attention::{check_dropout, dropout};
use crate::{
    AttentionOptions, Buffer, KvCache, LayerNorm, LayerNormOptions, Linear, LinearOptions, Module,
    MultiHeadAttention, Parameter, TrainingFlag,
};
use camel_core::{Activation, Device, Result, Tensor};
use std::fmt;

/// Options of [`Block::with_options`].
#[derive(Clone, Copy, Debug)]
pub struct BlockOptions {
    /// Causal self-attention (GPT). On by default.
    pub causal: bool,
    /// Dropout on the attention weights, the attention's output and the MLP's output, in
    /// training mode only. 0 by default.
    pub dropout: f32,
    /// Biases in the four linear layers (the LayerNorms keep theirs). On by default.
    pub bias: bool,
    /// Seed of the initialization: `None` draws from the process-wide generator; `Some(seed)`
    /// seeds `attn` with `seed` (and `seed + 1`), `mlp.c_fc` with `seed + 2` and `mlp.c_proj`
    /// with `seed + 3`.
    pub seed: Option<u64>,
    /// Device of the parameters.
    pub device: Device,
    /// The longest sequence, key/value cache included; `None`: no limit.
    pub block_size: Option<usize>,
    /// Run the fused attention kernel where it applies ([`crate::AttentionPath`]). On by
    /// default.
    pub fused_attention: bool,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            causal: true,
            dropout: 0.0,
            bias: true,
            seed: None,
            device: Device::Cpu,
            block_size: None,
            fused_attention: true,
        }
    }
}

/// The feed-forward part of a [`Block`]: `c_fc` (`C → 4C`) with GELU fused in, `c_proj`
/// (`4C → C`), dropout.
#[derive(Clone)]
pub struct Mlp {
    /// `C → 4C`, GELU applied to its output.
    pub c_fc: Linear,
    /// `4C → C`.
    pub c_proj: Linear,
    dropout: f32,
    training: TrainingFlag,
}

impl fmt::Debug for Mlp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Mlp(\n  (c_fc): {:?}\n  (c_proj): {:?}\n  (dropout): {}\n)",
            self.c_fc, self.c_proj, self.dropout
        )
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.c_proj.forward(&self.c_fc.forward(x)?)?;
        dropout(&h, self.dropout, self.is_training())
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        prefixed(&[("c_fc", &self.c_fc), ("c_proj", &self.c_proj)])
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.c_fc.set_training(on);
        self.c_proj.set_training(on);
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}

/// The `each` items (parameters or buffers) of `children`, prefixed with the children's names.
fn prefixed_with<T>(
    children: &[(&str, &dyn Module)],
    each: impl Fn(&dyn Module) -> Vec<(String, T)>,
) -> Vec<(String, T)> {
    children
        .iter()
        .flat_map(|(prefix, m)| {
            each(*m)
                .into_iter()
                .map(move |(n, p)| (format!("{prefix}.{n}"), p))
        })
        .collect()
}

/// The named parameters of `children`, prefixed with their names.
fn prefixed(children: &[(&str, &dyn Module)]) -> Vec<(String, Parameter)> {
    prefixed_with(children, |m| m.named_parameters())
}

/// A pre-LN transformer block on `x: [B, T, C]` (nanoGPT's `Block`):
/// `x = x + attn(ln_1(x))`, `x = x + mlp(ln_2(x))`. Parameter names are nanoGPT's:
/// `ln_1.weight`, `ln_1.bias`, `attn.c_attn.weight`, `attn.c_attn.bias`, `attn.c_proj.weight`,
/// `attn.c_proj.bias`, `ln_2.weight`, `ln_2.bias`, `mlp.c_fc.weight`, `mlp.c_fc.bias`,
/// `mlp.c_proj.weight`, `mlp.c_proj.bias` (linear weights `[out, in]`, as PyTorch's).
#[derive(Clone)]
pub struct Block {
    /// LayerNorm before the attention.
    pub ln_1: LayerNorm,
    /// The self-attention.
    pub attn: MultiHeadAttention,
    /// LayerNorm before the MLP.
    pub ln_2: LayerNorm,
    /// The MLP.
    pub mlp: Mlp,
    training: TrainingFlag,
}

impl fmt::Debug for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ind = |m: &dyn fmt::Debug| format!("{m:?}").replace('\n', "\n  ");
        write!(
            f,
            "Block(\n  (ln_1): {}\n  (attn): {}\n  (ln_2): {}\n  (mlp): {}\n)",
            ind(&self.ln_1),
            ind(&self.attn),
            ind(&self.ln_2),
            ind(&self.mlp)
        )
    }
}

impl Block {
    /// A causal block of `n_head` heads over `n_embd` features on the CPU, with biases and no
    /// dropout.
    ///
    /// ```
    /// use camel_nn::{Block, Device, Module, Tensor};
    /// let block = Block::new(8, 2)?;
    /// let y = block.forward(&Tensor::randn_seeded(&[2, 5, 8], 0, Device::Cpu)?)?;
    /// assert_eq!(y.shape(), &[2, 5, 8]);
    /// assert_eq!(block.named_parameters()[0].0, "ln_1.weight");
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(n_embd: usize, n_head: usize) -> Result<Block> {
        Block::with_options(n_embd, n_head, BlockOptions::default())
    }

    /// A block with explicit options (causal, dropout, bias, seed, device, block size).
    pub fn with_options(n_embd: usize, n_head: usize, o: BlockOptions) -> Result<Block> {
        check_dropout("Block", o.dropout)?;
        let attn = MultiHeadAttention::with_options(
            n_embd,
            n_head,
            AttentionOptions {
                causal: o.causal,
                dropout: o.dropout,
                bias: o.bias,
                seed: o.seed,
                device: o.device,
                block_size: o.block_size,
                fused: o.fused_attention,
            },
        )?;
        let ln = || {
            LayerNorm::with_options(
                n_embd,
                LayerNormOptions {
                    device: o.device,
                    ..Default::default()
                },
            )
        };
        let lin = |seed: Option<u64>, activation| LinearOptions {
            bias: o.bias,
            seed,
            device: o.device,
            activation,
            ..Default::default()
        };
        let mlp = Mlp {
            c_fc: Linear::with_options(
                n_embd,
                4 * n_embd,
                lin(o.seed.map(|s| s + 2), Activation::Gelu),
            )?,
            c_proj: Linear::with_options(
                4 * n_embd,
                n_embd,
                lin(o.seed.map(|s| s + 3), Activation::Identity),
            )?,
            dropout: o.dropout,
            training: TrainingFlag::new(),
        };
        Ok(Block {
            ln_1: ln()?,
            attn,
            ln_2: ln()?,
            mlp,
            training: TrainingFlag::new(),
        })
    }

    /// The block on the new positions `x: [B, T, C]` after those in `cache` (the attention's
    /// keys and values), as [`MultiHeadAttention::forward_cached`].
    pub fn forward_cached(&self, x: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let x = x.add(&self.attn.forward_cached(&self.ln_1.forward(x)?, cache)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln_1.forward(x)?)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        prefixed(&[
            ("ln_1", &self.ln_1),
            ("attn", &self.attn),
            ("ln_2", &self.ln_2),
            ("mlp", &self.mlp),
        ])
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        prefixed_with(
            &[
                ("ln_1", &self.ln_1),
                ("attn", &self.attn),
                ("ln_2", &self.ln_2),
                ("mlp", &self.mlp),
            ],
            |m| m.named_buffers(),
        )
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.ln_1.set_training(on);
        self.attn.set_training(on);
        self.ln_2.set_training(on);
        self.mlp.set_training(on);
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
