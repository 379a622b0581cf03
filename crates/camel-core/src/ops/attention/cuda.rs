//! Fused attention on the GPU (`kernels/attention`): f32 at steps 1–2, f16 and bf16 at step 3.

use super::{AttentionKernels, Attn};
use crate::backend::cuda::{elem, expect, like, CudaStorage, Family};
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
    let size = q.dtype.size();
    [
        q.ptr().byte_add(a.off[0] * size),
        k.ptr().byte_add(a.off[1] * size),
        v.ptr().byte_add(a.off[2] * size),
    ]
}

impl AttentionKernels for CudaStorage {
    fn attention(&self, k: &Self, v: &Self, a: &Attn) -> Result<(Self, Self)> {
        let dt = self.dtype;
        for s in [k, v] {
            expect("attention", s, dt)?;
        }
        let kernels = k::attention::at(step(Family::Attention), elem(dt))?;
        let g = &a.g;
        let o = like(self, g.rows() * g.d, dt)?;
        let lse = like(self, g.rows(), DType::F32)?;
        let [qp, kp, vp] = operands(self, k, v, a);
        (kernels.forward)(&self.dev, g, elem(dt), qp, kp, vp, o.ptr(), lse.ptr())?;
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
        let dt = self.dtype;
        for s in [k, v, o, dout] {
            expect("attention backward", s, dt)?;
        }
        expect("attention backward", lse, DType::F32)?;
        let kernels = k::attention::at(step(Family::Attention), elem(dt))?;
        let g = &a.g;
        let dq = like(self, g.rows() * g.d, dt)?;
        let dk = like(self, g.b * g.h * g.tk * g.d, dt)?;
        let dv = like(self, g.b * g.h * g.tk * g.d, dt)?;
        let [qp, kp, vp] = operands(self, k, v, a);
        (kernels.backward)(
            &self.dev,
            g,
            elem(dt),
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
