//! Reductions: sum, mean, max and min over all elements or along one dimension, argmax and
//! argmin, `sum_to` (the backward of broadcasting), and sum, mean and variance over several
//! dimensions (`dims.rs`).
//!
//! The sums (`sum_dim`, `sum`, `mean_dim`, `mean`, `sum_dims`, `mean_dims`, `sum_to`) read f16
//! and bf16 directly: the backends' `reduce` takes any float input and returns f32 (on the GPU
//! the reduction ladder's step 3 widens each element as it loads it; its step-2 paths and the
//! CPU widen the input first), and the op rounds the f32 result once to the input's dtype (it
//! stays f32 inside an autocast scope): the f32 accumulation PyTorch's 16-bit reductions use.
//! The maximum and minimum (the same `reduce`, rounded back exactly), argmax/argmin and the
//! variance (f32, rounded once as the sums) read f16 and bf16 in their kernels too.

use super::expect_float;
use crate::autocast::autocast_dtype;
use crate::shape::{normalize_dim, split_at_dim};
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
mod dims;

/// Reductions along one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum of the elements.
    Sum,
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
}

impl ReduceOp {
    /// Op code passed to the CUDA kernel.
    pub fn code(&self) -> i32 {
        *self as i32
    }
}

/// The reduction primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait ReduceKernels: Sized {
    /// Reduce `[outer, dim, inner]` along the middle axis to `[outer, inner]`.
    fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Self>;
    /// Index of each row's largest element of `[rows, cols]`, as i64 `[rows]`.
    fn argmax_last(&self, rows: usize, cols: usize) -> Result<Self>;
    /// Index of each row's smallest element of `[rows, cols]`, as i64 `[rows]`.
    fn argmin_last(&self, rows: usize, cols: usize) -> Result<Self>;
    /// The variance of each row of `[rows, cols]`: `Σ (x − mean)² / (cols − correction)`.
    fn var_rows(&self, rows: usize, cols: usize, correction: usize) -> Result<Self>;
}

impl Storage {
    /// [`ReduceKernels::reduce`] on this storage's device.
    pub(crate) fn reduce(
        &self,
        outer: usize,
        dim: usize,
        inner: usize,
        op: ReduceOp,
    ) -> Result<Storage> {
        dispatch!("reduce"; x = self => x.reduce(outer, dim, inner, op))
    }

    /// [`ReduceKernels::argmax_last`] on this storage's device.
    pub(crate) fn argmax_last(&self, rows: usize, cols: usize) -> Result<Storage> {
        dispatch!("argmax"; x = self => x.argmax_last(rows, cols))
    }

    /// [`ReduceKernels::argmin_last`] on this storage's device.
    pub(crate) fn argmin_last(&self, rows: usize, cols: usize) -> Result<Storage> {
        dispatch!("argmin"; x = self => x.argmin_last(rows, cols))
    }

    /// [`ReduceKernels::var_rows`] on this storage's device.
    pub(crate) fn var_rows(&self, rows: usize, cols: usize, correction: usize) -> Result<Storage> {
        dispatch!("var"; x = self => x.var_rows(rows, cols, correction))
    }
}

impl Tensor {
    /// Reduce along `dim` with the primitive; returns the keepdim-shaped result (no autograd).
    pub(crate) fn reduce_plain(&self, dim: usize, op: ReduceOp) -> Result<Tensor> {
        let (outer, d, inner) = split_at_dim(self.shape(), dim);
        let s = self.storage()?.reduce(outer, d, inner, op)?;
        let mut shape = self.shape().to_vec();
        if !shape.is_empty() {
            shape[dim] = 1;
        }
        Ok(Tensor::from_storage(s, shape))
    }

    fn drop_dim(shape: &[usize], dim: usize, keepdim: bool) -> Vec<usize> {
        let mut s = shape.to_vec();
        if !s.is_empty() {
            if keepdim {
                s[dim] = 1;
            } else {
                s.remove(dim);
            }
        }
        s
    }

    /// Sum along `dim` (negative counts from the end); `keepdim` keeps it as size 1. A 16-bit
    /// tensor sums in f32 and the result rounds once (f32 inside an autocast scope).
    pub fn sum_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        finish(self.sum_dim_f32(dim, keepdim)?, self.dtype())
    }

    /// [`Tensor::sum_dim`] with the f32 sum of a 16-bit tensor not rounded: the op's node reads
    /// the input in its dtype and gives f32, and its backward gives the input's dtype.
    fn sum_dim_f32(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        expect_float("sum", self)?;
        let d = normalize_dim("sum", dim, self.rank())?;
        let r = self.reduce_plain(d, ReduceOp::Sum)?;
        let in_shape = self.shape().to_vec();
        let in_dtype = self.dtype();
        let keep_shape = r.shape().to_vec();
        let out_shape = Tensor::drop_dim(self.shape(), d, keepdim);
        let storage = r.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            out_shape,
            "sum",
            &[self],
            Box::new(move |g| {
                let gx = g.reshape(&keep_shape)?.broadcast_to(&in_shape)?;
                Ok(vec![Some(as_dtype(gx, in_dtype)?)])
            }),
        ))
    }

    /// Sum of all elements, as a one-element tensor of shape `[]`.
    pub fn sum(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.sum_dim(0, false)
    }

    /// Mean along `dim` (`torch.mean(x, dim)`); NaN where `dim` is empty.
    pub fn mean_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let n = self.dim(dim)?;
        let m = self.sum_dim_f32(dim, keepdim)?.mul_scalar(1.0 / n as f32)?;
        finish(m, self.dtype())
    }

    /// Mean of all elements (shape `[]`). The mean of an empty tensor is NaN, as `torch.mean`
    /// and [`Tensor::mean_dim`] over an empty dim give.
    pub fn mean(&self) -> Result<Tensor> {
        // 0 · (1 / 0) = NaN for an empty tensor.
        let s = self.reshape(&[self.numel()])?.sum_dim_f32(0, false)?;
        finish(s.mul_scalar(1.0 / self.numel() as f32)?, self.dtype())
    }

    /// Maximum along `dim` (`torch.amax`). The gradient is shared equally among tied maxima.
    /// NaN propagates: the maximum of a slice holding a NaN is NaN. An empty `dim` is an error.
    pub fn max_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.extreme_dim(dim, keepdim, ReduceOp::Max, "max")
    }

    /// Minimum along `dim` (`torch.amin`). The gradient is shared equally among tied minima.
    /// NaN propagates: the minimum of a slice holding a NaN is NaN. An empty `dim` is an error.
    pub fn min_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.extreme_dim(dim, keepdim, ReduceOp::Min, "min")
    }

    /// [`Tensor::max_dim`] or [`Tensor::min_dim`].
    fn extreme_dim(
        &self,
        dim: isize,
        keepdim: bool,
        op: ReduceOp,
        name: &'static str,
    ) -> Result<Tensor> {
        expect_float(name, self)?;
        let d = normalize_dim(name, dim, self.rank())?;
        if self.shape().get(d) == Some(&0) {
            return Err(Error::BadShape {
                op: name,
                shape: self.shape().to_vec(),
                expected: format!("a non-empty dim {d}"),
            });
        }
        // the reduction gives f32; the extreme of 16-bit values is one of them, so the rounding
        // back to the input's dtype is exact
        let dtype = self.dtype();
        let r = as_dtype(self.reduce_plain(d, op)?, dtype)?;
        let x = self.detach();
        let keep = r.detach();
        let out_shape = Tensor::drop_dim(self.shape(), d, keepdim);
        let storage = r.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            out_shape,
            name,
            &[self],
            Box::new(move |g| {
                // the tie count and the share in f32, the gradient rounded once to the dtype
                let f32 = |t: Tensor| as_dtype(t, DType::F32);
                let mask = f32(x.eq(&keep)?)?;
                let count = mask.reduce_plain(d, ReduceOp::Sum)?;
                let gk = f32(g.reshape(keep.shape())?)?.div(&count)?;
                Ok(vec![Some(as_dtype(mask.mul(&gk)?, dtype)?)])
            }),
        ))
    }

    /// Maximum of all elements (shape `[]`); NaN if any element is NaN, an error if empty.
    pub fn max(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.max_dim(0, false)
    }

    /// Minimum of all elements (shape `[]`); NaN if any element is NaN, an error if empty.
    pub fn min(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.min_dim(0, false)
    }

    /// Index of the maximum along the last dimension, as i64 (not differentiable;
    /// `torch.argmax(x, -1)`). The first maximum on ties; the index of the first NaN in a row
    /// that holds one. An empty last dimension is an error, as for [`Tensor::max_dim`].
    pub fn argmax_last(&self) -> Result<Tensor> {
        self.arg_extreme_last("argmax")
    }

    /// Index of the minimum along the last dimension, as i64 (not differentiable;
    /// `torch.argmin(x, -1)`). The first minimum on ties; the index of the first NaN in a row
    /// that holds one. An empty last dimension is an error, as for [`Tensor::min_dim`].
    pub fn argmin_last(&self) -> Result<Tensor> {
        self.arg_extreme_last("argmin")
    }

    /// [`Tensor::argmax_last`] (`name` "argmax") or [`Tensor::argmin_last`] ("argmin").
    fn arg_extreme_last(&self, name: &'static str) -> Result<Tensor> {
        expect_float(name, self)?;
        let cols = *self.shape().last().ok_or_else(|| Error::BadShape {
            op: name,
            shape: vec![],
            expected: "rank ≥ 1".into(),
        })?;
        if cols == 0 {
            return Err(Error::BadShape {
                op: name,
                shape: self.shape().to_vec(),
                expected: "a non-empty last dim".into(),
            });
        }
        let rows = self.numel() / cols;
        let st = self.storage()?;
        let s = if name == "argmin" {
            st.argmin_last(rows, cols)?
        } else {
            st.argmax_last(rows, cols)?
        };
        debug_assert_eq!(s.dtype(), DType::I64);
        Ok(Tensor::from_storage(
            s,
            self.shape()[..self.rank() - 1].to_vec(),
        ))
    }

    /// Sum this tensor down to `shape`, the inverse of broadcasting `shape` up to `self.shape()`.
    pub fn sum_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let extra = self
            .rank()
            .checked_sub(shape.len())
            .ok_or_else(|| Error::ShapeMismatch {
                op: "sum_to",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
                expected: "a target shape that broadcasts to the source".into(),
            })?;
        // a 16-bit tensor's sums stay f32 until the end, and round once there
        let mut t = self.clone();
        for _ in 0..extra {
            t = t.sum_dim_f32(0, false)?;
        }
        for (d, &want) in shape.iter().enumerate() {
            if want == 1 && t.shape()[d] != 1 {
                t = t.sum_dim_f32(d as isize, true)?;
            } else if want != t.shape()[d] {
                return Err(Error::ShapeMismatch {
                    op: "sum_to",
                    lhs: self.shape().to_vec(),
                    rhs: shape.to_vec(),
                    expected: "a target shape that broadcasts to the source".into(),
                });
            }
        }
        if t.dtype() != self.dtype() {
            // the f32 sums of a 16-bit tensor, rounded once (inside an autocast scope too: the
            // backward of broadcasting keeps the dtype)
            return t.to_dtype(self.dtype());
        }
        Ok(t)
    }
}

/// The f32 result of a reduction of a `dtype` tensor: rounded once to a 16-bit `dtype` outside
/// an autocast scope, kept f32 inside one (and for f32).
pub(super) fn finish(y: Tensor, dtype: DType) -> Result<Tensor> {
    if dtype.is_half() && autocast_dtype().is_none() {
        y.to_dtype(dtype)
    } else {
        Ok(y)
    }
}

/// `g` in `dtype` (a backward's gradient for an input of that dtype).
pub(super) fn as_dtype(g: Tensor, dtype: DType) -> Result<Tensor> {
    if g.dtype() == dtype {
        Ok(g)
    } else {
        g.to_dtype(dtype)
    }
}
