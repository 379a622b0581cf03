//! A transformer block without attention — LayerNorm → Linear → GELU → Linear with a residual
//! connection — trained on a small sequence task: every token of a random sequence must be
//! mapped to `(5·token + 3) mod vocab`. Without attention, a position sees only its own token,
//! which is all this task needs. Runs on either device.

use crate::Result;
use camel_nn::{
    Device, Embedding, EmbeddingOptions, LayerNorm, LayerNormOptions, Linear, LinearOptions,
    Module, Parameter, Tensor,
};
use camel_optim::{Adam, Optimizer};
use rand::{Rng, SeedableRng};

/// Token embedding, one block, final LayerNorm and a projection to the vocabulary.
#[derive(Debug)]
pub struct BlockModel {
    embed: Embedding,
    ln1: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    ln_f: LayerNorm,
    head: Linear,
}

impl BlockModel {
    /// A model with embedding width `d` and hidden width `4d`.
    pub fn new(vocab: usize, d: usize, seed: u64, device: Device) -> Result<BlockModel> {
        let lin = |i, o, s| {
            Linear::with_options(
                i,
                o,
                LinearOptions {
                    seed: Some(seed ^ s),
                    device,
                    ..Default::default()
                },
            )
        };
        let ln = LayerNormOptions {
            device,
            ..Default::default()
        };
        Ok(BlockModel {
            embed: Embedding::with_options(
                vocab,
                d,
                EmbeddingOptions {
                    seed: Some(seed),
                    device,
                },
            )?,
            ln1: LayerNorm::with_options(d, ln)?,
            fc1: lin(d, 4 * d, 1)?,
            fc2: lin(4 * d, d, 2)?,
            ln_f: LayerNorm::with_options(d, ln)?,
            head: lin(d, vocab, 3)?,
        })
    }

    /// Logits `[batch, seq, vocab]` of i64 tokens `[batch, seq]`.
    pub fn forward_tokens(&self, tokens: &Tensor) -> Result<Tensor> {
        let x = self.embed.forward(tokens)?;
        let h = self.fc1.forward(&self.ln1.forward(&x)?)?;
        let h = self.fc2.forward(&h.gelu()?)?;
        let x = x.add(&h)?; // residual
        Ok(self.head.forward(&self.ln_f.forward(&x)?)?)
    }

    /// Every parameter.
    pub fn parameters(&self) -> Vec<Parameter> {
        let mods: [&dyn Module; 6] = [
            &self.embed,
            &self.ln1,
            &self.fc1,
            &self.fc2,
            &self.ln_f,
            &self.head,
        ];
        mods.iter().flat_map(|m| m.parameters()).collect()
    }
}

/// The task's target of a token.
pub fn target_of(token: i64, vocab: usize) -> i64 {
    (5 * token + 3) % vocab as i64
}

/// Train for `steps` Adam steps on random batches of `batch × seq` tokens; returns the loss
/// of every step.
pub fn train_block(
    vocab: usize,
    d: usize,
    batch: usize,
    seq: usize,
    steps: usize,
    seed: u64,
    device: Device,
) -> Result<Vec<f32>> {
    let model = BlockModel::new(vocab, d, seed, device)?;
    let mut opt = Adam::new(model.parameters(), 1e-2)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut losses = Vec::with_capacity(steps);
    for step in 1..=steps {
        let toks: Vec<i64> = (0..batch * seq)
            .map(|_| rng.gen_range(0..vocab as i64))
            .collect();
        let tg: Vec<i64> = toks.iter().map(|&t| target_of(t, vocab)).collect();
        let x = Tensor::from_vec_i64(toks, &[batch, seq], device)?;
        let y = Tensor::from_vec_i64(tg, &[batch * seq], device)?;
        opt.zero_grad();
        let logits = model.forward_tokens(&x)?;
        let loss = logits.reshape(&[batch * seq, vocab])?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        let l = loss.item()?;
        crate::train::check_finite(l, || format!("step {step}"), opt.lr())?;
        losses.push(l);
    }
    Ok(losses)
}
