//! The CPU reference of the data-movement primitives.

use super::ShapeKernels;
use crate::backend::cpu::CpuStorage;
use crate::shape::{contiguous_strides, numel};
use crate::{DType, Result};

impl ShapeKernels for CpuStorage {
    fn copy_strided(&self, shape: &[usize], strides: &[usize], offset: usize) -> Result<Self> {
        Ok(match self {
            CpuStorage::F32(v) => CpuStorage::F32(copy_strided(v, shape, strides, offset)?),
            CpuStorage::I64(v) => CpuStorage::I64(copy_strided(v, shape, strides, offset)?),
            CpuStorage::F16(v) => CpuStorage::F16(copy_strided(v, shape, strides, offset)?),
            CpuStorage::BF16(v) => CpuStorage::BF16(copy_strided(v, shape, strides, offset)?),
        })
    }

    fn cat(parts: &[&Self], outer: usize, widths: &[usize]) -> Result<Self> {
        fn rows<T: Copy>(parts: &[&[T]], outer: usize, widths: &[usize]) -> Result<Vec<T>> {
            let width = widths.iter().fold(0usize, |a, &w| a.saturating_add(w));
            let mut out = crate::backend::cpu::try_vec("cat", outer.saturating_mul(width))?;
            for o in 0..outer {
                for (p, &w) in parts.iter().zip(widths) {
                    out.extend_from_slice(&p[o * w..(o + 1) * w]);
                }
            }
            Ok(out)
        }
        // the caller checked that every part has the first one's dtype
        macro_rules! join {
            ($variant:ident) => {{
                let v: Vec<_> = parts
                    .iter()
                    .filter_map(|p| match p {
                        CpuStorage::$variant(v) => Some(&v[..]),
                        _ => None,
                    })
                    .collect();
                Ok(CpuStorage::$variant(rows(&v, outer, widths)?))
            }};
        }
        match parts.first() {
            Some(CpuStorage::I64(_)) => join!(I64),
            Some(CpuStorage::F16(_)) => join!(F16),
            Some(CpuStorage::BF16(_)) => join!(BF16),
            _ => join!(F32),
        }
    }

    fn pad(&self, shape: &[usize], before: &[usize], after: &[usize], value: f32) -> Result<Self> {
        // padding copies values, so widening 16-bit ones and rounding back changes only `value`
        let v = pad(&self.f32_widened("pad")?, shape, before, after, value)?;
        Ok(CpuStorage::from_f32_vec(v, self.dtype()))
    }

    fn cast(&self, dtype: DType) -> Result<Self> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        // through f32, as the CUDA casts: see `CpuStorage::from_f32_vec`
        Ok(CpuStorage::from_f32_vec(self.to_f32_vec(), dtype))
    }
}

/// Gather: `out[i] = src[offset + Σ_d idx_d · strides[d]]` for every multi-index of `shape`.
/// Permute, slice and broadcast-expand are all this copy with different strides. An output the
/// host cannot hold (a huge broadcast) is [`crate::Error::OutOfMemory`].
pub fn copy_strided<T: Copy>(
    src: &[T],
    shape: &[usize],
    strides: &[usize],
    offset: usize,
) -> Result<Vec<T>> {
    let n = numel(shape);
    let mut out = crate::backend::cpu::try_vec("copy_strided", n)?;
    if n == 0 {
        return Ok(out);
    }
    let Some((&len, outer)) = shape.split_last() else {
        out.push(src[offset]); // a scalar
        return Ok(out);
    };
    let (step, outer_strides) = strides.split_last().expect("strides match shape");
    // the innermost dim is copied as one run (a slice when its stride is 1), the outer dims are
    // counted like an odometer
    let mut idx = vec![0usize; outer.len()];
    let mut p = offset;
    for _ in 0..n / len {
        if *step == 1 {
            out.extend_from_slice(&src[p..p + len]);
        } else {
            out.extend((0..len).map(|i| src[p + i * step]));
        }
        for d in (0..outer.len()).rev() {
            idx[d] += 1;
            p += outer_strides[d];
            if idx[d] < outer[d] {
                break;
            }
            p -= outer_strides[d] * outer[d];
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Constant padding: `out` has shape `src_shape[d] + before[d] + after[d]`, filled with `value`
/// outside the copied block.
pub fn pad(
    src: &[f32],
    src_shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: f32,
) -> Result<Vec<f32>> {
    let out_shape: Vec<usize> = (0..src_shape.len())
        .map(|d| src_shape[d] + before[d] + after[d])
        .collect();
    let os = contiguous_strides(&out_shape);
    let mut out = crate::backend::cpu::try_filled("pad", numel(&out_shape), value)?;
    let base: usize = (0..src_shape.len()).map(|d| before[d] * os[d]).sum();
    let n = numel(src_shape);
    let mut idx = vec![0usize; src_shape.len()];
    let mut p = base;
    for &v in src.iter().take(n) {
        out[p] = v;
        for d in (0..src_shape.len()).rev() {
            idx[d] += 1;
            p += os[d];
            if idx[d] < src_shape[d] {
                break;
            }
            p -= os[d] * src_shape[d];
            idx[d] = 0;
        }
    }
    Ok(out)
}
