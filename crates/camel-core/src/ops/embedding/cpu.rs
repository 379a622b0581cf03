//! The CPU reference of the embedding gather and scatter-add. An f16 or bf16 table's rows are
//! gathered as they are; its backward sums the rows in f32 and rounds to the dtype once.

use super::EmbeddingKernels;
use crate::backend::cpu::CpuStorage;
use crate::{DType, Error, Result};

impl EmbeddingKernels for CpuStorage {
    fn index_select_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        let op = "embedding";
        let idx = idx.i64(op)?;
        Ok(match self {
            CpuStorage::F16(t) => CpuStorage::F16(index_select_rows(t, v, d, idx)?),
            CpuStorage::BF16(t) => CpuStorage::BF16(index_select_rows(t, v, d, idx)?),
            _ => CpuStorage::F32(index_select_rows(self.f32(op)?, v, d, idx)?),
        })
    }

    fn index_add_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        let op = "embedding backward";
        let idx = idx.i64(op)?;
        if let dtype @ (DType::F16 | DType::BF16) = self.dtype() {
            let sum = index_add_rows(&self.to_f32_vec(), idx, v, d)?;
            return Ok(CpuStorage::from_f32_vec(sum, dtype));
        }
        Ok(CpuStorage::F32(index_add_rows(self.f32(op)?, idx, v, d)?))
    }
}

fn check_index(op: &'static str, i: i64, size: usize) -> Result<usize> {
    if i < 0 || i as usize >= size {
        return Err(Error::IndexOutOfRange { op, index: i, size });
    }
    Ok(i as usize)
}

/// Row gather (embedding lookup): `out[i, :] = table[idx[i], :]`, table `[v, d]`.
pub fn index_select_rows<T: Copy>(table: &[T], v: usize, d: usize, idx: &[i64]) -> Result<Vec<T>> {
    let mut out = crate::backend::cpu::try_vec("embedding", idx.len().saturating_mul(d))?;
    for &i in idx {
        let r = check_index("embedding", i, v)?;
        out.extend_from_slice(&table[r * d..(r + 1) * d]);
    }
    Ok(out)
}

/// Row scatter-add (embedding backward): `out[idx[i], :] += g[i, :]`, out `[v, d]` zeros first.
/// Repeated indices accumulate.
pub fn index_add_rows(g: &[f32], idx: &[i64], v: usize, d: usize) -> Result<Vec<f32>> {
    let mut out = crate::backend::cpu::try_filled("embedding backward", v * d, 0.0f32)?;
    for (k, &i) in idx.iter().enumerate() {
        let r = check_index("embedding backward", i, v)?;
        out[r * d..(r + 1) * d]
            .iter_mut()
            .zip(&g[k * d..(k + 1) * d])
            .for_each(|(o, &x)| *o += x);
    }
    Ok(out)
}
