//! The matrix products on the GPU: the SGEMM ladder for f32, the tensor-core ladder for f16 and
//! bf16 (`kernels/matmul`).

use super::{Gemm, MatmulKernels};
use crate::backend::cuda::{elem, expect, like, CudaStorage};
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

/// The dtype of a product's operands: f32, f16 or bf16, the same for all of them.
fn operand_dtype(op: &'static str, a: &CudaStorage, others: &[&CudaStorage]) -> Result<DType> {
    let d = a.dtype;
    if !matches!(d, DType::F32 | DType::F16 | DType::BF16) {
        return Err(crate::Error::DTypeMismatch {
            op,
            expected: DType::F32,
            got: d,
        });
    }
    for o in others {
        expect(op, o, d)?;
    }
    Ok(d)
}

/// Batched GEMM with the selected ladder step: SGEMM for f32, the tensor-core GEMM for 16 bits.
fn matmul(a: &CudaStorage, b: &CudaStorage, s: &Gemm) -> Result<CudaStorage> {
    let dtype = operand_dtype("matmul", a, &[b])?;
    let out = like(a, s.batch * s.m * s.n, dtype)?;
    if dtype != DType::F32 {
        // k = 0 needs no special case: the kernel stores its zero accumulators
        k::hgemm::hgemm(
            &a.dev,
            crate::config::hgemm_kernel(),
            elem(dtype),
            s,
            a.ptr(),
            b.ptr(),
            out.ptr(),
            &k::matmul::Epilogue::default(),
        )?;
        return Ok(out);
    }
    if s.k == 0 {
        k::elementwise::fill_f32(&a.dev, out.ptr(), out.len, 0.0)?;
        return Ok(out);
    }
    let g = *s;
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
    let dtype = operand_dtype("linear", x, &[w])?;
    if let Some(b) = bias {
        expect("linear", b, dtype)?;
    }
    let y = like(x, rows * out, dtype)?;
    let z = if act == Activation::Gelu {
        Some(like(x, rows * out, dtype)?)
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
    if dtype != DType::F32 {
        k::hgemm::hgemm(
            &x.dev,
            crate::config::hgemm_kernel(),
            elem(dtype),
            &g,
            x.ptr(),
            w.ptr(),
            y.ptr(),
            &epi,
        )?;
        return Ok((y, z));
    }
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
