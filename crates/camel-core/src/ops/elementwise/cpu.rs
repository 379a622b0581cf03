//! The CPU reference of the elementwise ops.

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cpu::CpuStorage;
use crate::shape::{broadcast_strides, numel};
use crate::Result;

impl ElementwiseKernels for CpuStorage {
    fn unary(&self, op: UnaryOp) -> Result<Self> {
        match self {
            CpuStorage::F16(_) | CpuStorage::BF16(_) => Ok(CpuStorage::from_f32_vec(
                unary(&self.to_f32_vec(), op),
                self.dtype(),
            )),
            _ => Ok(CpuStorage::F32(unary(self.f32("unary")?, op))),
        }
    }

    fn binary(
        &self,
        rhs: &Self,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Self> {
        if let CpuStorage::F16(_) | CpuStorage::BF16(_) = self {
            // computed in f32 and rounded once, as the CUDA kernels
            if rhs.dtype() != self.dtype() {
                return Err(crate::Error::DTypeMismatch {
                    op: "binary",
                    expected: self.dtype(),
                    got: rhs.dtype(),
                });
            }
            let (a, b) = (self.to_f32_vec(), rhs.to_f32_vec());
            let out = binary(&a, a_shape, &b, b_shape, out_shape, op)?;
            return Ok(CpuStorage::from_f32_vec(out, self.dtype()));
        }
        let (a, b) = (self.f32("binary")?, rhs.f32("binary")?);
        Ok(CpuStorage::F32(binary(
            a, a_shape, b, b_shape, out_shape, op,
        )?))
    }

    fn where_select(
        &self,
        a: &Self,
        b: &Self,
        m_shape: &[usize],
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<Self> {
        let (m, a, b) = (self.f32("where")?, a.f32("where")?, b.f32("where")?);
        let n = numel(out_shape);
        let strides = [
            broadcast_strides(m_shape, out_shape),
            broadcast_strides(a_shape, out_shape),
            broadcast_strides(b_shape, out_shape),
        ];
        let mut out = crate::backend::cpu::try_vec("where", n)?;
        for i in 0..n {
            let (mut rem, mut off) = (i, [0usize; 3]);
            for d in (0..out_shape.len()).rev() {
                let q = rem % out_shape[d];
                rem /= out_shape[d];
                for (o, s) in off.iter_mut().zip(&strides) {
                    *o += q * s[d];
                }
            }
            out.push(if m[off[0]] != 0.0 {
                a[off[1]]
            } else {
                b[off[2]]
            });
        }
        Ok(CpuStorage::F32(out))
    }

    fn triangle(&self, rows: usize, cols: usize, k: i64, upper: bool) -> Result<Self> {
        let x = self.f32("triangle")?;
        let mut out = crate::backend::cpu::try_vec("triangle", x.len())?;
        out.extend(x.iter().enumerate().map(|(i, &v)| {
            let (c, r) = ((i % cols) as i64, ((i / cols) % rows) as i64);
            let keep = if upper { c - r >= k } else { c - r <= k };
            if keep {
                v
            } else {
                0.0
            }
        }));
        Ok(CpuStorage::F32(out))
    }

    fn clamp(&self, lo: f32, hi: f32, grad: bool) -> Result<Self> {
        let x = self.f32("clamp")?;
        let mut out = crate::backend::cpu::try_vec("clamp", x.len())?;
        out.extend(x.iter().map(|&v| clamp_apply(v, lo, hi, grad)));
        Ok(CpuStorage::F32(out))
    }
}

/// `clamp(x, lo, hi)` (NaN stays NaN; `lo > hi` gives `hi`, as `torch.clamp`), or with `grad`
/// its derivative mask: 1 where `lo ≤ x ≤ hi`, else 0 (0 at NaN).
pub fn clamp_apply(x: f32, lo: f32, hi: f32, grad: bool) -> f32 {
    if grad {
        return (x >= lo && x <= hi) as i32 as f32;
    }
    if x.is_nan() {
        return x;
    }
    let y = if x < lo { lo } else { x };
    if y > hi {
        hi
    } else {
        y
    }
}

/// `y = f(x)` elementwise.
pub fn unary(x: &[f32], op: UnaryOp) -> Vec<f32> {
    match op {
        // loops of their own, which the compiler vectorizes
        UnaryOp::Gelu => x.iter().map(|&v| super::gelu(v)).collect(),
        UnaryOp::GeluGrad => x.iter().map(|&v| super::gelu_grad(v)).collect(),
        _ => x.iter().map(|&v| op.apply(v)).collect(),
    }
}

/// `out = a ∘ b` with broadcasting to `out_shape`; an output the host cannot hold is
/// [`crate::Error::OutOfMemory`].
pub fn binary(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
    op: BinaryOp,
) -> Result<Vec<f32>> {
    if a_shape == b_shape {
        if op == BinaryOp::GeluBwd {
            // a loop of its own, which the compiler vectorizes
            return Ok(a
                .iter()
                .zip(b)
                .map(|(&x, &g)| g * super::gelu_grad(x))
                .collect());
        }
        return Ok(a.iter().zip(b).map(|(&x, &y)| op.apply(x, y)).collect());
    }
    let n = numel(out_shape);
    // Fast path for the common "bias over rows" case: b is a trailing block repeated.
    if a_shape == out_shape
        && !b.is_empty()
        && n.is_multiple_of(b.len())
        && out_shape.ends_with(b_shape_trim(b_shape))
    {
        let m = b.len();
        return Ok(a
            .iter()
            .enumerate()
            .map(|(i, &x)| op.apply(x, b[i % m]))
            .collect());
    }
    let sa = broadcast_strides(a_shape, out_shape);
    let sb = broadcast_strides(b_shape, out_shape);
    let mut out = crate::backend::cpu::try_vec("binary", n)?;
    let mut idx = vec![0usize; out_shape.len()];
    let (mut ia, mut ib) = (0usize, 0usize);
    for _ in 0..n {
        out.push(op.apply(a[ia], b[ib]));
        // increment the multi-index, updating the two input offsets incrementally
        for d in (0..out_shape.len()).rev() {
            idx[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if idx[d] < out_shape[d] {
                break;
            }
            ia -= sa[d] * out_shape[d];
            ib -= sb[d] * out_shape[d];
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Drop leading 1s of a shape (so `[1, 3]` matches the trailing `[.., 3]` of the output).
fn b_shape_trim(s: &[usize]) -> &[usize] {
    let k = s.iter().take_while(|&&d| d == 1).count();
    &s[k..]
}
