//! Pooling on the GPU: `kernels/pool/01_thread_per_output.cu`.

use super::{PoolGeom, PoolKernels};
use crate::backend::cuda::{expect, like, CudaStorage};
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl PoolKernels for CudaStorage {
    fn max_pool2d(&self, g: &PoolGeom) -> Result<(Self, Self)> {
        expect("max_pool2d", self, DType::F32)?;
        let y = like(self, g.out_len(), DType::F32)?;
        let idx = like(self, g.out_len(), DType::I64)?;
        k::pool::max_pool2d(&self.dev, self.ptr(), y.ptr(), idx.ptr(), g)?;
        Ok((y, idx))
    }

    fn max_pool2d_bwd(&self, idx: &Self, g: &PoolGeom) -> Result<Self> {
        expect("max_pool2d backward", self, DType::F32)?;
        expect("max_pool2d backward", idx, DType::I64)?;
        let dx = like(self, g.in_len(), DType::F32)?;
        k::pool::max_pool2d_bwd(&self.dev, self.ptr(), idx.ptr(), dx.ptr(), g)?;
        Ok(dx)
    }

    fn avg_pool2d(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        expect("avg_pool2d", self, DType::F32)?;
        let y = like(self, g.out_len(), DType::F32)?;
        k::pool::avg_pool2d(&self.dev, self.ptr(), y.ptr(), g, cip)?;
        Ok(y)
    }

    fn avg_pool2d_bwd(&self, g: &PoolGeom, cip: bool) -> Result<Self> {
        expect("avg_pool2d backward", self, DType::F32)?;
        let dx = like(self, g.in_len(), DType::F32)?;
        k::pool::avg_pool2d_bwd(&self.dev, self.ptr(), dx.ptr(), g, cip)?;
        Ok(dx)
    }
}
