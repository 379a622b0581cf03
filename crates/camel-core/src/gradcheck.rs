//! `gradcheck`: compare autograd's gradients with central differences.
//!
//! The function's output is reduced to a scalar `L = Σ wᵢ·outᵢ` with fixed random weights `w`
//! (so every output element matters, with a different weight), `L` is summed in f64 on the host,
//! and for every input element `(L(x+ε) − L(x−ε)) / 2ε` is compared with the analytic gradient:
//! `|analytic − numeric| ≤ atol + rtol·|numeric|`.

use crate::{autograd, DType, Error, Result, Tensor};

/// Tolerances and step of [`gradcheck`].
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// Finite-difference step.
    pub eps: f32,
    /// Absolute tolerance.
    pub atol: f32,
    /// Relative tolerance.
    pub rtol: f32,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-3,
            atol: 5e-3,
            rtol: 2e-2,
        }
    }
}

fn weighted_sum(out: &[f32], w: &[f32]) -> f64 {
    out.iter().zip(w).map(|(&o, &w)| o as f64 * w as f64).sum()
}

/// Check the gradients of `f` with respect to every f32 input. Returns the largest absolute
/// mismatch on success; an error describing the first element outside tolerance otherwise.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    opts: GradcheckOptions,
) -> Result<f32> {
    // Fresh leaves that require grad, on the inputs' devices.
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            let d = t.detach();
            let d = Tensor::from_storage(d.storage()?.to_device(d.device())?, d.shape().to_vec());
            if d.dtype() == DType::F32 {
                d.requires_grad_(true)
            } else {
                Ok(d)
            }
        })
        .collect::<Result<_>>()?;
    let out = f(&leaves)?;
    let w = Tensor::randn_seeded(out.shape(), 0x5eed, out.device())?;
    let wv = w.to_vec()?;
    out.mul(&w)?.sum()?.backward()?;

    let mut worst = 0.0f32;
    for (i, leaf) in leaves.iter().enumerate() {
        if leaf.dtype() != DType::F32 {
            continue;
        }
        let analytic = match leaf.grad() {
            Some(g) => g.to_vec()?,
            None => vec![0.0; leaf.numel()],
        };
        let base = leaf.to_vec()?;
        for j in 0..base.len() {
            let eval = |delta: f32| -> Result<f64> {
                let mut v = base.clone();
                v[j] += delta;
                let mut args: Vec<Tensor> = leaves.iter().map(|t| t.detach()).collect();
                args[i] = Tensor::from_vec(v, leaf.shape(), leaf.device())?;
                let o = autograd::no_grad(|| f(&args))?;
                Ok(weighted_sum(&o.to_vec()?, &wv))
            };
            let numeric = ((eval(opts.eps)? - eval(-opts.eps)?) / (2.0 * opts.eps as f64)) as f32;
            let a = analytic[j];
            let err = (a - numeric).abs();
            if err.is_nan() || err > opts.atol + opts.rtol * numeric.abs() {
                return Err(Error::Autograd(format!(
                    "gradcheck failed for input {i} (shape {:?}) element {j}: analytic {a}, numeric {numeric}",
                    leaf.shape()
                )));
            }
            worst = worst.max(err);
        }
    }
    Ok(worst)
}
