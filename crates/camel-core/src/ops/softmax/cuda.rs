//! Softmax and log-softmax on the GPU: the softmax ladder (`kernels/softmax`).

use super::SoftmaxKernels;
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl SoftmaxKernels for CudaStorage {
    fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        softmax_last(self, rows, cols, log)
    }

    fn softmax_last_bwd(&self, g: &Self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        softmax_last_bwd(self, g, rows, cols, log)
    }
}

/// Softmax / log-softmax per row.
fn softmax_last(x: &CudaStorage, rows: usize, cols: usize, log: bool) -> Result<CudaStorage> {
    expect("softmax", x, DType::F32)?;
    let out = like(x, rows * cols, DType::F32)?;
    let forward = k::softmax::at(step(Family::Softmax)).forward;
    forward(&x.dev, x.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}

/// Backward of softmax / log-softmax from the forward's output `y`.
fn softmax_last_bwd(
    y: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<CudaStorage> {
    expect("softmax backward", y, DType::F32)?;
    expect("softmax backward", g, DType::F32)?;
    let out = like(y, rows * cols, DType::F32)?;
    let backward = k::softmax::at(step(Family::Softmax)).backward;
    backward(&y.dev, y.ptr(), g.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}
