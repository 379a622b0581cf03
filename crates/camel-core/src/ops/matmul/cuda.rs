//! The matrix products on the GPU: the SGEMM ladder (`kernels/matmul`).

use super::{Gemm, MatmulKernels};
use crate::backend::cuda::{self, CudaStorage};
use crate::backend::Activation;
use crate::Result;

impl MatmulKernels for CudaStorage {
    fn matmul(&self, rhs: &Self, g: &Gemm) -> Result<Self> {
        cuda::matmul(self, rhs, g)
    }

    fn linear(
        &self,
        w: &Self,
        bias: Option<&Self>,
        dims: (usize, usize, usize),
        act: Activation,
    ) -> Result<(Self, Option<Self>)> {
        cuda::linear(self, w, bias, dims, act)
    }
}
