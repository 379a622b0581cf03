//! Shape ops. `reshape` of a contiguous tensor, `permute`, `transpose`, `narrow`, `split`,
//! `chunk`, `squeeze`, `unsqueeze` and `broadcast_to`/`expand` are views: they share the
//! storage under a new [`Layout`](crate::layout::Layout) and launch nothing. `contiguous` copies
//! a view into a dense tensor (only when it is not one already); `cat`, `stack` and `pad` write
//! new tensors. Every copy here is one primitive of `ShapeKernels` (`cpu.rs`, `cuda.rs`).

use super::same_device;
use crate::layout::checked_numel;
use crate::shape::{normalize_dim, numel};
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The data-movement primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait ShapeKernels: Sized {
    /// `out[i] = self[offset + Σ_d idx_d · strides[d]]` for every multi-index of `shape`
    /// (a view made dense).
    fn copy_strided(&self, shape: &[usize], strides: &[usize], offset: usize) -> Result<Self>;
    /// `parts[i]` is `[outer, widths[i]]`; the result `[outer, Σ widths]` holds them side by
    /// side in each row.
    fn cat(parts: &[&Self], outer: usize, widths: &[usize]) -> Result<Self>;
    /// Constant padding of a `shape` tensor by `before[d]`/`after[d]` elements per dim.
    fn pad(&self, shape: &[usize], before: &[usize], after: &[usize], value: f32) -> Result<Self>;
    /// Conversion between any two dtypes through f32: exact widening, round-to-nearest-even
    /// narrowing, truncation toward zero into i64.
    fn cast(&self, dtype: DType) -> Result<Self>;
}

impl Storage {
    /// [`ShapeKernels::copy_strided`] on this storage's device.
    pub(crate) fn copy_strided(
        &self,
        shape: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Storage> {
        dispatch!("copy_strided"; x = self => x.copy_strided(shape, strides, offset))
    }

    /// [`ShapeKernels::cat`] on the parts' device.
    pub(crate) fn cat(parts: &[&Storage], outer: usize, widths: &[usize]) -> Result<Storage> {
        let first = parts.first().ok_or_else(|| Error::InvalidArgument {
            op: "cat",
            msg: "no tensors to join".into(),
        })?;
        for p in parts {
            crate::storage::same_device("cat", first, p)?;
            if p.dtype() != first.dtype() {
                return Err(Error::DTypeMismatch {
                    op: "cat",
                    expected: first.dtype(),
                    got: p.dtype(),
                });
            }
        }
        match first {
            Storage::Cpu(_) => {
                let c: Vec<_> = parts.iter().filter_map(|p| p.as_cpu()).collect();
                Ok(Storage::Cpu(ShapeKernels::cat(&c, outer, widths)?))
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => {
                let c: Vec<_> = parts.iter().filter_map(|p| p.as_cuda()).collect();
                Ok(Storage::Cuda(ShapeKernels::cat(&c, outer, widths)?))
            }
        }
    }

    /// [`ShapeKernels::pad`] on this storage's device.
    pub(crate) fn pad(
        &self,
        shape: &[usize],
        before: &[usize],
        after: &[usize],
        value: f32,
    ) -> Result<Storage> {
        dispatch!("pad"; x = self => x.pad(shape, before, after, value))
    }

    /// [`ShapeKernels::cast`] on this storage's device.
    pub(crate) fn cast(&self, dtype: DType) -> Result<Storage> {
        dispatch!("to_dtype"; x = self => x.cast(dtype))
    }
}

impl Tensor {
    /// Same elements, new shape with the same number of elements (PyTorch `reshape`). A view
    /// when this tensor is contiguous; otherwise a contiguous copy first.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if checked_numel("reshape", shape)? != self.numel() {
            return Err(Error::ShapeMismatch {
                op: "reshape",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
                expected: "the same number of elements".into(),
            });
        }
        let src = self.contiguous()?;
        let layout = src
            .layout()
            .reshape(shape)
            .expect("a contiguous layout reshapes without a copy");
        let old = self.shape().to_vec();
        Ok(src.view_output(layout, "reshape", move |g| Ok(vec![Some(g.reshape(&old)?)])))
    }

    /// Collapse dims `start_dim..` into one (`flatten(1)` turns `[B, C, H, W]` into `[B, C·H·W]`).
    pub fn flatten(&self, start_dim: usize) -> Result<Tensor> {
        if start_dim >= self.rank().max(1) {
            return Err(Error::InvalidArgument {
                op: "flatten",
                msg: format!(
                    "start_dim {start_dim} out of range for shape {:?}",
                    self.shape()
                ),
            });
        }
        let mut s = self.shape()[..start_dim].to_vec();
        s.push(numel(&self.shape()[start_dim..]));
        self.reshape(&s)
    }

    /// This tensor with its elements in row-major order in a storage of their own (PyTorch
    /// `contiguous`): itself when it already is, otherwise one strided copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let s = self.storage()?;
        let s = match s {
            crate::tensor::StorageRef::Copied(s) => s,
            crate::tensor::StorageRef::Shared(g) => g.to_device(self.device())?,
        };
        Ok(Tensor::from_op(
            s,
            self.shape().to_vec(),
            "contiguous",
            &[self],
            |g| Ok(vec![Some(g.clone())]),
        ))
    }

    /// Reorder the dimensions: output dim `i` is input dim `perm[i]` (a view).
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let r = self.rank();
        let mut seen = vec![false; r];
        if perm.len() != r
            || perm
                .iter()
                .any(|&p| p >= r || std::mem::replace(&mut seen[p], true))
        {
            return Err(Error::InvalidArgument {
                op: "permute",
                msg: format!(
                    "{perm:?} is not a permutation of the dims of shape {:?}",
                    self.shape()
                ),
            });
        }
        let mut inv = vec![0; r];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        Ok(
            self.view_output(self.layout().permute(perm), "permute", move |g| {
                Ok(vec![Some(g.permute(&inv)?)])
            }),
        )
    }

    /// Swap two dimensions (negative indices count from the end); a view.
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Tensor> {
        let a = normalize_dim("transpose", d0, self.rank())?;
        let b = normalize_dim("transpose", d1, self.rank())?;
        if self.rank() == 0 {
            return Ok(self.clone());
        }
        Ok(
            self.view_output(self.layout().transpose(a, b), "transpose", move |g| {
                Ok(vec![Some(g.transpose(a as isize, b as isize)?)])
            }),
        )
    }

    /// The slice `start..start+len` of dimension `dim` (a view).
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        let end = start.checked_add(len);
        if dim >= self.rank() || !matches!(end, Some(e) if e <= self.shape()[dim]) {
            return Err(Error::InvalidArgument {
                op: "narrow",
                msg: format!(
                    "dim {dim}, range {start}..{} out of bounds for shape {:?}",
                    start.saturating_add(len),
                    self.shape()
                ),
            });
        }
        let full = self.shape()[dim];
        let rank = self.rank();
        Ok(
            self.view_output(self.layout().narrow(dim, start, len), "narrow", move |g| {
                let mut pads = vec![(0, 0); rank];
                pads[dim] = (start, full - start - len);
                Ok(vec![Some(g.pad(&pads, 0.0)?)])
            }),
        )
    }

    /// Views of consecutive slices of `size` along `dim` (the last may be shorter), as
    /// PyTorch's `split(size, dim)`.
    pub fn split(&self, size: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = normalize_dim("split", dim, self.rank())?;
        let n = self.shape().get(d).copied().unwrap_or(1);
        if size == 0 {
            return Err(Error::InvalidArgument {
                op: "split",
                msg: format!(
                    "a slice size of 0 along dim {dim} of shape {:?}",
                    self.shape()
                ),
            });
        }
        let sizes: Vec<usize> = (0..n)
            .step_by(size)
            .map(|start| size.min(n - start))
            .collect();
        self.split_sizes(&sizes, dim)
    }

    /// Views of consecutive slices with the given sizes along `dim`; the sizes must add up to
    /// the dim's size.
    pub fn split_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
        let d = normalize_dim("split", dim, self.rank())?;
        let total = sizes.iter().try_fold(0usize, |a, &b| a.checked_add(b));
        if self.rank() == 0 || total != Some(self.shape()[d]) {
            return Err(Error::InvalidArgument {
                op: "split",
                msg: format!(
                    "sizes {sizes:?} do not add up to dim {dim} of shape {:?}",
                    self.shape()
                ),
            });
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let t = self.narrow(d, start, len);
                start += len;
                t
            })
            .collect()
    }

    /// `chunks` views of (nearly) equal size along `dim`, as PyTorch's `chunk`: each of
    /// `ceil(n / chunks)` elements but the last; fewer chunks when the dim is short.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = normalize_dim("chunk", dim, self.rank())?;
        if chunks == 0 {
            return Err(Error::InvalidArgument {
                op: "chunk",
                msg: "0 chunks".into(),
            });
        }
        let n = self.shape().get(d).copied().unwrap_or(1);
        self.split(n.div_ceil(chunks).max(1), dim)
    }

    /// A new dimension of size 1 at `dim` (`-rank-1 ..= rank`; negative counts from the end);
    /// a view.
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let r = self.rank() as isize;
        let d = if dim < 0 { dim + r + 1 } else { dim };
        if d < 0 || d > r {
            return Err(Error::InvalidArgument {
                op: "unsqueeze",
                msg: format!("dim {dim} out of range for shape {:?}", self.shape()),
            });
        }
        let d = d as usize;
        Ok(
            self.view_output(self.layout().unsqueeze(d), "unsqueeze", move |g| {
                Ok(vec![Some(g.squeeze(d as isize)?)])
            }),
        )
    }

    /// Dimension `dim`, which must have size 1, removed; a view.
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let d = normalize_dim("squeeze", dim, self.rank())?;
        if self.rank() == 0 || self.shape()[d] != 1 {
            return Err(Error::InvalidArgument {
                op: "squeeze",
                msg: format!("dim {dim} of shape {:?} is not of size 1", self.shape()),
            });
        }
        Ok(
            self.view_output(self.layout().squeeze(d), "squeeze", move |g| {
                Ok(vec![Some(g.unsqueeze(d as isize)?)])
            }),
        )
    }

    /// Repeat this tensor along broadcast dimensions to `shape` (NumPy rules) without copying:
    /// stretched dims get stride 0 (PyTorch `expand`).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        checked_numel("broadcast_to", shape)?;
        let b = crate::shape::broadcast_shape("broadcast_to", self.shape(), shape)?;
        if b != shape {
            return Err(Error::ShapeMismatch {
                op: "broadcast_to",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
                expected: "a source that broadcasts to the target".into(),
            });
        }
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let src = self.shape().to_vec();
        Ok(self.view_output(
            self.layout().broadcast_to(shape),
            "broadcast_to",
            move |g| Ok(vec![Some(g.sum_to(&src)?)]),
        ))
    }

    /// Same as [`Tensor::broadcast_to`] (PyTorch's name).
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        self.broadcast_to(shape)
    }

    /// Join tensors of equal shape but along `dim` into one (PyTorch `torch.cat`).
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(Error::InvalidArgument {
                op: "cat",
                msg: "no tensors to join".into(),
            });
        };
        let d = normalize_dim("cat", dim, first.rank())?;
        if first.rank() == 0 {
            return Err(Error::BadShape {
                op: "cat",
                shape: vec![],
                expected: "tensors of rank ≥ 1".into(),
            });
        }
        for t in tensors {
            same_device("cat", first, t)?;
            let fits = t.rank() == first.rank()
                && (0..t.rank()).all(|i| i == d || t.shape()[i] == first.shape()[i]);
            if !fits {
                return Err(Error::ShapeMismatch {
                    op: "cat",
                    lhs: first.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                    expected: format!("equal shapes except along dim {d}"),
                });
            }
            if t.dtype() != first.dtype() {
                return Err(Error::DTypeMismatch {
                    op: "cat",
                    expected: first.dtype(),
                    got: t.dtype(),
                });
            }
        }
        let outer = numel(&first.shape()[..d]);
        let inner = numel(&first.shape()[d + 1..]);
        let widths: Vec<usize> = tensors.iter().map(|t| t.shape()[d] * inner).collect();
        let parts = tensors
            .iter()
            .map(|t| t.storage())
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Storage> = parts.iter().map(|p| &**p).collect();
        let s = Storage::cat(&refs, outer, &widths)?;
        drop(parts);
        let mut shape = first.shape().to_vec();
        shape[d] = tensors
            .iter()
            .try_fold(0usize, |a, t| a.checked_add(t.shape()[d]))
            .ok_or_else(|| Error::BadShape {
                op: "cat",
                shape: first.shape().to_vec(),
                expected: format!("sizes along dim {d} whose sum fits in usize"),
            })?;
        checked_numel("cat", &shape)?;
        let sizes: Vec<usize> = tensors.iter().map(|t| t.shape()[d]).collect();
        Ok(Tensor::from_op(s, shape, "cat", tensors, move |g| {
            Ok(g.split_sizes(&sizes, d as isize)?
                .into_iter()
                .map(Some)
                .collect())
        }))
    }

    /// Join tensors of one shape along a new dimension `dim` (PyTorch `torch.stack`).
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(Error::InvalidArgument {
                op: "stack",
                msg: "no tensors to join".into(),
            });
        };
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(Error::ShapeMismatch {
                    op: "stack",
                    lhs: first.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                    expected: "tensors of one shape".into(),
                });
            }
        }
        let r = first.rank() as isize;
        let d = if dim < 0 { dim + r + 1 } else { dim };
        if d < 0 || d > r {
            return Err(Error::InvalidArgument {
                op: "stack",
                msg: format!("dim {dim} out of range for shape {:?}", first.shape()),
            });
        }
        let views = tensors
            .iter()
            .map(|t| t.unsqueeze(d))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = views.iter().collect();
        Tensor::cat(&refs, d)
    }

    /// Pad with a constant: `pads[d] = (before, after)` for every dim. Any float dtype; `value`
    /// rounds once to a 16-bit one.
    pub fn pad(&self, pads: &[(usize, usize)], value: f32) -> Result<Tensor> {
        crate::ops::expect_float("pad", self)?;
        if pads.len() != self.rank() {
            return Err(Error::InvalidArgument {
                op: "pad",
                msg: format!(
                    "{} (before, after) pairs for shape {:?}; expected one per dim",
                    pads.len(),
                    self.shape()
                ),
            });
        }
        let before: Vec<usize> = pads.iter().map(|p| p.0).collect();
        let after: Vec<usize> = pads.iter().map(|p| p.1).collect();
        let shape = (0..self.rank())
            .map(|d| {
                self.shape()[d]
                    .checked_add(before[d])
                    .and_then(|n| n.checked_add(after[d]))
            })
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| Error::InvalidArgument {
                op: "pad",
                msg: format!("pads {pads:?} overflow shape {:?}", self.shape()),
            })?;
        checked_numel("pad", &shape)?;
        let s = self.storage()?.pad(self.shape(), &before, &after, value)?;
        let in_shape = self.shape().to_vec();
        Ok(Tensor::from_op(s, shape, "pad", &[self], move |g| {
            let mut t = g.clone();
            for (d, (&b, &n)) in before.iter().zip(&in_shape).enumerate() {
                t = t.narrow(d, b, n)?;
            }
            Ok(vec![Some(t)])
        }))
    }
}
