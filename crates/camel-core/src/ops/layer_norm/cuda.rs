//! LayerNorm on the GPU: the LayerNorm ladder (`kernels/layernorm`). f16 and bf16 rows run
//! step 4's kernels, which widen each element to f32 as they load it and round each output once;
//! at the other steps, and for rows longer than those kernels hold, the 16-bit operands widen
//! with the cast kernel, the f32 kernels run and the outputs round once.

use super::LayerNormKernels;
use crate::backend::cuda::{elem, expect, like, CudaStorage, Family};
use crate::config::step;
use crate::ops::shape::ShapeKernels;
use crate::{DType, Result};
use camel_cuda::kernels as k;
use camel_cuda::kernels::rows::Step;

/// Whether the 16-bit kernels (step 4's) take rows of `cols` at the selected step.
fn typed_rows(cols: usize) -> bool {
    step(Family::LayerNorm) == Step::Four && k::layernorm::layernorm3_shape(cols, false).is_some()
}

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
    if x.dtype.is_half() {
        for s in [gamma, beta] {
            expect("layer_norm", s, x.dtype)?;
        }
        if typed_rows(cols) {
            let y = like(x, rows * cols, x.dtype)?;
            let mean = like(x, rows, DType::F32)?;
            let rstd = like(x, rows, DType::F32)?;
            let p = [x, gamma, beta, &y, &mean, &rstd].map(CudaStorage::ptr);
            if k::layernorm::streaming_typed(&x.dev, p, rows, cols, eps, elem(x.dtype))? {
                return Ok((y, mean, rstd));
            }
        }
        let [xf, gf, bf] = [x, gamma, beta].map(|s| s.cast(DType::F32));
        let (y, mean, rstd) = layer_norm_fwd(&xf?, &gf?, &bf?, rows, cols, eps)?;
        return Ok((y.cast(x.dtype)?, mean, rstd));
    }
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
    if x.dtype.is_half() {
        for s in [gamma, g] {
            expect("layer_norm backward", s, x.dtype)?;
        }
        if typed_rows(cols) {
            let dx = like(x, rows * cols, x.dtype)?;
            let dgamma = like(x, cols, x.dtype)?;
            let dbeta = like(x, cols, x.dtype)?;
            let p = [x, gamma, g, mean, rstd, &dx, &dgamma, &dbeta].map(CudaStorage::ptr);
            if k::layernorm::warp_pair_bwd_typed(&x.dev, p, rows, cols, elem(x.dtype))? {
                return Ok((dx, dgamma, dbeta));
            }
        }
        let [xf, gmf, gf] = [x, gamma, g].map(|s| s.cast(DType::F32));
        let (dx, dg, db) = layer_norm_bwd(&xf?, &gmf?, &gf?, mean, rstd, rows, cols)?;
        return Ok((dx.cast(x.dtype)?, dg.cast(x.dtype)?, db.cast(x.dtype)?));
    }
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
