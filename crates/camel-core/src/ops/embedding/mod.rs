//! Embedding: rows of a `[vocab, dim]` table gathered by integer index, and the backward that
//! adds each upstream row into the row it came from (repeated indices accumulate). An index
//! outside the table is an error on both devices (on the GPU, reported at the next host read).
//! The table is f32, f16 or bf16; a 16-bit table's gradient sums the rows in f32 and rounds
//! once.

use super::{expect_float, same_device};
use crate::storage::{dispatch, Storage};
use crate::{DType, Error, Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

/// The embedding primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait EmbeddingKernels: Sized {
    /// `out[i, :] = table[idx[i], :]` for the `[v, d]` table `self` and i64 `idx`.
    fn index_select_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self>;
    /// `out[idx[i], :] += self[i, :]` into a zero `[v, d]` table.
    fn index_add_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self>;
}

impl Storage {
    /// [`EmbeddingKernels::index_select_rows`] on the operands' device.
    pub(crate) fn index_select_rows(&self, idx: &Storage, v: usize, d: usize) -> Result<Storage> {
        dispatch!("embedding"; t = self, i = idx => t.index_select_rows(i, v, d))
    }

    /// [`EmbeddingKernels::index_add_rows`] on the operands' device.
    pub(crate) fn index_add_rows(&self, idx: &Storage, v: usize, d: usize) -> Result<Storage> {
        dispatch!("embedding backward"; g = self, i = idx => g.index_add_rows(i, v, d))
    }
}

impl Tensor {
    /// Embedding lookup: rows of this `[vocab, dim]` table picked by the i64 tensor `idx`;
    /// the result has shape `idx.shape() + [dim]` and the table's dtype. An index outside
    /// `0..vocab` is an error.
    pub fn embedding(&self, idx: &Tensor) -> Result<Tensor> {
        expect_float("embedding", self)?;
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
        let s = self.storage()?.index_select_rows(&*idx.storage()?, v, d)?;
        let mut shape = idx.shape().to_vec();
        shape.push(d);
        let idx = idx.clone();
        Ok(Tensor::from_op(s, shape, "embedding", &[self], move |g| {
            let gs = g.storage()?.index_add_rows(&*idx.storage()?, v, d)?;
            Ok(vec![Some(Tensor::from_storage(gs, vec![v, d]))])
        }))
    }
}
