//! The reductions on the GPU: the reduce ladder (`kernels/reduce`).

use super::{ReduceKernels, ReduceOp};
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl ReduceKernels for CudaStorage {
    fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Self> {
        cuda::reduce(self, outer, dim, inner, op)
    }

    fn argmax_last(&self, rows: usize, cols: usize) -> Result<Self> {
        cuda::argmax_last(self, rows, cols)
    }
}
