//! The data-movement primitives on the GPU (`kernels/shape.cu`).

use super::ShapeKernels;
use crate::backend::cuda::{self, CudaStorage};
use crate::{DType, Result};

impl ShapeKernels for CudaStorage {
    fn copy_strided(&self, shape: &[usize], strides: &[usize], offset: usize) -> Result<Self> {
        cuda::copy_strided(self, shape, strides, offset)
    }

    fn cat(parts: &[&Self], outer: usize, widths: &[usize]) -> Result<Self> {
        cuda::cat(parts, outer, widths)
    }

    fn pad(&self, shape: &[usize], before: &[usize], after: &[usize], value: f32) -> Result<Self> {
        cuda::pad(self, shape, before, after, value)
    }

    fn cast(&self, dtype: DType) -> Result<Self> {
        if self.dtype() == dtype {
            return cuda::clone(self);
        }
        cuda::cast(self, dtype)
    }
}
