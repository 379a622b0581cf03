//! The data-movement primitives on the GPU (`kernels/shape/copy.cu`).

use super::ShapeKernels;
use crate::backend::cuda::{elem, expect_float, like, CudaStorage};
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl ShapeKernels for CudaStorage {
    fn copy_strided(&self, shape: &[usize], strides: &[usize], offset: usize) -> Result<Self> {
        copy_strided(self, shape, strides, offset)
    }

    fn cat(parts: &[&Self], outer: usize, widths: &[usize]) -> Result<Self> {
        cat(parts, outer, widths)
    }

    fn pad(&self, shape: &[usize], before: &[usize], after: &[usize], value: f32) -> Result<Self> {
        pad(self, shape, before, after, value)
    }

    fn cast(&self, dtype: DType) -> Result<Self> {
        if self.dtype() == dtype {
            return crate::backend::cuda::clone(self);
        }
        cast(self, dtype)
    }
}

/// Strided gather into a new contiguous buffer.
fn copy_strided(
    x: &CudaStorage,
    shape: &[usize],
    strides: &[usize],
    offset: usize,
) -> Result<CudaStorage> {
    let n: usize = shape.iter().product();
    let out = like(x, n, x.dtype)?;
    k::shape::copy_strided(
        &x.dev,
        x.ptr(),
        out.ptr(),
        shape,
        strides,
        offset,
        x.dtype.size(),
    )?;
    Ok(out)
}

/// `[outer, Σ widths]` from parts of `[outer, widths[i]]`, side by side in each row: one strided
/// copy per part into its columns of the output.
fn cat(parts: &[&CudaStorage], outer: usize, widths: &[usize]) -> Result<CudaStorage> {
    let total: usize = widths.iter().sum();
    let first = parts[0];
    let out = like(first, outer * total, first.dtype)?;
    let mut col = 0;
    for (p, &w) in parts.iter().zip(widths) {
        k::shape::copy_strided_into(
            &first.dev,
            p.ptr(),
            &[outer, w],
            &[w, 1],
            0,
            out.ptr(),
            &[total, 1],
            col,
            first.dtype.size(),
        )?;
        col += w;
    }
    Ok(out)
}

/// Constant padding, in the input's float dtype (`value` rounds once to a 16-bit one).
fn pad(
    x: &CudaStorage,
    shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: f32,
) -> Result<CudaStorage> {
    expect_float("pad", x)?;
    let n: usize = (0..shape.len())
        .map(|d| shape[d] + before[d] + after[d])
        .product();
    let out = like(x, n, x.dtype)?;
    let (e, p) = (elem(x.dtype), x.ptr());
    k::shape::pad(&x.dev, e, p, out.ptr(), shape, before, after, value)?;
    Ok(out)
}

/// dtype conversion (`kernels/shape/copy.cu`, `cast_<from>_<to>`).
fn cast(x: &CudaStorage, dtype: DType) -> Result<CudaStorage> {
    let out = like(x, x.len, dtype)?;
    k::shape::cast(
        &x.dev,
        x.ptr(),
        out.ptr(),
        x.len,
        elem(x.dtype),
        elem(dtype),
    )?;
    Ok(out)
}
