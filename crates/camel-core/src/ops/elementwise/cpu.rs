//! The CPU reference of the elementwise ops.

use super::{BinaryOp, ElementwiseKernels, UnaryOp};
use crate::backend::cpu::CpuStorage;
use crate::backend::vector::{map, zip_map_rows};
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
        // a select copies values, so widening the 16-bit ones and rounding back is exact
        let dtype = a.dtype();
        if b.dtype() != dtype {
            return Err(crate::Error::DTypeMismatch {
                op: "where",
                expected: dtype,
                got: b.dtype(),
            });
        }
        let (m, a, b) = (
            self.f32_widened("where")?,
            a.f32_widened("where")?,
            b.f32_widened("where")?,
        );
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
        Ok(CpuStorage::from_f32_vec(out, dtype))
    }

    fn triangle(&self, rows: usize, cols: usize, k: i64, upper: bool) -> Result<Self> {
        let x = self.f32_widened("triangle")?;
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
        Ok(CpuStorage::from_f32_vec(out, self.dtype()))
    }

    fn clamp(&self, lo: f32, hi: f32, grad: bool) -> Result<Self> {
        // in f32, rounded once to a 16-bit dtype, as the CUDA kernel
        let x = self.f32_widened("clamp")?;
        let mut out = crate::backend::cpu::try_vec("clamp", x.len())?;
        out.extend(x.iter().map(|&v| clamp_apply(v, lo, hi, grad)));
        Ok(CpuStorage::from_f32_vec(out, self.dtype()))
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

/// `y = f(x)` elementwise: one loop per op (a match on the op inside the loop would keep it from
/// vectorizing), compiled for the CPU's widest vector unit.
pub fn unary(x: &[f32], op: UnaryOp) -> Vec<f32> {
    use UnaryOp::*;
    macro_rules! per_op {
        ($($unit:ident),*; $($scalar:ident),*) => {
            match op {
                $($unit => map(x, |v| $unit.apply(v)),)*
                $($scalar(c) => map(x, move |v| $scalar(c).apply(v)),)*
            }
        };
    }
    per_op!(
        Neg, Relu, Sigmoid, Tanh, Gelu, GeluGrad, Exp, Log, Step, Sqrt, Square, Abs, Sign;
        AddScalar, MulScalar, PowScalar, EqScalar, NeScalar, LtScalar, LeScalar, GtScalar,
        GeScalar
    )
}

/// `a ∘ b` where `b` has `a`'s length or is a row that repeats along `a` (`a.len()` a multiple of
/// `b.len()`), one loop per op as in [`unary`].
fn binary_rows(a: &[f32], b: &[f32], op: BinaryOp) -> Vec<f32> {
    use BinaryOp::*;
    macro_rules! per_op {
        ($($op:ident),*) => {
            match op {
                $($op => zip_map_rows(a, b, |x, y| $op.apply(x, y)),)*
            }
        };
    }
    per_op!(Add, Sub, Mul, Div, Eq, GeluBwd, Ne, Lt, Le, Gt, Ge, Minimum, Maximum)
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
        return Ok(binary_rows(a, b, op));
    }
    let n = numel(out_shape);
    // Fast path for the common "bias over rows" case: b is a trailing block repeated.
    if a_shape == out_shape
        && !b.is_empty()
        && n.is_multiple_of(b.len())
        && out_shape.ends_with(b_shape_trim(b_shape))
    {
        return Ok(binary_rows(a, b, op));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs of awkward lengths with the edge values every op must carry through.
    fn inputs(n: usize, seed: u32) -> Vec<f32> {
        let edges = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
        ];
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                if i % 11 == 3 {
                    edges[(s >> 29) as usize]
                } else {
                    (s >> 8) as f32 / (1 << 24) as f32 * 16.0 - 8.0
                }
            })
            .collect()
    }

    fn same_bits(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{what}[{i}]: {g} where the scalar reference gives {w}"
            );
        }
    }

    /// The loops compiled for the wider vector units give each op's scalar result bit for bit.
    #[test]
    fn vector_loops_match_the_scalar_reference_bit_for_bit() {
        let unary_ops = [
            UnaryOp::Neg,
            UnaryOp::Relu,
            UnaryOp::Sigmoid,
            UnaryOp::Tanh,
            UnaryOp::Gelu,
            UnaryOp::GeluGrad,
            UnaryOp::Exp,
            UnaryOp::Log,
            UnaryOp::Step,
            UnaryOp::Sqrt,
            UnaryOp::Square,
            UnaryOp::Abs,
            UnaryOp::Sign,
            UnaryOp::AddScalar(0.5),
            UnaryOp::MulScalar(-3.0),
            UnaryOp::PowScalar(1.5),
            UnaryOp::EqScalar(1.0),
            UnaryOp::NeScalar(1.0),
            UnaryOp::LtScalar(0.0),
            UnaryOp::LeScalar(0.0),
            UnaryOp::GtScalar(0.0),
            UnaryOp::GeScalar(0.0),
        ];
        let binary_ops = [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Eq,
            BinaryOp::GeluBwd,
            BinaryOp::Ne,
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Minimum,
            BinaryOp::Maximum,
        ];
        for n in [1, 7, 127, 1031] {
            let (a, b) = (inputs(n, 1), inputs(n, 2));
            for op in unary_ops {
                let want: Vec<f32> = a.iter().map(|&v| op.apply(v)).collect();
                same_bits(&unary(&a, op), &want, &format!("{op:?} at n = {n}"));
            }
            for op in binary_ops {
                let want: Vec<f32> = a.iter().zip(&b).map(|(&x, &y)| op.apply(x, y)).collect();
                let got = binary(&a, &[n], &b, &[n], &[n], op).unwrap();
                same_bits(&got, &want, &format!("{op:?} at n = {n}"));
                // a row repeated over 3 rows (the bias path)
                let big = inputs(3 * n, 3);
                let want: Vec<f32> = big
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| op.apply(x, b[i % n]))
                    .collect();
                let got = binary(&big, &[3, n], &b, &[n], &[3, n], op).unwrap();
                same_bits(&got, &want, &format!("{op:?} over rows at n = {n}"));
            }
        }
    }
}
