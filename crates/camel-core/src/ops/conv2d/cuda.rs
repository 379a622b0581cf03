//! conv2d on the GPU: the conv2d ladder (`kernels/conv2d`) at the step `CAMEL_CONV2D` selects
//! for f32, and the 16-bit convolution's rows (`kernels/conv2d/half_rows.cu`) for f16 and bf16.

use super::{Conv2dGeom, Conv2dKernels};
use crate::backend::cuda::{elem, expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl Conv2dKernels for CudaStorage {
    fn conv2d(&self, w: &Self, bias: Option<&Self>, g: &Conv2dGeom, relu: bool) -> Result<Self> {
        let op = "conv2d";
        expect(op, self, DType::F32)?;
        expect(op, w, DType::F32)?;
        if let Some(b) = bias {
            expect(op, b, DType::F32)?;
        }
        let y = like(self, g.n * g.o * g.pixels(), DType::F32)?;
        let forward = k::conv2d::at(step(Family::Conv2d)).forward;
        forward(
            &self.dev,
            self.ptr(),
            w.ptr(),
            bias.map(|b| b.ptr()),
            y.ptr(),
            g,
            relu,
        )?;
        Ok(y)
    }

    fn conv2d_bwd_input(&self, w: &Self, g: &Conv2dGeom) -> Result<Self> {
        let op = "conv2d backward";
        expect(op, self, DType::F32)?;
        expect(op, w, DType::F32)?;
        let dx = like(self, g.n * g.c * g.h * g.w, DType::F32)?;
        let bwd = k::conv2d::at(step(Family::Conv2d)).backward_input;
        bwd(&self.dev, self.ptr(), w.ptr(), dx.ptr(), g)?;
        Ok(dx)
    }

    fn conv2d_bwd_weight(&self, x: &Self, g: &Conv2dGeom) -> Result<Self> {
        let op = "conv2d backward";
        expect(op, self, DType::F32)?;
        expect(op, x, DType::F32)?;
        let dw = like(self, g.o * g.kg(), DType::F32)?;
        let bwd = k::conv2d::at(step(Family::Conv2d)).backward_weight;
        bwd(&self.dev, self.ptr(), x.ptr(), dw.ptr(), g)?;
        Ok(dw)
    }

    fn conv2d_unfold_rows(&self, g: &Conv2dGeom) -> Result<Self> {
        let rows = like(self, g.groups * g.n * g.pixels() * g.kg(), self.dtype)?;
        k::conv2d::unfold_rows(&self.dev, elem(self.dtype), self.ptr(), rows.ptr(), g)?;
        Ok(rows)
    }

    fn conv2d_fold_rows(&self, g: &Conv2dGeom) -> Result<Self> {
        let dx = like(self, g.n * g.c * g.h * g.w, self.dtype)?;
        k::conv2d::fold_rows(&self.dev, elem(self.dtype), self.ptr(), dx.ptr(), g)?;
        Ok(dx)
    }
}
