//! Shape ops. `reshape` is free (it shares the data); `permute`, `pad`, `narrow` and
//! `broadcast_to` materialize a new contiguous tensor through one strided-copy primitive.
//! `embedding` gathers rows of a table by integer index.

use super::{expect_f32, same_device};
use crate::shape::{broadcast_strides, contiguous_strides, numel};
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// Same data, new shape with the same number of elements. Free: no copy.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if numel(shape) != self.numel() {
            return Err(Error::ShapeMismatch {
                op: "reshape",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
                expected: "the same number of elements".into(),
            });
        }
        let old = self.shape().to_vec();
        Ok(Tensor::op_output(
            self.storage_arc().clone(),
            shape.to_vec(),
            "reshape",
            &[self],
            Box::new(move |g| Ok(vec![Some(g.reshape(&old)?)])),
        ))
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

    /// Reorder the dimensions: output dim `i` is input dim `perm[i]`.
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
        let src_strides = contiguous_strides(self.shape());
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape()[p]).collect();
        let strides: Vec<usize> = perm.iter().map(|&p| src_strides[p]).collect();
        let s = self.storage().copy_strided(&shape, &strides, 0)?;
        let mut inv = vec![0; r];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        Ok(Tensor::from_op(s, shape, "permute", &[self], move |g| {
            Ok(vec![Some(g.permute(&inv)?)])
        }))
    }

    /// Swap two dimensions (negative indices count from the end).
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Tensor> {
        let a = crate::shape::normalize_dim("transpose", d0, self.rank())?;
        let b = crate::shape::normalize_dim("transpose", d1, self.rank())?;
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Pad with a constant: `pads[d] = (before, after)` for every dim.
    pub fn pad(&self, pads: &[(usize, usize)], value: f32) -> Result<Tensor> {
        expect_f32("pad", self)?;
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
        let s = self.storage().pad(self.shape(), &before, &after, value)?;
        let shape: Vec<usize> = (0..self.rank())
            .map(|d| self.shape()[d] + before[d] + after[d])
            .collect();
        let in_shape = self.shape().to_vec();
        Ok(Tensor::from_op(s, shape, "pad", &[self], move |g| {
            let mut t = g.clone();
            for (d, (&b, &n)) in before.iter().zip(&in_shape).enumerate() {
                t = t.narrow(d, b, n)?;
            }
            Ok(vec![Some(t)])
        }))
    }

    /// The slice `start..start+len` of dimension `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        if dim >= self.rank() || start + len > self.shape()[dim] {
            return Err(Error::InvalidArgument {
                op: "narrow",
                msg: format!(
                    "dim {dim}, range {start}..{} out of bounds for shape {:?}",
                    start + len,
                    self.shape()
                ),
            });
        }
        let strides = contiguous_strides(self.shape());
        let mut shape = self.shape().to_vec();
        shape[dim] = len;
        let s = self
            .storage()
            .copy_strided(&shape, &strides, start * strides[dim])?;
        let full = self.shape()[dim];
        let rank = self.rank();
        Ok(Tensor::from_op(s, shape, "narrow", &[self], move |g| {
            let mut pads = vec![(0, 0); rank];
            pads[dim] = (start, full - start - len);
            Ok(vec![Some(g.pad(&pads, 0.0)?)])
        }))
    }

    /// Repeat this tensor along broadcast dimensions to `shape` (NumPy rules).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
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
        let strides = broadcast_strides(self.shape(), shape);
        let s = self.storage().copy_strided(shape, &strides, 0)?;
        let src = self.shape().to_vec();
        Ok(Tensor::from_op(
            s,
            shape.to_vec(),
            "broadcast_to",
            &[self],
            move |g| Ok(vec![Some(g.sum_to(&src)?)]),
        ))
    }

    /// Embedding lookup: rows of this `[vocab, dim]` table picked by the i64 tensor `idx`;
    /// the result has shape `idx.shape() + [dim]`. An index outside `0..vocab` is an error.
    pub fn embedding(&self, idx: &Tensor) -> Result<Tensor> {
        expect_f32("embedding", self)?;
        same_device("embedding", self, idx)?;
        if idx.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op: "embedding",
                expected: DType::I64,
                got: idx.dtype(),
            });
        }
        if self.rank() != 2 {
            return Err(Error::BadShape {
                op: "embedding",
                shape: self.shape().to_vec(),
                expected: "a [vocab, dim] table".into(),
            });
        }
        let (v, d) = (self.shape()[0], self.shape()[1]);
        let s = self.storage().index_select_rows(&idx.storage(), v, d)?;
        let mut shape = idx.shape().to_vec();
        shape.push(d);
        let idx = idx.clone();
        Ok(Tensor::from_op(s, shape, "embedding", &[self], move |g| {
            let gs = g.storage().index_add_rows(&idx.storage(), v, d)?;
            Ok(vec![Some(Tensor::from_storage(gs, vec![v, d]))])
        }))
    }
}
