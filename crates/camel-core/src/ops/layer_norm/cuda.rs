//! LayerNorm on the GPU: the LayerNorm ladder (`kernels/layernorm`).

use super::LayerNormKernels;
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl LayerNormKernels for CudaStorage {
    fn layer_norm_fwd(
        &self,
        gamma: &Self,
        beta: &Self,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        cuda::layer_norm_fwd(self, gamma, beta, rows, cols, eps)
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
        cuda::layer_norm_bwd(self, gamma, g, mean, rstd, rows, cols)
    }
}
