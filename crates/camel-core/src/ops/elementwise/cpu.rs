//! The CPU reference of the elementwise ops.

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cpu::CpuStorage;
use crate::shape::{broadcast_strides, numel};
use crate::Result;

impl ElementwiseKernels for CpuStorage {
    fn unary(&self, op: UnaryOp) -> Result<Self> {
        Ok(CpuStorage::F32(unary(self.f32("unary")?, op)))
    }

    fn binary(
        &self,
        rhs: &Self,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Self> {
        let (a, b) = (self.f32("binary")?, rhs.f32("binary")?);
        Ok(CpuStorage::F32(binary(
            a, a_shape, b, b_shape, out_shape, op,
        )?))
    }
}

/// `y = f(x)` elementwise.
pub fn unary(x: &[f32], op: UnaryOp) -> Vec<f32> {
    x.iter().map(|&v| op.apply(v)).collect()
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
