//! Losses: cross-entropy (fused with log-softmax, integer targets, mean over the rows) and mean
//! squared error (composed of other ops). Each backend computes the cross-entropy's mean its own
//! way (`cpu.rs`; `cuda.rs` runs the loss ladder's step, which may fuse the mean into the
//! kernel); the op has one path on every device. The cross-entropy takes f32, f16 and bf16
//! logits and computes in f32 whatever their dtype.

use super::{expect_float, same_device, same_dtype};
use crate::autocast::{autocast_dtype, via_f32_autocast};
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The loss primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait LossKernels: Sized {
    /// The mean over the rows of `logsumexp(x_r) − x_r[t_r]` for `[rows, cols]` logits and i64
    /// targets `[rows]`, as a one-element storage, and the row statistics (max, Σ exp) its
    /// backward reads when the backend saves them.
    fn cross_entropy_mean(
        &self,
        t: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Option<Self>)>;
    /// The gradient of that mean with respect to the logits, `g/rows · (softmax(x_r) −
    /// onehot(t_r))`, `g` the one-element upstream gradient.
    fn cross_entropy_mean_bwd(
        &self,
        t: &Self,
        stats: Option<&Self>,
        g: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<Self>;
}

impl Storage {
    /// [`LossKernels::cross_entropy_mean`] on the operands' device.
    pub(crate) fn cross_entropy_mean(
        &self,
        t: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<(Storage, Option<Storage>)> {
        dispatch!("cross_entropy"; x = self, t = t => x.cross_entropy_mean(t, rows, cols))
    }

    /// [`LossKernels::cross_entropy_mean_bwd`] on the operands' device.
    pub(crate) fn cross_entropy_mean_bwd(
        &self,
        t: &Storage,
        stats: Option<&Storage>,
        g: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<Storage> {
        match stats {
            Some(s) => dispatch!("cross_entropy backward"; x = self, t = t, s = s, g = g
                => x.cross_entropy_mean_bwd(t, Some(s), g, rows, cols)),
            None => dispatch!("cross_entropy backward"; x = self, t = t, g = g
                => x.cross_entropy_mean_bwd(t, None, g, rows, cols)),
        }
    }
}

impl Tensor {
    /// Mean cross-entropy of `[n, classes]` logits against i64 class indices `[n]`.
    /// Stable for any finite logits; a target outside `0..classes` is an error.
    /// f16 and bf16 logits compute in f32 (the loss is their mean in f32, rounded once to the
    /// logits' dtype outside an autocast scope and kept f32 inside one); their gradient computes
    /// in f32 and rounds once.
    pub fn cross_entropy(&self, targets: &Tensor) -> Result<Tensor> {
        expect_float("cross_entropy", self)?;
        same_device("cross_entropy", self, targets)?;
        if targets.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op: "cross_entropy",
                expected: DType::I64,
                got: targets.dtype(),
            });
        }
        if self.rank() != 2
            || targets.rank() != 1
            || targets.shape()[0] != self.shape()[0]
            || self.shape()[0] == 0
        {
            return Err(Error::ShapeMismatch {
                op: "cross_entropy",
                lhs: self.shape().to_vec(),
                rhs: targets.shape().to_vec(),
                expected: "logits [n, classes] with n ≥ 1 and targets [n]".into(),
            });
        }
        let (rows, cols) = (self.shape()[0], self.shape()[1]);
        let (mean, stats) = self
            .storage()?
            .cross_entropy_mean(&*targets.storage()?, rows, cols)?;
        let x = self.detach();
        let t = targets.clone();
        let loss = Tensor::from_op(mean, vec![], "cross_entropy", &[self], move |g| {
            let gs = x.storage()?.cross_entropy_mean_bwd(
                &*t.storage()?,
                stats.as_ref(),
                &*g.storage()?,
                rows,
                cols,
            )?;
            Ok(vec![Some(Tensor::from_storage(gs, vec![rows, cols]))])
        });
        if self.dtype().is_half() && autocast_dtype().is_none() {
            return loss.to_dtype(self.dtype());
        }
        Ok(loss)
    }

    /// Mean squared error `mean((self − target)²)`; shapes must be equal.
    pub fn mse(&self, target: &Tensor) -> Result<Tensor> {
        if autocast_dtype().is_none() {
            same_dtype("mse", self, target)?;
        }
        if self.dtype().is_half() && (target.dtype() == self.dtype() || autocast_dtype().is_some())
        {
            let t = if target.dtype().is_half() {
                target.to_dtype(DType::F32)?
            } else {
                target.clone()
            };
            return via_f32_autocast(self, |x| x.mse(&t));
        }
        if self.shape() != target.shape() {
            return Err(Error::ShapeMismatch {
                op: "mse",
                lhs: self.shape().to_vec(),
                rhs: target.shape().to_vec(),
                expected: "equal shapes".into(),
            });
        }
        self.sub(target)?.square()?.mean()
    }
}
