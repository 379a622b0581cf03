//! LayerNorm on the GPU: the LayerNorm ladder (`kernels/layernorm`).

use super::LayerNormKernels;
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl LayerNormKernels for CudaStorage {
    fn layer_norm_fwd(
        &self,
        gamma: &Self,
        beta: &Self,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        layer_norm_fwd(self, gamma, beta, rows, cols, eps)
    }

    fn layer_norm_bwd(
        &self,
        gamma: &Self,
        g: &Self,
        mean: &Self,
        rstd: &Self,
        rows: usize,
        cols: usize,
    ) -> Result<(Self, Self, Self)> {
        layer_norm_bwd(self, gamma, g, mean, rstd, rows, cols)
    }
}

/// LayerNorm forward: `(y, mean, rstd)`.
fn layer_norm_fwd(
    x: &CudaStorage,
    gamma: &CudaStorage,
    beta: &CudaStorage,
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(CudaStorage, CudaStorage, CudaStorage)> {
    for s in [x, gamma, beta] {
        expect("layer_norm", s, DType::F32)?;
    }
    let y = like(x, rows * cols, DType::F32)?;
    let mean = like(x, rows, DType::F32)?;
    let rstd = like(x, rows, DType::F32)?;
    let forward = k::layernorm::at(step(Family::LayerNorm)).forward;
    forward(
        &x.dev,
        x.ptr(),
        gamma.ptr(),
        beta.ptr(),
        y.ptr(),
        mean.ptr(),
        rstd.ptr(),
        rows,
        cols,
        eps,
    )?;
    Ok((y, mean, rstd))
}

/// LayerNorm backward: `(dx, dgamma, dbeta)`.
#[allow(clippy::too_many_arguments)]
fn layer_norm_bwd(
    x: &CudaStorage,
    gamma: &CudaStorage,
    g: &CudaStorage,
    mean: &CudaStorage,
    rstd: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<(CudaStorage, CudaStorage, CudaStorage)> {
    expect("layer_norm backward", g, DType::F32)?;
    let dx = like(x, rows * cols, DType::F32)?;
    let dgamma = like(x, cols, DType::F32)?;
    let dbeta = like(x, cols, DType::F32)?;
    let backward = k::layernorm::at(step(Family::LayerNorm)).backward;
    backward(
        &x.dev,
        x.ptr(),
        gamma.ptr(),
        g.ptr(),
        mean.ptr(),
        rstd.ptr(),
        dx.ptr(),
        dgamma.ptr(),
        dbeta.ptr(),
        rows,
        cols,
    )?;
    Ok((dx, dgamma, dbeta))
}
