//! Indexing: `select` (one index of a dim, the dim removed) and `index_select` (the given indices
//! of a dim, in order). Both are built from existing ops, so they run on every device and have a
//! backward without device code of their own: `select` is `narrow` + `squeeze` (a view),
//! `index_select` moves `dim` to the front and gathers rows with the embedding lookup, whose
//! backward adds each output row's gradient into the row it came from.

use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// The slice at `index` of dimension `dim`, with that dimension removed (a view; PyTorch's
    /// `x.select(dim, index)` or `x[:, index]`).
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1., 2., 3., 4., 5., 6.], &[2, 3], Device::Cpu)?;
    /// assert_eq!(x.select(1, 2)?.to_vec()?, vec![3., 6.]);
    /// assert!(x.select(0, 2).is_err());
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn select(&self, dim: usize, index: usize) -> Result<Tensor> {
        let size = self.dim_size("select", dim)?;
        if index >= size {
            return Err(Error::IndexOutOfRange {
                op: "select",
                index: i64::try_from(index).unwrap_or(i64::MAX),
                size,
            });
        }
        self.narrow(dim, index, 1)?.squeeze(dim as isize)
    }

    /// The entries of dimension `dim` at the i64 `indices` (1-D), in their order (PyTorch's
    /// `torch.index_select`); the result has `indices.len()` entries along `dim`. An index
    /// outside `0..size` is an error. f32 tensors; differentiable (repeated indices add their
    /// gradients).
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![1., 2., 3., 4., 5., 6.], &[2, 3], Device::Cpu)?;
    /// let i = Tensor::from_vec_i64(vec![2, 0, 2], &[3], Device::Cpu)?;
    /// assert_eq!(x.index_select(1, &i)?.to_vec()?, vec![3., 1., 3., 6., 4., 6.]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn index_select(&self, dim: usize, indices: &Tensor) -> Result<Tensor> {
        let size = self.dim_size("index_select", dim)?;
        if indices.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op: "index_select",
                expected: DType::I64,
                got: indices.dtype(),
            });
        }
        if indices.rank() != 1 {
            return Err(Error::BadShape {
                op: "index_select",
                shape: indices.shape().to_vec(),
                expected: "1-D indices".into(),
            });
        }
        if self.dtype() != DType::F32 {
            return Err(Error::DTypeMismatch {
                op: "index_select",
                expected: DType::F32,
                got: self.dtype(),
            });
        }
        // `dim` first, the other dims flattened into rows of a [size, rest] table.
        let front = if dim == 0 {
            self.clone()
        } else {
            self.transpose(0, dim as isize)?
        };
        let rest_shape = front.shape()[1..].to_vec();
        let rest = crate::layout::checked_numel("index_select", &rest_shape)?;
        let table = front.reshape(&[size, rest])?;
        let picked = table.embedding(indices)?; // [m, rest]
        let mut shape = vec![indices.shape()[0]];
        shape.extend_from_slice(&rest_shape);
        let out = picked.reshape(&shape)?;
        if dim == 0 {
            Ok(out)
        } else {
            out.transpose(0, dim as isize)
        }
    }

    /// The size of `dim`, or an error naming `op` when `dim` is not a dimension.
    fn dim_size(&self, op: &'static str, dim: usize) -> Result<usize> {
        self.shape()
            .get(dim)
            .copied()
            .ok_or_else(|| Error::IndexOutOfRange {
                op,
                index: i64::try_from(dim).unwrap_or(i64::MAX),
                size: self.rank(),
            })
    }
}
