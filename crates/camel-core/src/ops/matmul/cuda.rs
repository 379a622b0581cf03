//! The matrix products on the GPU: the SGEMM ladder (`kernels/matmul`).

use super::{Gemm, MatmulKernels};
use crate::backend::cuda::{expect, like, CudaStorage};
use crate::backend::Activation;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl MatmulKernels for CudaStorage {
    fn matmul(&self, rhs: &Self, g: &Gemm) -> Result<Self> {
        matmul(self, rhs, g)
    }

    fn linear(
        &self,
        w: &Self,
        bias: Option<&Self>,
        dims: (usize, usize, usize),
        act: Activation,
    ) -> Result<(Self, Option<Self>)> {
        linear(self, w, bias, dims, act)
    }
}

/// Batched SGEMM with the selected ladder step.
fn matmul(a: &CudaStorage, b: &CudaStorage, s: &Gemm) -> Result<CudaStorage> {
    expect("matmul", a, DType::F32)?;
    expect("matmul", b, DType::F32)?;
    let out = like(a, s.batch * s.m * s.n, DType::F32)?;
    if s.k == 0 {
        k::elementwise::fill_f32(&a.dev, out.ptr(), out.len, 0.0)?;
        return Ok(out);
    }
    let g = Gemm {
        batch: s.batch,
        m: s.m,
        n: s.n,
        k: s.k,
        trans_a: s.trans_a,
        trans_b: s.trans_b,
        stride_a: s.stride_a,
        stride_b: s.stride_b,
    };
    k::matmul::sgemm(
        &a.dev,
        crate::config::sgemm_kernel(),
        &g,
        a.ptr(),
        b.ptr(),
        out.ptr(),
    )?;
    Ok(out)
}

/// `act(x · wᵀ + bias)` in one GEMM with a fused epilogue (the pre-activation is saved too when
/// the activation is GELU).
fn linear(
    x: &CudaStorage,
    w: &CudaStorage,
    bias: Option<&CudaStorage>,
    (rows, inp, out): (usize, usize, usize),
    act: Activation,
) -> Result<(CudaStorage, Option<CudaStorage>)> {
    expect("linear", x, DType::F32)?;
    expect("linear", w, DType::F32)?;
    if let Some(b) = bias {
        expect("linear", b, DType::F32)?;
    }
    let y = like(x, rows * out, DType::F32)?;
    let z = if act == Activation::Gelu {
        Some(like(x, rows * out, DType::F32)?)
    } else {
        None
    };
    let g = Gemm {
        batch: 1,
        m: rows,
        n: out,
        k: inp,
        trans_a: false,
        trans_b: true,
        stride_a: 0,
        stride_b: 0,
    };
    let epi = k::matmul::Epilogue {
        bias: bias.map(|b| b.ptr()),
        act,
        pre_act: z.as_ref().map(|z| z.ptr()),
    };
    // k = 0 needs no special case: the kernels' K loop is empty and the epilogue still runs
    k::matmul::sgemm_epilogue(
        &x.dev,
        crate::config::sgemm_kernel(),
        &g,
        x.ptr(),
        w.ptr(),
        y.ptr(),
        &epi,
    )?;
    Ok((y, z))
}
