//! The elementwise ops on the GPU: the elementwise ladder (`kernels/elementwise`).

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl ElementwiseKernels for CudaStorage {
    fn unary(&self, op: UnaryOp) -> Result<Self> {
        cuda::unary(self, op)
    }

    fn binary(
        &self,
        rhs: &Self,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Self> {
        cuda::binary(self, rhs, a_shape, b_shape, out_shape, op)
    }
}
