//! Softmax and log-softmax on the GPU: the softmax ladder (`kernels/softmax`). f16 and bf16 rows
//! run step 3's kernels, which widen each element to f32 as they load it and round each output
//! once; at steps 1–2, and for rows longer than step 3 holds, the 16-bit rows widen with the
//! cast kernel, run the f32 kernel and round once.

use super::SoftmaxKernels;
use crate::backend::cuda::{elem, expect, expect_float, like, CudaStorage, Family};
use crate::config::step;
use crate::ops::shape::ShapeKernels;
use crate::{DType, Result};
use camel_cuda::kernels as k;
use camel_cuda::kernels::rows::Step;

impl SoftmaxKernels for CudaStorage {
    fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        softmax_last(self, rows, cols, log)
    }

    fn softmax_last_bwd(&self, g: &Self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        softmax_last_bwd(self, g, rows, cols, log)
    }
}

/// Whether the 16-bit kernels (step 3's) serve the selected step: steps 3 and 4 (whose
/// backward is step 3's; its forward has f32 kernels only).
fn typed_step() -> bool {
    matches!(step(Family::Softmax), Step::Three | Step::Four)
}

/// Softmax / log-softmax per row, in the input's dtype.
fn softmax_last(x: &CudaStorage, rows: usize, cols: usize, log: bool) -> Result<CudaStorage> {
    expect_float("softmax", x)?;
    if x.dtype.is_half() {
        let out = like(x, rows * cols, x.dtype)?;
        if typed_step()
            && k::softmax::warp_registers_typed(
                &x.dev,
                x.ptr(),
                out.ptr(),
                rows,
                cols,
                log,
                elem(x.dtype),
            )?
        {
            return Ok(out);
        }
        return softmax_last(&x.cast(DType::F32)?, rows, cols, log)?.cast(x.dtype);
    }
    let out = like(x, rows * cols, DType::F32)?;
    let forward = k::softmax::at(step(Family::Softmax)).forward;
    forward(&x.dev, x.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}

/// Backward of softmax / log-softmax from the forward's output `y`, in `y`'s dtype.
fn softmax_last_bwd(
    y: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<CudaStorage> {
    expect_float("softmax backward", y)?;
    expect("softmax backward", g, y.dtype)?;
    if y.dtype.is_half() {
        let out = like(y, rows * cols, y.dtype)?;
        let ptrs = [y.ptr(), g.ptr(), out.ptr()];
        if typed_step()
            && k::softmax::warp_registers_bwd_typed(&y.dev, ptrs, rows, cols, log, elem(y.dtype))?
        {
            return Ok(out);
        }
        let (yf, gf) = (y.cast(DType::F32)?, g.cast(DType::F32)?);
        return softmax_last_bwd(&yf, &gf, rows, cols, log)?.cast(y.dtype);
    }
    let out = like(y, rows * cols, DType::F32)?;
    let backward = k::softmax::at(step(Family::Softmax)).backward;
    backward(&y.dev, y.ptr(), g.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}
