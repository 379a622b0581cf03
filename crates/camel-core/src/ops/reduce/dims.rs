//! Reductions over several dimensions at once: `sum_dims`, `mean_dims`, `var_dims`.
//!
//! - `sum_dims` merges each run of adjacent reduced dims into one and reduces the runs one after
//!   another, last run first, each with the one-dim `[outer, n, inner]` reduction kernel (so
//!   reducing dims 1 and 2 of `[A, B, C, D]` is one pass over `[A, B·C, D]`; dims 0 and 2 are two
//!   passes, the second over the first's smaller output). Nothing is copied to the host.
//! - `var_dims` permutes the reduced dims to the end and makes the result dense on the device
//!   (one strided copy, none when they are already the trailing dims), then computes each row's
//!   variance in two passes: f64 on the CPU, f32 on the GPU (the mean, then the squared
//!   deviations from it). A 16-bit input widens as it loads; the f32 variance rounds once, as
//!   the sums do.

use crate::ops::expect_float;
use crate::shape::normalize_dim;
use crate::{DType, Error, Result, Tensor};

use super::{as_dtype, finish, ReduceOp};

/// The sorted, distinct dims of `dims` for a tensor of rank `rank` (all dims when `dims` is
/// empty); an error names `op` for an out-of-range or repeated dim.
fn reduced_dims(op: &'static str, dims: &[isize], rank: usize) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = normalize_dim(op, d, rank)?;
        if out.contains(&n) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("dim {d} appears more than once in {dims:?}"),
            });
        }
        out.push(n);
    }
    out.sort_unstable();
    // A rank-0 tensor accepts dim 0 / -1, which reduce nothing.
    out.retain(|&d| d < rank);
    Ok(out)
}

/// The shape with the reduced dims set to 1 (`keep`) and with them removed (`out`).
fn reduced_shapes(shape: &[usize], dims: &[usize], keepdim: bool) -> (Vec<usize>, Vec<usize>) {
    let mut keep = shape.to_vec();
    for &d in dims {
        keep[d] = 1;
    }
    let out = if keepdim {
        keep.clone()
    } else {
        shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !dims.contains(i))
            .map(|(_, &s)| s)
            .collect()
    };
    (keep, out)
}

impl Tensor {
    /// The sum over the sorted dims `dims`, keepdim-shaped, without autograd: one reduction per
    /// run of adjacent dims, the last run first.
    fn sum_dims_plain(&self, dims: &[usize]) -> Result<Tensor> {
        if dims.is_empty() {
            // Nothing to reduce: a copy, so the output never shares the input's storage.
            let s = self.storage()?.reduce(self.numel(), 1, 1, ReduceOp::Sum)?;
            return Ok(Tensor::from_storage(s, self.shape().to_vec()));
        }
        let mut cur = self.clone();
        let mut shape = self.shape().to_vec();
        let mut end = dims.len();
        while end > 0 {
            let mut start = end - 1;
            while start > 0 && dims[start - 1] + 1 == dims[start] {
                start -= 1;
            }
            let (a, b) = (dims[start], dims[end - 1]);
            let outer: usize = shape[..a].iter().product();
            let n: usize = shape[a..=b].iter().product();
            let inner: usize = shape[b + 1..].iter().product();
            let s = cur.storage()?.reduce(outer, n, inner, ReduceOp::Sum)?;
            for d in &mut shape[a..=b] {
                *d = 1;
            }
            cur = Tensor::from_storage(s, shape.clone());
            end = start;
        }
        Ok(cur.detach())
    }

    /// Sum over the dims `dims` (negative counts from the end; empty means every dim), with
    /// them kept as size 1 when `keepdim` (`torch.sum(x, dims, keepdim)`). A repeated or
    /// out-of-range dim is an error. Adjacent dims are reduced in one pass (see the module
    /// docs).
    pub fn sum_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        finish(self.sum_dims_f32(dims, keepdim)?, self.dtype())
    }

    /// [`Tensor::sum_dims`] with the f32 sum of a 16-bit tensor not rounded (its backward gives
    /// the input's dtype).
    fn sum_dims_f32(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        const OP: &str = "sum_dims";
        expect_float(OP, self)?;
        let ds = reduced_dims(OP, dims, self.rank())?;
        let (keep, out_shape) = reduced_shapes(self.shape(), &ds, keepdim);
        let r = self.sum_dims_plain(&ds)?;
        let in_shape = self.shape().to_vec();
        let in_dtype = self.dtype();
        let storage = r.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            out_shape,
            OP,
            &[self],
            Box::new(move |g| {
                let gx = g.reshape(&keep)?.broadcast_to(&in_shape)?;
                Ok(vec![Some(as_dtype(gx, in_dtype)?)])
            }),
        ))
    }

    /// Mean over the dims `dims` (`torch.mean(x, dims, keepdim)`); NaN where they hold no
    /// elements. Same dims rules as [`Tensor::sum_dims`].
    pub fn mean_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let ds = reduced_dims("mean_dims", dims, self.rank())?;
        let n: usize = ds.iter().map(|&d| self.shape()[d]).product();
        // 0 · (1 / 0) = NaN for an empty reduction.
        let m = self
            .sum_dims_f32(dims, keepdim)?
            .mul_scalar(1.0 / n as f32)?;
        finish(m, self.dtype())
    }

    /// Variance over the dims `dims`: `Σ (x − mean)² / (N − correction)` with `N` the number of
    /// reduced elements (`torch.var(x, dims, correction=, keepdim=)`: `correction` 0 is the
    /// population variance, 1 the unbiased estimate). `N ≤ correction` gives NaN (or inf), as
    /// PyTorch. Same dims rules as [`Tensor::sum_dims`]. Computed in two passes (f64 on the CPU);
    /// see the module docs for the layout. The gradient is `2 (x − mean) / (N − correction)`
    /// times the upstream gradient.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu)?;
    /// assert_eq!(x.var_dims(&[0, 1], 0, false)?.item()?, 1.25); // population
    /// assert_eq!(x.var_dims(&[-1], 1, true)?.to_vec()?, [0.5, 0.5]); // unbiased, per row
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn var_dims(&self, dims: &[isize], correction: usize, keepdim: bool) -> Result<Tensor> {
        const OP: &str = "var_dims";
        expect_float(OP, self)?;
        let ds = reduced_dims(OP, dims, self.rank())?;
        let (keep, out_shape) = reduced_shapes(self.shape(), &ds, keepdim);
        let kept: Vec<usize> = (0..self.rank()).filter(|d| !ds.contains(d)).collect();
        let rows: usize = kept.iter().map(|&d| self.shape()[d]).product();
        let cols: usize = ds.iter().map(|&d| self.shape()[d]).product();
        let perm: Vec<usize> = kept.iter().chain(&ds).copied().collect();
        let x = self.detach().permute(&perm)?;
        let s = x.storage()?.var_rows(rows, cols, correction)?;
        let x = self.detach();
        let dims = dims.to_vec();
        let dtype = self.dtype();
        // the variance is f32 (the kernel widens a 16-bit input as it loads); `finish` rounds it
        // once to the input's dtype outside an autocast scope
        let y = Tensor::from_op(s, out_shape, OP, &[self], move |g| {
            // in f32 (a 16-bit x widened), the gradient rounded once to x's dtype
            let x = as_dtype(x.clone(), DType::F32)?;
            let den = cols.saturating_sub(correction) as f32;
            let dev = x.sub(&x.mean_dims(&dims, true)?)?;
            let gk = as_dtype(g.reshape(&keep)?, DType::F32)?;
            as_dtype(dev.mul(&gk)?.mul_scalar(2.0 / den)?, dtype).map(|gx| vec![Some(gx)])
        });
        finish(y, dtype)
    }
}
