//! Losses: cross-entropy (fused with log-softmax, integer targets, mean over the rows) and mean
//! squared error. Each backend computes the cross-entropy's mean its own way (`cpu.rs`; `cuda.rs`
//! runs the loss ladder's step, which may fuse the mean into the kernel); the op has one path on
//! every device. Both losses take f32, f16 and bf16 and compute in f32 whatever the dtype (the
//! MSE: `kernels/loss/mse.cu` sums the squared differences of the widened elements in f32).

use super::{expect_float, same_device, same_dtype};
use crate::autocast::autocast_dtype;
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
    /// `Σ (self − b)² / n` over `n` elements of one float dtype, in f32, as a one-element f32
    /// storage.
    fn mse_mean(&self, b: &Self, n: usize) -> Result<Self>;
    /// The MSE's gradients `scale · g · (self − b)` and its negation, in the operands' dtype
    /// (computed in f32, rounded once), `g` the one-element f32 upstream gradient; each only
    /// where `want` asks for it.
    fn mse_bwd(
        &self,
        b: &Self,
        g: &Self,
        n: usize,
        scale: f32,
        want: [bool; 2],
    ) -> Result<(Option<Self>, Option<Self>)>;
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

impl Storage {
    /// [`LossKernels::mse_mean`] on the operands' device.
    pub(crate) fn mse_mean(&self, b: &Storage, n: usize) -> Result<Storage> {
        dispatch!("mse"; a = self, b = b => a.mse_mean(b, n))
    }

    /// [`LossKernels::mse_bwd`] on the operands' device.
    pub(crate) fn mse_bwd(
        &self,
        b: &Storage,
        g: &Storage,
        n: usize,
        scale: f32,
        want: [bool; 2],
    ) -> Result<(Option<Storage>, Option<Storage>)> {
        dispatch!("mse backward"; a = self, b = b, g = g => a.mse_bwd(b, g, n, scale, want))
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

    /// Mean squared error `mean((self − target)²)`; shapes and dtypes must be equal. f16 and
    /// bf16 operands compute in f32 (each difference squared and summed in f32, the loss rounded
    /// once to their dtype; inside an autocast scope it stays f32, and a 16-bit operand paired
    /// with an f32 one widens). The gradient goes to both operands, computed in f32 and rounded
    /// once to their dtype.
    pub fn mse(&self, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "mse";
        if autocast_dtype().is_some() && (self.dtype().is_half() || target.dtype().is_half()) {
            let f32 = |t: &Tensor| match t.dtype() {
                d if d.is_half() => t.to_dtype(DType::F32),
                _ => Ok(t.clone()),
            };
            return f32(self)?.mse(&f32(target)?);
        }
        expect_float(OP, self)?;
        same_dtype(OP, self, target)?;
        same_device(OP, self, target)?;
        if self.shape() != target.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: target.shape().to_vec(),
                expected: "equal shapes".into(),
            });
        }
        let n = self.numel();
        let mean = self.storage()?.mse_mean(&*target.storage()?, n)?;
        let (a, b, shape) = (self.detach(), target.detach(), self.shape().to_vec());
        let want = [self.requires_grad(), target.requires_grad()];
        let loss = Tensor::from_op(mean, vec![], OP, &[self, target], move |g| {
            let scale = 2.0 / n as f32;
            let (da, db) = a
                .storage()?
                .mse_bwd(&*b.storage()?, &*g.storage()?, n, scale, want)?;
            let t = |s: Option<Storage>| s.map(|s| Tensor::from_storage(s, shape.clone()));
            Ok(vec![t(da), t(db)])
        });
        if self.dtype().is_half() && autocast_dtype().is_none() {
            return loss.to_dtype(self.dtype());
        }
        Ok(loss)
    }
}
