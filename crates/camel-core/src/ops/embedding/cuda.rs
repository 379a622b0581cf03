//! The embedding on the GPU: the embedding ladder (`kernels/embedding`).

use super::EmbeddingKernels;
use crate::backend::cuda::{err_slot, expect, like, CudaStorage, Family};
use crate::config::step;
use crate::{DType, Result};
use camel_cuda::kernels as k;

impl EmbeddingKernels for CudaStorage {
    fn index_select_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        index_select_rows(self, idx, v, d)
    }

    fn index_add_rows(&self, idx: &Self, v: usize, d: usize) -> Result<Self> {
        index_add_rows(self, idx, v, d)
    }
}

/// Embedding lookup.
fn index_select_rows(
    table: &CudaStorage,
    idx: &CudaStorage,
    v: usize,
    d: usize,
) -> Result<CudaStorage> {
    expect("embedding", table, DType::F32)?;
    expect("embedding", idx, DType::I64)?;
    let out = like(table, idx.len * d, DType::F32)?;
    let err = err_slot(&table.dev)?;
    let select = k::embedding::at(step(Family::Embedding)).select;
    select(
        &table.dev,
        table.ptr(),
        idx.ptr(),
        out.ptr(),
        idx.len,
        v,
        d,
        err,
    )?;
    Ok(out)
}

/// Embedding backward (scatter-add into zeros).
fn index_add_rows(g: &CudaStorage, idx: &CudaStorage, v: usize, d: usize) -> Result<CudaStorage> {
    expect("embedding backward", idx, DType::I64)?;
    let out = like(g, v * d, DType::F32)?;
    let err = err_slot(&g.dev)?;
    let n = idx.len;
    let st = step(Family::Embedding);
    let ks = k::embedding::at(st);
    if let Some(grouped) = ks
        .grouped
        .filter(|_| crate::backend::ladder::embedding_bwd_grouped(st, n * d))
    {
        // writes every row itself: no zeroing pass
        grouped(&g.dev, g.ptr(), idx.ptr(), out.ptr(), n, v, d, err)?;
        return Ok(out);
    }
    g.dev.memset_zero(&out.buf)?;
    (ks.add)(&g.dev, g.ptr(), idx.ptr(), out.ptr(), n, v, d, err)?;
    Ok(out)
}
