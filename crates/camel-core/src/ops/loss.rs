//! Losses: cross-entropy (fused with log-softmax, integer targets, mean) and mean squared error.

use super::{expect_f32, same_device};
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// Mean cross-entropy of `[n, classes]` logits against i64 class indices `[n]`.
    /// Stable for any finite logits; a target outside `0..classes` is an error.
    pub fn cross_entropy(&self, targets: &Tensor) -> Result<Tensor> {
        expect_f32("cross_entropy", self)?;
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
        // CUDA step 4: the mean over rows fused in, one kernel forward and one backward.
        if let Some((mean, stats)) =
            self.storage()?
                .cross_entropy_mean_fwd(&*targets.storage()?, rows, cols)?
        {
            let x = self.detach();
            let t = targets.clone();
            return Ok(Tensor::from_op(
                mean,
                vec![],
                "cross_entropy",
                &[self],
                move |g| {
                    let gs = x.storage()?.cross_entropy_mean_bwd(
                        &*t.storage()?,
                        &stats,
                        &*g.storage()?,
                        rows,
                        cols,
                    )?;
                    Ok(vec![Some(Tensor::from_storage(gs, vec![rows, cols]))])
                },
            ));
        }
        // Else a loss per row and their mean. The forward also returns each row's (max, Σ exp),
        // so the backward reads the logits once.
        let (s, stats) =
            self.storage()?
                .cross_entropy_fwd_stats(&*targets.storage()?, rows, cols)?;
        let x = self.detach();
        let t = targets.clone();
        let per_row = Tensor::from_op(s, vec![rows], "cross_entropy", &[self], move |g| {
            let gs = x.storage()?.cross_entropy_bwd_stats(
                &*t.storage()?,
                stats.as_ref(),
                &*g.storage()?,
                rows,
                cols,
            )?;
            Ok(vec![Some(Tensor::from_storage(gs, vec![rows, cols]))])
        });
        per_row.mean()
    }

    /// Mean squared error `mean((self − target)²)`; shapes must be equal.
    pub fn mse(&self, target: &Tensor) -> Result<Tensor> {
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
