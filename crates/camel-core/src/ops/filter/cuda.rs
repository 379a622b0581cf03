//! The image filter on the GPU: the image-filter ladder (`kernels/filter`).

use super::FilterKernels;
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Error, Result};
use camel_cuda::kernels as k;

impl FilterKernels for CudaStorage {
    fn filter2d(&self, filter: &Self, h: usize, w: usize, r: usize) -> Result<Self> {
        let op = "filter2d";
        expect(op, self, DType::F32)?;
        expect(op, filter, DType::F32)?;
        let s = step(Family::Filter);
        let launch = k::filter::at(s)
            .filter2d
            .ok_or_else(|| Error::InvalidArgument {
                op,
                msg: format!("image-filter step {} has no 2-D kernel", s.number()),
            })?;
        let out = like(self, h * w, DType::F32)?;
        launch(&self.dev, self.ptr(), filter.ptr(), out.ptr(), h, w, r)?;
        Ok(out)
    }

    fn filter2d_sep(&self, row: &Self, col: &Self, h: usize, w: usize, r: usize) -> Result<Self> {
        let op = "filter2d_separable";
        for s in [self, row, col] {
            expect(op, s, DType::F32)?;
        }
        let s = step(Family::Filter);
        let kernels = k::filter::at(s);
        let launch = kernels.separable.ok_or_else(|| Error::InvalidArgument {
            op,
            msg: format!("image-filter step {} has no separable passes", s.number()),
        })?;
        let out = like(self, h * w, DType::F32)?;
        // the [h, w] intermediate, only for a step whose passes go through global memory; a
        // fused step ignores its `tmp` argument, which then gets the output's pointer
        let tmp = if kernels.separable_tmp {
            Some(like(self, h * w, DType::F32)?)
        } else {
            None
        };
        let tp = tmp.as_ref().map_or(out.ptr(), |t| t.ptr());
        let (x, rp, cp) = (self.ptr(), row.ptr(), col.ptr());
        launch(&self.dev, x, rp, cp, tp, out.ptr(), h, w, r)?;
        Ok(out)
    }
}
