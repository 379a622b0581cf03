//! The embedding on the GPU: the embedding ladder (`kernels/embedding`). f16 and bf16 tables run
//! step 2's kernels, the one step with them: the gather moves the 16-bit values, the backward adds
//! the 16-bit rows into an f32 table that is rounded to the dtype once.

use super::EmbeddingKernels;
use crate::backend::cuda::{elem, err_slot, expect, like, CudaStorage, Family};
use crate::backend::ladder::Step;
use crate::config::step;
use crate::{DType, Error, Result};
use camel_cuda::kernels as k;

/// The step whose kernels a 16-bit table runs: step 2, unless a lower step is selected, which
/// has none (an error naming the dtype and the step).
fn half_step(op: &'static str, dtype: DType) -> Result<()> {
    if step(Family::Embedding) == Step::One {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "embedding step 1 has no {dtype} kernels; steps 2 and above run {dtype} tables \
                 on step 2's"
            ),
        });
    }
    Ok(())
}

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
    expect("embedding", idx, DType::I64)?;
    if table.dtype != DType::F32 {
        half_step("embedding", table.dtype)?;
    }
    let out = like(table, idx.len * d, table.dtype)?;
    let err = err_slot(&table.dev)?;
    if table.dtype != DType::F32 {
        let (t, i, o) = (table.ptr(), idx.ptr(), out.ptr());
        k::embedding::index_select_rows_warp_b16(&table.dev, t, i, o, idx.len, v, d, err)?;
        return Ok(out);
    }
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
    if g.dtype != DType::F32 {
        half_step("embedding backward", g.dtype)?;
    }
    let out = like(g, v * d, DType::F32)?;
    let err = err_slot(&g.dev)?;
    let n = idx.len;
    if g.dtype != DType::F32 {
        // the rows summed in f32, then rounded to the dtype once
        g.dev.memset_zero(&out.buf)?;
        let (gp, ip, op) = (g.ptr(), idx.ptr(), out.ptr());
        k::embedding::index_add_rows_warp_half(&g.dev, gp, ip, op, n, v, d, err, elem(g.dtype))?;
        let narrow = like(g, v * d, g.dtype)?;
        k::shape::cast(
            &g.dev,
            out.ptr(),
            narrow.ptr(),
            v * d,
            elem(DType::F32),
            elem(g.dtype),
        )?;
        return Ok(narrow);
    }
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
