//! The CPU reference of the scaled, masked softmax.

use super::{MaskedRows, MaskedSoftmaxKernels};
use crate::backend::cpu::{try_filled, CpuStorage};
use crate::backend::vector::{widest, Loop};
use crate::ops::elementwise::exp_f32;
use crate::Result;

/// [`masked_softmax`] or its backward, compiled for the CPU's widest vector unit.
enum Pass<'a> {
    Forward(&'a [f32]),
    Backward(&'a [f32], &'a [f32]),
}

impl Loop for (Pass<'_>, &mut [f32], MaskedRows) {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        match self {
            (Pass::Forward(x), out, m) => masked_softmax(x, out, m),
            (Pass::Backward(y, g), out, m) => masked_softmax_bwd(y, g, out, m),
        }
    }
}

impl MaskedSoftmaxKernels for CpuStorage {
    /// In the input's dtype: a 16-bit row widens, computes in f32 and rounds once, as on the GPU.
    fn masked_softmax(&self, m: MaskedRows) -> Result<Self> {
        let x = self.f32_widened("scaled_masked_softmax")?;
        let mut out = try_filled("scaled_masked_softmax", m.rows * m.tk, 0.0f32)?;
        widest((Pass::Forward(&x), &mut out[..], m));
        Ok(CpuStorage::from_f32_vec(out, self.dtype()))
    }

    fn masked_softmax_bwd(&self, g: &Self, m: MaskedRows) -> Result<Self> {
        let op = "scaled_masked_softmax backward";
        if g.dtype() != self.dtype() {
            return Err(crate::Error::DTypeMismatch {
                op,
                expected: self.dtype(),
                got: g.dtype(),
            });
        }
        let (y, g) = (self.f32_widened(op)?, g.f32_widened(op)?);
        let mut out = try_filled(op, m.rows * m.tk, 0.0f32)?;
        widest((Pass::Backward(&y, &g), &mut out[..], m));
        Ok(CpuStorage::from_f32_vec(out, self.dtype()))
    }
}

/// `softmax(scale · x)` of each row over its visible keys (max-subtracted), 0 on masked keys;
/// `out` is zeros on entry. The exponential is [`exp_f32`], which vectorizes.
#[inline(always)]
pub fn masked_softmax(x: &[f32], out: &mut [f32], m: MaskedRows) {
    for r in 0..m.rows {
        let n = m.visible(r);
        let row = &x[r * m.tk..r * m.tk + n];
        let o = &mut out[r * m.tk..(r + 1) * m.tk];
        // a NaN reaches the sum through its exp, and so every output of the row
        let mx = row
            .iter()
            .map(|&v| v * m.scale)
            .fold(f32::NEG_INFINITY, f32::max);
        let mref = if mx == f32::NEG_INFINITY { 0.0 } else { mx };
        let mut sum = 0.0f32;
        for (oi, &v) in o.iter_mut().zip(row) {
            *oi = exp_f32(v * m.scale - mref);
        }
        for &v in &o[..n] {
            sum += v;
        }
        // the masked keys hold 0 (from `try_filled`): 0 · (1 / Σ) is 0, or NaN when the row
        // holds a NaN, as the kernel gives
        let inv = 1.0 / sum;
        o.iter_mut().for_each(|v| *v *= inv);
    }
}

/// Backward of [`masked_softmax`] from its output `y`: `dx = scale · y ⊙ (g − Σ g⊙y)` over the
/// visible keys, 0 on masked keys whatever `g` holds there; `out` is zeros on entry.
#[inline(always)]
pub fn masked_softmax_bwd(y: &[f32], g: &[f32], out: &mut [f32], m: MaskedRows) {
    for r in 0..m.rows {
        let n = m.visible(r);
        let (yr, gr) = (&y[r * m.tk..r * m.tk + n], &g[r * m.tk..r * m.tk + n]);
        let o = &mut out[r * m.tk..(r + 1) * m.tk];
        let dot: f32 = yr.iter().zip(gr).map(|(&a, &b)| a * b).sum();
        for ((oi, &yi), &gi) in o.iter_mut().zip(yr).zip(gr) {
            *oi = m.scale * yi * (gi - dot);
        }
    }
}
