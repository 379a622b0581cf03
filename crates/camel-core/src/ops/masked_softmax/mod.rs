//! The fused scaled, masked softmax of attention scores: `softmax(scale · x)` over the last dim
//! of `[.., Tq, Tk]`, with the causal mask applied in the same pass, so the naive attention
//! does not make three passes (scale, mask, softmax) over its `Tq × Tk` scores.
//!
//! With `causal`, key `j` is masked for query `i` when `j > i + (Tk − Tq)`: the queries are the
//! last `Tq` positions of a sequence of `Tk` keys, so with a key/value cache a single new query
//! (`Tq = 1`) sees every key. A masked entry's output is exactly 0 and its gradient is 0. Rows
//! are never fully masked (`Tk ≥ Tq` is required when causal).
//!
//! f16 and bf16 scores are read and written in their dtype: each element widens as it loads,
//! the row computes in f32 and each output rounds once (inside an autocast scope the result
//! stays f32). The backward reads the rounded 16-bit output, as the softmax's does.

use super::expect_float;
use crate::autocast::{autocast_dtype, via_f32_autocast};
use crate::storage::{dispatch, Storage};
use crate::{Error, Result, Tensor};

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The geometry of a masked softmax: `rows` rows of `tk` keys, each row a query of a block of
/// `tq` queries (row `r` is query `r % tq`); `causal` masks key `j > (r % tq) + (tk − tq)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MaskedRows {
    /// Number of rows (every dim but the last, multiplied).
    pub rows: usize,
    /// Queries per block (the second-to-last dim).
    pub tq: usize,
    /// Keys per row (the last dim).
    pub tk: usize,
    /// The multiplier of the scores.
    pub scale: f32,
    /// Whether the causal mask applies.
    pub causal: bool,
}

impl MaskedRows {
    /// The number of keys query row `r` sees: all `tk`, or `(r % tq) + 1 + (tk − tq)` when causal.
    pub fn visible(&self, r: usize) -> usize {
        if self.causal {
            (r % self.tq) + 1 + (self.tk - self.tq)
        } else {
            self.tk
        }
    }
}

/// The masked-softmax primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait MaskedSoftmaxKernels: Sized {
    /// `softmax(scale · x)` of each row, masked entries 0.
    fn masked_softmax(&self, m: MaskedRows) -> Result<Self>;
    /// Its backward from the forward's output `self` and the upstream gradient `g`:
    /// `dx = scale · y ⊙ (g − Σ g⊙y)` over the visible keys, 0 on masked ones.
    fn masked_softmax_bwd(&self, g: &Self, m: MaskedRows) -> Result<Self>;
}

impl Storage {
    /// [`MaskedSoftmaxKernels::masked_softmax`] on this storage's device.
    pub(crate) fn masked_softmax(&self, m: MaskedRows) -> Result<Storage> {
        dispatch!("scaled_masked_softmax"; x = self => x.masked_softmax(m))
    }

    /// [`MaskedSoftmaxKernels::masked_softmax_bwd`] on the operands' device.
    pub(crate) fn masked_softmax_bwd(&self, g: &Storage, m: MaskedRows) -> Result<Storage> {
        dispatch!("scaled_masked_softmax backward"; y = self, g = g => y.masked_softmax_bwd(g, m))
    }
}

impl Tensor {
    /// Softmax over the last dim of `scale · self` for attention scores `[.., Tq, Tk]`, with the
    /// causal mask when `causal` (key `j` hidden from query `i` when `j > i + (Tk − Tq)`), in one
    /// pass over each row. Masked entries are 0. PyTorch: `torch.softmax((scale * x)
    /// .masked_fill(mask, -inf), -1)`.
    ///
    /// Errors: a tensor of rank < 2, a non-float tensor, a non-finite `scale`, or `causal` with
    /// `Tk < Tq` (a query would see no key).
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::zeros(&[2, 2], Device::Cpu)?;
    /// let y = x.scaled_masked_softmax(0.5, true)?;
    /// assert_eq!(y.to_vec()?, [1.0, 0.0, 0.5, 0.5]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn scaled_masked_softmax(&self, scale: f32, causal: bool) -> Result<Tensor> {
        const OP: &str = "scaled_masked_softmax";
        if self.dtype().is_half() && autocast_dtype().is_some() {
            // autocast keeps the attention softmax in f32
            return via_f32_autocast(self, |x| x.scaled_masked_softmax(scale, causal));
        }
        expect_float(OP, self)?;
        let shape = self.shape().to_vec();
        if shape.len() < 2 {
            return Err(Error::BadShape {
                op: OP,
                shape,
                expected: "scores of rank ≥ 2, [.., Tq, Tk]".into(),
            });
        }
        if !scale.is_finite() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("scale must be finite, got {scale}"),
            });
        }
        let (tq, tk) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        if causal && tk < tq {
            return Err(Error::BadShape {
                op: OP,
                shape,
                expected: format!(
                    "Tk ≥ Tq with the causal mask (got Tq = {tq}, Tk = {tk}): a query would see \
                     no key"
                ),
            });
        }
        let rows = self.numel().checked_div(tk).unwrap_or(0);
        let m = MaskedRows {
            rows,
            tq: tq.max(1),
            tk,
            scale,
            causal,
        };
        let s = self.storage()?.masked_softmax(m)?;
        let y = Tensor::from_storage(s, shape.clone());
        let yd = y.detach();
        Ok(Tensor::op_output(
            y.storage_arc().clone(),
            shape.clone(),
            OP,
            &[self],
            Box::new(move |g| {
                let s = yd.storage()?.masked_softmax_bwd(&*g.storage()?, m)?;
                Ok(vec![Some(Tensor::from_storage(s, shape.clone()))])
            }),
        ))
    }
}
