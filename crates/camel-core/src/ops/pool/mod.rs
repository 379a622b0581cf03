//! 2-D pooling over NCHW tensors: max pooling (PyTorch's `F.max_pool2d`), average pooling
//! (`F.avg_pool2d`) and global average pooling to 1×1 (`F.adaptive_avg_pool2d(x, 1)`), forward
//! and backward on every device.
//!
//! Max pooling saves the argmax of each window (i64, the offset `iy·W + ix` in the input
//! plane, as PyTorch's indices), so the backward routes each gradient to its window's maximum.
//! Its rules, the same on every device: padding is never the maximum; on ties the **first**
//! maximum in row-major window order wins (so of two equal values in one window only the
//! upper-left one receives the gradient); a NaN wins over any number, and the first NaN of a
//! window over later ones (the output is NaN, as in PyTorch).
//!
//! Windows: `OH = ⌊(H + 2·pad − k) / stride⌋ + 1`; padding may be at most half the window (as
//! PyTorch requires), so every window holds at least one input element.
//!
//! f16 and bf16 inputs pool in their dtype: each element widens to f32 as it is read, the pooling
//! runs in f32 and each output rounds once. A maximum rounds back to itself, so 16-bit max
//! pooling is exact; an average, and a gradient where windows overlap, sums in f32.

use super::expect_float;
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};
pub use camel_cuda::kernels::pool::PoolGeom;

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The pooling primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait PoolKernels: Sized {
    /// Max pooling: the maxima (f32) and their offsets in the input plane (i64).
    fn max_pool2d(&self, g: &PoolGeom) -> Result<(Self, Self)>;
    /// Backward of max pooling from the upstream gradient `self` and the saved offsets.
    fn max_pool2d_bwd(&self, idx: &Self, g: &PoolGeom) -> Result<Self>;
    /// Average pooling.
    fn avg_pool2d(&self, g: &PoolGeom, count_include_pad: bool) -> Result<Self>;
    /// Backward of average pooling from the upstream gradient `self`.
    fn avg_pool2d_bwd(&self, g: &PoolGeom, count_include_pad: bool) -> Result<Self>;
}

impl Storage {
    /// [`PoolKernels::max_pool2d`] on this storage's device.
    pub(crate) fn max_pool2d(&self, g: &PoolGeom) -> Result<(Storage, Storage)> {
        dispatch!("max_pool2d"; x = self => x.max_pool2d(g))
    }

    /// [`PoolKernels::max_pool2d_bwd`] on the operands' device.
    pub(crate) fn max_pool2d_bwd(&self, idx: &Storage, g: &PoolGeom) -> Result<Storage> {
        dispatch!("max_pool2d backward"; dy = self, idx = idx => dy.max_pool2d_bwd(idx, g))
    }

    /// [`PoolKernels::avg_pool2d`] on this storage's device.
    pub(crate) fn avg_pool2d(&self, g: &PoolGeom, cip: bool) -> Result<Storage> {
        dispatch!("avg_pool2d"; x = self => x.avg_pool2d(g, cip))
    }

    /// [`PoolKernels::avg_pool2d_bwd`] on this storage's device.
    pub(crate) fn avg_pool2d_bwd(&self, g: &PoolGeom, cip: bool) -> Result<Storage> {
        dispatch!("avg_pool2d backward"; dy = self => dy.avg_pool2d_bwd(g, cip))
    }
}

/// The geometry of pooling `x` `[N, C, H, W]` with `kernel`, `stride` and `padding`, or a typed
/// error naming `op`, the shape and what was expected.
pub fn pool_geom(
    op: &'static str,
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
) -> Result<PoolGeom> {
    expect_float(op, x)?;
    let bad = |expected: String| Error::BadShape {
        op,
        shape: x.shape().to_vec(),
        expected,
    };
    if x.rank() != 4 {
        return Err(bad("a 4-D input [N, C, H, W]".into()));
    }
    let arg = |msg: String| Error::InvalidArgument { op, msg };
    if kernel.0 == 0 || kernel.1 == 0 {
        return Err(arg(format!("kernel size must be ≥ 1, got {kernel:?}")));
    }
    if stride.0 == 0 || stride.1 == 0 {
        return Err(arg(format!("stride must be ≥ 1, got {stride:?}")));
    }
    if padding.0 > kernel.0 / 2 || padding.1 > kernel.1 / 2 {
        return Err(arg(format!(
            "padding {padding:?} must be at most half the kernel size {kernel:?}"
        )));
    }
    let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let len = |i: usize, k: usize, s: usize, p: usize| {
        i.checked_add(2 * p)?.checked_sub(k).map(|r| r / s + 1)
    };
    let (Some(oh), Some(ow)) = (
        len(h, kernel.0, stride.0, padding.0),
        len(w, kernel.1, stride.1, padding.1),
    ) else {
        return Err(bad(format!(
            "a padded input ({}×{} with padding {padding:?}) at least as large as the window {}×{}",
            h.saturating_add(2 * padding.0),
            w.saturating_add(2 * padding.1),
            kernel.0,
            kernel.1
        )));
    };
    Ok(PoolGeom {
        n,
        c,
        h,
        w,
        kh: kernel.0,
        kw: kernel.1,
        sh: stride.0,
        sw: stride.1,
        ph: padding.0,
        pw: padding.1,
        oh,
        ow,
    })
}

impl Tensor {
    /// Max pooling of `self` `[N, C, H, W]` over `kernel` windows every `stride` with `padding`
    /// (at most half the window): `[N, C, OH, OW]`. PyTorch's `F.max_pool2d(x, kernel, stride,
    /// padding)`. Ties and NaN: see the module documentation (the first maximum wins; NaN wins).
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Result<Tensor> {
        Ok(self.max_pool2d_with_indices(kernel, stride, padding)?.0)
    }

    /// [`Tensor::max_pool2d`] and the i64 offsets `iy·W + ix` of each window's maximum in its
    /// input plane (PyTorch's `return_indices=True`).
    pub fn max_pool2d_with_indices(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Result<(Tensor, Tensor)> {
        let g = pool_geom("max_pool2d", self, kernel, stride, padding)?;
        let (y, idx) = self.storage()?.max_pool2d(&g)?;
        let shape = vec![g.n, g.c, g.oh, g.ow];
        let idx = Tensor::from_storage(idx, shape.clone());
        debug_assert_eq!(idx.dtype(), DType::I64);
        let saved = idx.clone();
        let in_shape = self.shape().to_vec();
        let y = Tensor::from_op(y, shape, "max_pool2d", &[self], move |dy| {
            let s = dy.storage()?.max_pool2d_bwd(&*saved.storage()?, &g)?;
            Ok(vec![Some(Tensor::from_storage(s, in_shape.clone()))])
        });
        Ok((y, idx))
    }

    /// Average pooling of `self` `[N, C, H, W]`: each window's sum divided by the window's size
    /// (`count_include_pad`, PyTorch's default) or by the input elements it covers. PyTorch's
    /// `F.avg_pool2d(x, kernel, stride, padding, count_include_pad=...)`.
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let g = pool_geom("avg_pool2d", self, kernel, stride, padding)?;
        let y = self.storage()?.avg_pool2d(&g, count_include_pad)?;
        let in_shape = self.shape().to_vec();
        Ok(Tensor::from_op(
            y,
            vec![g.n, g.c, g.oh, g.ow],
            "avg_pool2d",
            &[self],
            move |dy| {
                let s = dy.storage()?.avg_pool2d_bwd(&g, count_include_pad)?;
                Ok(vec![Some(Tensor::from_storage(s, in_shape.clone()))])
            },
        ))
    }

    /// Global average pooling: the mean of each `[H, W]` plane of `self` `[N, C, H, W]`, as
    /// `[N, C, 1, 1]` (PyTorch's `F.adaptive_avg_pool2d(x, 1)`). Built on the reduction ops, so
    /// it runs and differentiates on every device.
    pub fn adaptive_avg_pool2d_1x1(&self) -> Result<Tensor> {
        expect_float("adaptive_avg_pool2d", self)?;
        if self.rank() != 4 {
            return Err(Error::BadShape {
                op: "adaptive_avg_pool2d",
                shape: self.shape().to_vec(),
                expected: "a 4-D input [N, C, H, W]".into(),
            });
        }
        let (n, c, h, w) = (
            self.shape()[0],
            self.shape()[1],
            self.shape()[2],
            self.shape()[3],
        );
        if h == 0 || w == 0 {
            return Err(Error::BadShape {
                op: "adaptive_avg_pool2d",
                shape: self.shape().to_vec(),
                expected: "a non-empty [H, W] plane to average".into(),
            });
        }
        self.reshape(&[n, c, h * w])?
            .mean_dim(2, false)?
            .reshape(&[n, c, 1, 1])
    }
}
