//! Softmax and log-softmax on the GPU: the softmax ladder (`kernels/softmax`).

use super::SoftmaxKernels;
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl SoftmaxKernels for CudaStorage {
    fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        cuda::softmax_last(self, rows, cols, log)
    }

    fn softmax_last_bwd(&self, g: &Self, rows: usize, cols: usize, log: bool) -> Result<Self> {
        cuda::softmax_last_bwd(self, g, rows, cols, log)
    }
}
