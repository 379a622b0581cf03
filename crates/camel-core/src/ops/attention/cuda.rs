//! Fused attention on the GPU (`kernels/attention`).

use super::{AttentionKernels, Attn};
use crate::backend::cuda::{expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

/// q, k and v's device pointers, each advanced to its view's first element.
fn operands(
    q: &CudaStorage,
    k: &CudaStorage,
    v: &CudaStorage,
    a: &Attn,
) -> [camel_cuda::DevPtr; 3] {
    [
        q.ptr().add::<f32>(a.off[0]),
        k.ptr().add::<f32>(a.off[1]),
        v.ptr().add::<f32>(a.off[2]),
    ]
}

impl AttentionKernels for CudaStorage {
    fn attention(&self, k: &Self, v: &Self, a: &Attn) -> Result<(Self, Self)> {
        for s in [self, k, v] {
            expect("attention", s, DType::F32)?;
        }
        let g = &a.g;
        let o = like(self, g.rows() * g.d, DType::F32)?;
        let lse = like(self, g.rows(), DType::F32)?;
        let [qp, kp, vp] = operands(self, k, v, a);
        let forward = k::attention::at(step(Family::Attention)).forward;
        forward(&self.dev, g, qp, kp, vp, o.ptr(), lse.ptr())?;
        Ok((o, lse))
    }

    fn attention_bwd(
        &self,
        k: &Self,
        v: &Self,
        o: &Self,
        dout: &Self,
        lse: &Self,
        a: &Attn,
    ) -> Result<(Self, Self, Self)> {
        for s in [self, k, v, o, dout, lse] {
            expect("attention backward", s, DType::F32)?;
        }
        let g = &a.g;
        let dq = like(self, g.rows() * g.d, DType::F32)?;
        let dk = like(self, g.b * g.h * g.tk * g.d, DType::F32)?;
        let dv = like(self, g.b * g.h * g.tk * g.d, DType::F32)?;
        let [qp, kp, vp] = operands(self, k, v, a);
        let backward = k::attention::at(step(Family::Attention)).backward;
        backward(
            &self.dev,
            g,
            qp,
            kp,
            vp,
            o.ptr(),
            dout.ptr(),
            lse.ptr(),
            dq.ptr(),
            dk.ptr(),
            dv.ptr(),
        )?;
        Ok((dq, dk, dv))
    }
}
