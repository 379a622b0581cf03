//! Softmax and log-softmax along the last dimension (max-subtracted, so stable for any logits).
//! f16 and bf16 rows compute in f32 and round each output once, in the input's dtype (inside an
//! autocast scope they widen and return f32, `autocast.rs`); the backward computes in f32 from
//! the rounded output and rounds the gradient once.

use super::expect_float;
use crate::autocast::{autocast_dtype, via_f32_autocast};
use crate::storage::{dispatch, Storage};
use crate::{Error, Result, Tensor};

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The softmax primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait SoftmaxKernels: Sized {
    /// Softmax (or log-softmax, `log`) of each row of `[rows, cols]`.
    fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Self>;
    /// Its backward from the forward's output `self` and the upstream gradient `g`.
    fn softmax_last_bwd(&self, g: &Self, rows: usize, cols: usize, log: bool) -> Result<Self>;
}

impl Storage {
    /// [`SoftmaxKernels::softmax_last`] on this storage's device.
    pub(crate) fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        dispatch!("softmax"; x = self => x.softmax_last(rows, cols, log))
    }

    /// [`SoftmaxKernels::softmax_last_bwd`] on the operands' device.
    pub(crate) fn softmax_last_bwd(
        &self,
        g: &Storage,
        rows: usize,
        cols: usize,
        log: bool,
    ) -> Result<Storage> {
        dispatch!("softmax backward"; y = self, g = g => y.softmax_last_bwd(g, rows, cols, log))
    }
}

impl Tensor {
    fn rows_cols(&self, op: &'static str) -> Result<(usize, usize)> {
        let cols = *self.shape().last().ok_or_else(|| Error::BadShape {
            op,
            shape: vec![],
            expected: "rank ≥ 1".into(),
        })?;
        Ok((self.numel() / cols.max(1), cols))
    }

    /// `exp(x) / Σ exp(x)` over the last dim.
    pub fn softmax(&self) -> Result<Tensor> {
        if self.dtype().is_half() && autocast_dtype().is_some() {
            return via_f32_autocast(self, |x| x.softmax());
        }
        expect_float("softmax", self)?;
        let (rows, cols) = self.rows_cols("softmax")?;
        let s = self.storage()?.softmax_last(rows, cols, false)?;
        let y = Tensor::from_storage(s, self.shape().to_vec());
        let yd = y.detach();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            self.shape().to_vec(),
            "softmax",
            &[self],
            // dx = y ⊙ (g − Σ g⊙y), one fused primitive
            Box::new(move |g| Ok(vec![Some(yd.softmax_bwd(g, rows, cols, false)?)])),
        ))
    }

    /// `x − log Σ exp(x)` over the last dim.
    pub fn log_softmax(&self) -> Result<Tensor> {
        if self.dtype().is_half() && autocast_dtype().is_some() {
            return via_f32_autocast(self, |x| x.log_softmax());
        }
        expect_float("log_softmax", self)?;
        let (rows, cols) = self.rows_cols("log_softmax")?;
        let s = self.storage()?.softmax_last(rows, cols, true)?;
        let y = Tensor::from_storage(s, self.shape().to_vec());
        let yd = y.detach();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            self.shape().to_vec(),
            "log_softmax",
            &[self],
            // dx = g − softmax(x) ⊙ Σ g, one fused primitive
            Box::new(move |g| Ok(vec![Some(yd.softmax_bwd(g, rows, cols, true)?)])),
        ))
    }

    /// Backward of (log-)softmax: `self` is the forward's output `y`, `g` the upstream grad.
    fn softmax_bwd(&self, g: &Tensor, rows: usize, cols: usize, log: bool) -> Result<Tensor> {
        let s = self
            .storage()?
            .softmax_last_bwd(&*g.storage()?, rows, cols, log)?;
        Ok(Tensor::from_storage(s, self.shape().to_vec()))
    }
}
