//! Batch normalization over the batch and spatial dims of `[N, C, ...]`, per channel: training
//! mode normalizes with the batch's statistics (and returns them, for running statistics),
//! eval mode with given running statistics.
//!
//! A channel's elements are `x[n, c, i]` for every sample `n` and position `i` of the trailing
//! dims (`hw` of them): `m = N·hw` values, strided by `C·hw` between samples.
//!
//! An f16 or bf16 input normalizes in its dtype with f32 weight, bias and statistics (a
//! model's parameters and buffers): each element widens to f32 as it is read, the statistics
//! and the output are computed in f32, and the output (backward: dx) rounds once to the input's
//! dtype, as PyTorch's batch norm does for a 16-bit input.

use super::{expect_f32, expect_float, same_device};
use crate::storage::{dispatch, Storage};
use crate::{Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The BatchNorm primitives of a backend (`cpu.rs`, `cuda.rs`). `x` is `[n, c, hw]` dense;
/// `w`, `b`, `mean` and `var` are `[c]`.
pub(crate) trait BatchNormKernels: Sized {
    /// Training forward: `(y, mean, var)` with each channel's mean and biased variance, and
    /// `y = (x − mean)/√(var + eps)·w + b`.
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_fwd(
        &self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)>;
    /// Eval forward: `y = (x − mean)/√(var + eps)·w + b` with the given statistics.
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_eval(
        &self,
        mean: &Self,
        var: &Self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<Self>;
    /// Backward from upstream `g`: `(dx, dw, db)`. With `training` the statistics are the
    /// batch's own (dx includes their dependence on x); without, they are constants.
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_bwd(
        &self,
        w: &Self,
        g: &Self,
        mean: &Self,
        var: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
        training: bool,
    ) -> Result<(Self, Self, Self)>;
}

impl Storage {
    /// [`BatchNormKernels::batch_norm_fwd`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn batch_norm_fwd(
        &self,
        w: &Storage,
        b: &Storage,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<(Storage, Storage, Storage)> {
        dispatch!("batch_norm"; x = self, w = w, b = b => x.batch_norm_fwd(w, b, n, c, hw, eps))
    }

    /// [`BatchNormKernels::batch_norm_eval`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn batch_norm_eval(
        &self,
        mean: &Storage,
        var: &Storage,
        w: &Storage,
        b: &Storage,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<Storage> {
        dispatch!("batch_norm_eval"; x = self, m = mean, v = var, w = w, b = b
            => x.batch_norm_eval(m, v, w, b, n, c, hw, eps))
    }

    /// [`BatchNormKernels::batch_norm_bwd`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn batch_norm_bwd(
        &self,
        w: &Storage,
        g: &Storage,
        mean: &Storage,
        var: &Storage,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
        training: bool,
    ) -> Result<(Storage, Storage, Storage)> {
        dispatch!("batch_norm backward"; x = self, w = w, g = g, m = mean, v = var
            => x.batch_norm_bwd(w, g, m, v, n, c, hw, eps, training))
    }
}

/// `(n, c, hw)` of a BatchNorm input after the checks every mode shares: f32, f16 or bf16, rank
/// ≥ 2, `eps` finite and ≥ 0, and each `[c]` operand (`what`) f32, on the input's device, of
/// shape `[c]`.
fn check(
    op: &'static str,
    x: &Tensor,
    per_channel: &[(&str, &Tensor)],
    eps: f32,
) -> Result<(usize, usize, usize)> {
    expect_float(op, x)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(Error::BadShape {
            op,
            shape: shape.to_vec(),
            expected: "rank ≥ 2: [N, C], [N, C, L] or [N, C, H, W]".into(),
        });
    }
    let (n, c) = (shape[0], shape[1]);
    let hw = shape[2..].iter().product::<usize>();
    for (what, p) in per_channel {
        expect_f32(op, p)?;
        same_device(op, x, p)?;
        if p.shape() != [c] {
            return Err(Error::ShapeMismatch {
                op,
                lhs: shape.to_vec(),
                rhs: p.shape().to_vec(),
                expected: format!("{what} of shape [{c}] (the input's channels, dim 1)"),
            });
        }
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("eps must be finite and ≥ 0, got {eps}"),
        });
    }
    Ok((n, c, hw))
}

/// The weight and bias to run with: the given ones, else 1 and 0 per channel.
fn affine(
    x: &Tensor,
    c: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let w = match weight {
        Some(w) => w.detach(),
        None => Tensor::ones(&[c], x.device())?,
    };
    let b = match bias {
        Some(b) => b.detach(),
        None => Tensor::zeros(&[c], x.device())?,
    };
    Ok((w, b))
}

/// The differentiable inputs of a BatchNorm node: the input, then the weight and the bias when
/// given.
fn inputs<'a>(
    x: &'a Tensor,
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
) -> Vec<&'a Tensor> {
    std::iter::once(x).chain(weight).chain(bias).collect()
}

impl Tensor {
    /// Batch normalization in training mode (PyTorch's `F.batch_norm(x, None, None, weight,
    /// bias, training=True, eps=eps)`) of `[N, C]`, `[N, C, L]` or `[N, C, H, W]` (any rank
    /// ≥ 2; dim 1 is the channel): each channel is normalized with the mean and biased variance
    /// of its `N·H·W` values, `y = (x − mean)/√(var + eps)·weight + bias`, `weight` and `bias`
    /// of shape `[C]` (1 and 0 when `None`).
    ///
    /// Returns `(y, mean, var)`: the output and the batch's per-channel mean and biased variance
    /// (`[C]`, no gradient), from which a layer updates its running statistics. The backward
    /// gives the input (through the batch statistics too), the weight and the bias their
    /// gradients. A channel holding a NaN gives NaN in that channel. A channel of one value
    /// (`N·H·W == 1`) is an error, as in PyTorch: its variance says nothing.
    pub fn batch_norm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f32,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let op = "batch_norm";
        let params: Vec<(&str, &Tensor)> = [("weight", weight), ("bias", bias)]
            .into_iter()
            .filter_map(|(s, t)| t.map(|t| (s, t)))
            .collect();
        let (n, c, hw) = check(op, self, &params, eps)?;
        let m = n.saturating_mul(hw);
        if m <= 1 {
            return Err(Error::BadShape {
                op,
                shape: self.shape().to_vec(),
                expected: format!(
                    "more than one value per channel in training (N·H·W = {m}); use eval mode"
                ),
            });
        }
        let (w, b) = affine(self, c, weight, bias)?;
        let (y, mean, var) =
            self.storage()?
                .batch_norm_fwd(&*w.storage()?, &*b.storage()?, n, c, hw, eps)?;
        let mean_t = Tensor::from_storage(mean, vec![c]);
        let var_t = Tensor::from_storage(var, vec![c]);
        let (mean, var) = (mean_t.detach(), var_t.detach());
        let x = self.detach();
        let (has_w, has_b) = (weight.is_some(), bias.is_some());
        let out = Tensor::from_op(
            y,
            self.shape().to_vec(),
            op,
            &inputs(self, weight, bias),
            move |g| {
                let (dx, dw, db) = x.storage()?.batch_norm_bwd(
                    &*w.storage()?,
                    &*g.storage()?,
                    &*mean.storage()?,
                    &*var.storage()?,
                    n,
                    c,
                    hw,
                    eps,
                    true,
                )?;
                grads(&x, dx, dw, db, c, has_w, has_b)
            },
        );
        Ok((out, mean_t, var_t))
    }

    /// Batch normalization in eval mode (PyTorch's `F.batch_norm(x, running_mean, running_var,
    /// weight, bias, training=False, eps=eps)`): each channel normalized with the given
    /// statistics, `y = (x − running_mean)/√(running_var + eps)·weight + bias`, all `[C]`
    /// (`weight` 1 and `bias` 0 when `None`). The running statistics are constants: the backward
    /// gives the input, the weight and the bias their gradients, not them.
    pub fn batch_norm_eval(
        &self,
        running_mean: &Tensor,
        running_var: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        let op = "batch_norm_eval";
        let mut params = vec![("running_mean", running_mean), ("running_var", running_var)];
        params.extend(
            [("weight", weight), ("bias", bias)]
                .into_iter()
                .filter_map(|(s, t)| t.map(|t| (s, t))),
        );
        let (n, c, hw) = check(op, self, &params, eps)?;
        let (w, b) = affine(self, c, weight, bias)?;
        let (mean, var) = (running_mean.detach(), running_var.detach());
        let y = self.storage()?.batch_norm_eval(
            &*mean.storage()?,
            &*var.storage()?,
            &*w.storage()?,
            &*b.storage()?,
            n,
            c,
            hw,
            eps,
        )?;
        let x = self.detach();
        let (has_w, has_b) = (weight.is_some(), bias.is_some());
        Ok(Tensor::from_op(
            y,
            self.shape().to_vec(),
            op,
            &inputs(self, weight, bias),
            move |g| {
                let (dx, dw, db) = x.storage()?.batch_norm_bwd(
                    &*w.storage()?,
                    &*g.storage()?,
                    &*mean.storage()?,
                    &*var.storage()?,
                    n,
                    c,
                    hw,
                    eps,
                    false,
                )?;
                grads(&x, dx, dw, db, c, has_w, has_b)
            },
        ))
    }
}

/// The gradients of a BatchNorm node's inputs ([`inputs`]): dx, then dw and db when given.
fn grads(
    x: &Tensor,
    dx: Storage,
    dw: Storage,
    db: Storage,
    c: usize,
    has_w: bool,
    has_b: bool,
) -> Result<Vec<Option<Tensor>>> {
    let mut v = vec![Some(Tensor::from_storage(dx, x.shape().to_vec()))];
    if has_w {
        v.push(Some(Tensor::from_storage(dw, vec![c])));
    }
    if has_b {
        v.push(Some(Tensor::from_storage(db, vec![c])));
    }
    Ok(v)
}
