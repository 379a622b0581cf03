//! The cross-entropy on the GPU: the loss ladder (`kernels/loss`). At its top step the mean
//! over the rows is fused into the kernel, one launch each way; below it, per-row kernels are
//! followed by a sum and a scale. f16 and bf16 logits run the top step's kernels, which widen
//! each logit as they load it (and round the gradient once as they store it); at the other
//! steps, and for rows longer than those kernels hold, the logits widen with the cast kernel
//! and the f32 path runs, its gradient rounded once.

use super::LossKernels;
use crate::backend::cuda::{elem, err_slot, expect, expect_float, like, CudaStorage, Family};
use crate::config::step;
use crate::ops::elementwise::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::ops::reduce::{ReduceKernels, ReduceOp};
use crate::ops::shape::ShapeKernels;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl LossKernels for CudaStorage {
    fn cross_entropy_mean(
        &self,
        t: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Option<Self>)> {
        if let Some((mean, stats)) = cross_entropy_mean_fwd(self, t, rows, cols)? {
            return Ok((mean, Some(stats)));
        }
        if self.dtype.is_half() {
            return self.cast(DType::F32)?.cross_entropy_mean(t, rows, cols);
        }
        let (loss, stats) = cross_entropy_fwd_stats(self, t, rows, cols)?;
        let sum = ReduceKernels::reduce(&loss, 1, rows, 1, ReduceOp::Sum)?;
        let mean = ElementwiseKernels::unary(&sum, UnaryOp::MulScalar(1.0 / rows as f32))?;
        Ok((mean, stats))
    }

    fn cross_entropy_mean_bwd(
        &self,
        t: &Self,
        stats: Option<&Self>,
        g: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        if let (true, Some(s)) = (fused_mean_step(), stats) {
            if let Some(dx) = cross_entropy_mean_bwd(self, t, s, g, rows, cols)? {
                return Ok(dx);
            }
        }
        if self.dtype.is_half() {
            let dx = self
                .cast(DType::F32)?
                .cross_entropy_mean_bwd(t, stats, g, rows, cols)?;
            return dx.cast(self.dtype);
        }
        // every row's upstream gradient is g / rows
        let scale = crate::backend::cuda::full(self.ordinal(), rows, 1.0 / rows as f32)?;
        let g_row = scale.binary(g, &[rows], &[1], &[rows], BinaryOp::Mul)?;
        cross_entropy_bwd_stats(self, t, stats, &g_row, rows, cols)
    }

    /// One partial sum a block (`kernels/loss/mse.cu`), the partials summed by the reduction
    /// ladder, then scaled by 1/n: three launches, the input read once.
    fn mse_mean(&self, b: &Self, n: usize) -> Result<Self> {
        expect_float("mse", self)?;
        expect("mse", b, self.dtype)?;
        let blocks = k::loss::mse_blocks(&self.dev, n);
        let partial = like(self, blocks, DType::F32)?;
        let ptrs = [self.ptr(), b.ptr(), partial.ptr()];
        k::loss::mse_partial(&self.dev, ptrs, n, elem(self.dtype))?;
        let sum = ReduceKernels::reduce(&partial, 1, blocks, 1, ReduceOp::Sum)?;
        ElementwiseKernels::unary(&sum, UnaryOp::MulScalar(1.0 / n as f32))
    }

    fn mse_bwd(
        &self,
        b: &Self,
        g: &Self,
        n: usize,
        scale: f32,
        want: [bool; 2],
    ) -> Result<(Option<Self>, Option<Self>)> {
        let op = "mse backward";
        expect_float(op, self)?;
        expect(op, b, self.dtype)?;
        expect(op, g, DType::F32)?;
        let grad = |w: bool| {
            if w {
                like(self, n, self.dtype).map(Some)
            } else {
                Ok(None)
            }
        };
        let (da, db) = (grad(want[0])?, grad(want[1])?);
        let ptr =
            |s: &Option<CudaStorage>| s.as_ref().map_or(camel_cuda::DevPtr::NULL, |s| s.ptr());
        if da.is_some() || db.is_some() {
            let ptrs = [self.ptr(), b.ptr(), g.ptr(), ptr(&da), ptr(&db)];
            k::loss::mse_bwd(&self.dev, ptrs, n, scale, elem(self.dtype))?;
        }
        Ok((da, db))
    }
}

/// Per-row cross-entropy.
fn cross_entropy_fwd(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    expect("cross_entropy", x, DType::F32)?;
    expect("cross_entropy", t, DType::I64)?;
    let out = like(x, rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    k::loss::block_per_row(&x.dev, x.ptr(), t.ptr(), out.ptr(), rows, cols, err)?;
    Ok(out)
}

/// Gradient of the per-row cross-entropy.
fn cross_entropy_bwd(
    x: &CudaStorage,
    t: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    expect("cross_entropy backward", t, DType::I64)?;
    let out = like(x, rows * cols, DType::F32)?;
    let err = err_slot(&x.dev)?;
    k::loss::block_per_row_bwd(
        &x.dev,
        x.ptr(),
        t.ptr(),
        g.ptr(),
        out.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(out)
}

/// Per-row cross-entropy and, with steps 2 and 3, the row statistics (max, Σ exp) for the
/// backward.
fn cross_entropy_fwd_stats(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<(CudaStorage, Option<CudaStorage>)> {
    let Some((forward, _)) = k::loss::at(step(Family::CrossEntropy)).per_row else {
        return Ok((cross_entropy_fwd(x, t, rows, cols)?, None));
    };
    expect("cross_entropy", x, DType::F32)?;
    expect("cross_entropy", t, DType::I64)?;
    let loss = like(x, rows, DType::F32)?;
    let stats = like(x, 2 * rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    forward(
        &x.dev,
        x.ptr(),
        t.ptr(),
        loss.ptr(),
        stats.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok((loss, Some(stats)))
}

/// Gradient of the per-row cross-entropy; one pass over the logits when the forward saved
/// `stats`, else step 1 (which recomputes them).
fn cross_entropy_bwd_stats(
    x: &CudaStorage,
    t: &CudaStorage,
    stats: Option<&CudaStorage>,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    let Some(stats) = stats else {
        return cross_entropy_bwd(x, t, g, rows, cols);
    };
    expect("cross_entropy backward", t, DType::I64)?;
    let out = like(x, rows * cols, DType::F32)?;
    let err = err_slot(&x.dev)?;
    // the stats are the same (max, Σ exp) in steps 2 to 4; a forward at step 1 saves none
    let Some((_, backward)) = k::loss::at(step(Family::CrossEntropy)).per_row else {
        return cross_entropy_bwd(x, t, g, rows, cols);
    };
    backward(
        &x.dev,
        x.ptr(),
        t.ptr(),
        stats.ptr(),
        g.ptr(),
        out.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(out)
}

/// Whether the configured step fuses the mean into its kernels (step 4).
fn fused_mean_step() -> bool {
    k::loss::at(step(Family::CrossEntropy)).mean.is_some()
}

/// Whether the fused kernels take rows of `cols` logits of `x`'s dtype: f32 at any length,
/// 16-bit up to the register kernels' length.
fn fits_fused(x: &CudaStorage, cols: usize) -> bool {
    !x.dtype.is_half() || cols <= k::softmax::SOFTMAX3_MAX_COLS
}

/// The mean cross-entropy over the rows in one kernel (step 4 of the family), reading the
/// logits in their dtype (f16 and bf16 widen as they load): `Some((mean, stats))`, both f32, the
/// mean a one-element buffer. `None` at steps 1–3, whose per-row kernels the op follows with a
/// mean; when there are no classes (every target is then out of range, which the per-row path
/// reports); and for 16-bit rows longer than the register kernels hold.
fn cross_entropy_mean_fwd(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<Option<(CudaStorage, CudaStorage)>> {
    if !fused_mean_step() || rows == 0 || cols == 0 || !fits_fused(x, cols) {
        return Ok(None);
    }
    expect_float("cross_entropy", x)?;
    expect("cross_entropy", t, DType::I64)?;
    let mean = like(x, 1, DType::F32)?;
    let stats = like(x, 2 * rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    let ptrs = [x.ptr(), t.ptr(), mean.ptr(), stats.ptr()];
    let launched = k::loss::fused_mean_typed(&x.dev, ptrs, rows, cols, err, elem(x.dtype))?;
    Ok(launched.then_some((mean, stats)))
}

/// Gradient of [`cross_entropy_mean_fwd`]'s mean with respect to the logits, in their dtype
/// (computed in f32, rounded once), from its `stats` and the one f32 upstream gradient `g`; one
/// kernel. `None` for 16-bit rows longer than the register kernels hold.
fn cross_entropy_mean_bwd(
    x: &CudaStorage,
    t: &CudaStorage,
    stats: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<Option<CudaStorage>> {
    expect("cross_entropy backward", t, DType::I64)?;
    expect("cross_entropy backward", g, DType::F32)?;
    if !fits_fused(x, cols) {
        return Ok(None);
    }
    let out = like(x, rows * cols, x.dtype)?;
    let err = err_slot(&x.dev)?;
    let ptrs = [x.ptr(), t.ptr(), stats.ptr(), g.ptr(), out.ptr()];
    let launched = k::loss::fused_mean_bwd_typed(&x.dev, ptrs, rows, cols, err, elem(x.dtype))?;
    Ok(launched.then_some(out))
}
