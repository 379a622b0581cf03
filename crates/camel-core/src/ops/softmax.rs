//! Softmax and log-softmax along the last dimension (max-subtracted, so stable for any logits).

use super::expect_f32;
use crate::{Error, Result, Tensor};

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
        expect_f32("softmax", self)?;
        let (rows, cols) = self.rows_cols("softmax")?;
        let s = self.storage().softmax_last(rows, cols, false)?;
        let y = Tensor::from_storage(s, self.shape().to_vec());
        let yd = y.detach();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            self.shape().to_vec(),
            "softmax",
            &[self],
            // dx = y ⊙ (g − Σ g⊙y)
            Box::new(move |g| {
                let dot = g.mul(&yd)?.sum_dim(-1, true)?;
                Ok(vec![Some(yd.mul(&g.sub(&dot)?)?)])
            }),
        ))
    }

    /// `x − log Σ exp(x)` over the last dim.
    pub fn log_softmax(&self) -> Result<Tensor> {
        expect_f32("log_softmax", self)?;
        let (rows, cols) = self.rows_cols("log_softmax")?;
        let s = self.storage().softmax_last(rows, cols, true)?;
        let y = Tensor::from_storage(s, self.shape().to_vec());
        let yd = y.detach();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            self.shape().to_vec(),
            "log_softmax",
            &[self],
            // dx = g − softmax(x) ⊙ Σ g
            Box::new(move |g| {
                let s = g.sum_dim(-1, true)?;
                Ok(vec![Some(g.sub(&yd.exp()?.mul(&s)?)?)])
            }),
        ))
    }
}
