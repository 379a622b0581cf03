//! BatchNorm on the GPU: the BatchNorm ladder (`kernels/batchnorm`).

use super::BatchNormKernels;
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl BatchNormKernels for CudaStorage {
    fn batch_norm_fwd(
        &self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<(Self, Self, Self)> {
        for s in [self, w, b] {
            expect("batch_norm", s, DType::F32)?;
        }
        let y = like(self, n * c * hw, DType::F32)?;
        let mean = like(self, c, DType::F32)?;
        let var = like(self, c, DType::F32)?;
        let forward = k::batchnorm::at(step(Family::BatchNorm)).forward;
        forward(
            &self.dev,
            self.ptr(),
            w.ptr(),
            b.ptr(),
            y.ptr(),
            mean.ptr(),
            var.ptr(),
            n,
            c,
            hw,
            eps,
        )?;
        Ok((y, mean, var))
    }

    fn batch_norm_eval(
        &self,
        mean: &Self,
        var: &Self,
        w: &Self,
        b: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
    ) -> Result<Self> {
        for s in [self, mean, var, w, b] {
            expect("batch_norm_eval", s, DType::F32)?;
        }
        let y = like(self, n * c * hw, DType::F32)?;
        let eval = k::batchnorm::at(step(Family::BatchNorm)).eval;
        eval(
            &self.dev,
            self.ptr(),
            mean.ptr(),
            var.ptr(),
            w.ptr(),
            b.ptr(),
            y.ptr(),
            n,
            c,
            hw,
            eps,
        )?;
        Ok(y)
    }

    fn batch_norm_bwd(
        &self,
        w: &Self,
        g: &Self,
        mean: &Self,
        var: &Self,
        n: usize,
        c: usize,
        hw: usize,
        eps: f32,
        training: bool,
    ) -> Result<(Self, Self, Self)> {
        expect("batch_norm backward", g, DType::F32)?;
        let dx = like(self, n * c * hw, DType::F32)?;
        let dw = like(self, c, DType::F32)?;
        let db = like(self, c, DType::F32)?;
        let backward = k::batchnorm::at(step(Family::BatchNorm)).backward;
        backward(
            &self.dev,
            self.ptr(),
            w.ptr(),
            g.ptr(),
            mean.ptr(),
            var.ptr(),
            dx.ptr(),
            dw.ptr(),
            db.ptr(),
            n,
            c,
            hw,
            eps,
            training,
        )?;
        Ok((dx, dw, db))
    }
}
