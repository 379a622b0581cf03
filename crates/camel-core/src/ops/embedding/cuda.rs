//! The embedding on the GPU: the embedding ladder (`kernels/embedding`).

use super::EmbeddingKernels;
use crate::backend::cuda::{self, CudaStorage};
use crate::Result;

impl EmbeddingKernels for CudaStorage {
    fn index_select_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        cuda::index_select_rows(self, idx, v, d)
    }

    fn index_add_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        cuda::index_add_rows(self, idx, v, d)
    }
}
