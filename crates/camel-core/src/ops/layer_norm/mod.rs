//! LayerNorm over the last dimension, with learned gain and bias.

use super::{expect_float, same_device, same_dtype};
use crate::autocast::{autocast_dtype, via_f32_autocast};
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The LayerNorm primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait LayerNormKernels: Sized {
    /// LayerNorm of each row of `[rows, cols]` with `gamma`, `beta` of `[cols]`:
    /// `(y, mean, rstd)`, rstd = 1/√(var + eps).
    fn layer_norm_fwd(
        &self,
        gamma: &Self,
        beta: &Self,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)>;
    /// The backward from the forward's `mean` and `rstd`: `(dx, dgamma, dbeta)`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_bwd(
        &self,
        gamma: &Self,
        g: &Self,
        mean: &Self,
        rstd: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Self, Self)>;
}

impl Storage {
    /// [`LayerNormKernels::layer_norm_fwd`] on the operands' device.
    pub(crate) fn layer_norm_fwd(
        &self,
        gamma: &Storage,
        beta: &Storage,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Storage, Storage, Storage)> {
        dispatch!("layer_norm"; x = self, gm = gamma, bt = beta => x.layer_norm_fwd(gm, bt, rows, cols, eps))
    }

    /// [`LayerNormKernels::layer_norm_bwd`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn layer_norm_bwd(
        &self,
        gamma: &Storage,
        g: &Storage,
        mean: &Storage,
        rstd: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<(Storage, Storage, Storage)> {
        dispatch!("layer_norm backward"; x = self, gm = gamma, g = g, m = mean, r = rstd
            => x.layer_norm_bwd(gm, g, m, r, rows, cols))
    }
}

impl Tensor {
    /// `(x − mean) / √(var + eps) · gamma + beta` over the last dim (biased variance, as
    /// PyTorch's `layer_norm`); `gamma` and `beta` have shape `[last dim]`. The forward saves
    /// each row's mean and 1/√(var + eps); the backward gives dx, dgamma and dbeta in one pass.
    /// f16 and bf16 (the three of one dtype) compute in f32 and round each output once, in
    /// their dtype; inside an autocast scope they widen and the result is f32.
    pub fn layer_norm(&self, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        let op = "layer_norm";
        if [self, gamma, beta].iter().any(|t| t.dtype().is_half()) {
            if autocast_dtype().is_some() {
                // inside an autocast scope: widened, and the result stays f32
                let widen = |t: &Tensor| match t.dtype().is_half() {
                    true => t.to_dtype(DType::F32),
                    false => Ok(t.clone()),
                };
                let (g, b) = (widen(gamma)?, widen(beta)?);
                return via_f32_autocast(self, |x| x.layer_norm(&g, &b, eps));
            }
            // outside one the three share one dtype, and the kernels read it
            same_dtype(op, self, gamma)?;
            same_dtype(op, self, beta)?;
        }
        for t in [self, gamma, beta] {
            expect_float(op, t)?;
        }
        same_device(op, self, gamma)?;
        same_device(op, self, beta)?;
        let cols = *self.shape().last().ok_or_else(|| Error::BadShape {
            op,
            shape: vec![],
            expected: "rank ≥ 1".into(),
        })?;
        for p in [gamma, beta] {
            if p.shape() != [cols] {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: self.shape().to_vec(),
                    rhs: p.shape().to_vec(),
                    expected: format!("gamma and beta of shape [{cols}] (the last dim)"),
                });
            }
        }
        if cols == 0 {
            return Err(Error::BadShape {
                op,
                shape: self.shape().to_vec(),
                expected: "a non-empty last dim".into(),
            });
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("eps must be finite and ≥ 0, got {eps}"),
            });
        }
        let rows = self.numel() / cols;
        let (y, mean, rstd) = self.storage()?.layer_norm_fwd(
            &*gamma.storage()?,
            &*beta.storage()?,
            rows,
            cols,
            eps,
        )?;
        let (x, gm) = (self.detach(), gamma.detach());
        Ok(Tensor::from_op(
            y,
            self.shape().to_vec(),
            op,
            &[self, gamma, beta],
            move |g| {
                let (dx, dg, db) = x.storage()?.layer_norm_bwd(
                    &*gm.storage()?,
                    &*g.storage()?,
                    &mean,
                    &rstd,
                    rows,
                    cols,
                )?;
                Ok(vec![
                    Some(Tensor::from_storage(dx, x.shape().to_vec())),
                    Some(Tensor::from_storage(dg, vec![cols])),
                    Some(Tensor::from_storage(db, vec![cols])),
                ])
            },
        ))
    }
}
