//! The CUDA backend: each primitive allocates its output from the device's caching allocator
//! and queues one kernel (camel-cuda launchers) on the device's stream. Nothing here copies to
//! the host except `download`, which is the explicit host read.
//!
//! Index errors (an embedding index or a cross-entropy target out of range) are found by the
//! kernels, which never dereference a bad index: they record it in a small per-device slot, and
//! the next host read (`item()`, `to_vec()`, ...) returns [`Error::IndexOutOfRange`]. Like CUDA's
//! own errors, they surface at the next synchronization, not at the launch. Slots are kept per
//! device *and per host thread*, so the error is reported to the thread that launched the kernel.
//!
//! With `CAMEL_POISON` on ([`crate::config`]) every new output is filled with NaN before its
//! kernel runs, so an element a kernel forgot to write shows up in tests.

use super::cpu::MatmulSpec;
pub use super::ladder::{embedding_bwd_grouped, Family, EMBEDDING_SORTED_MIN};
use super::{BinaryOp, ReduceOp, UnaryOp, UpdateRule};
use crate::config::{self, step};
use crate::shape::broadcast_strides;
use crate::storage::CpuStorage;
use crate::{DType, Device, Error, Result};
use camel_cuda::kernels::{self as k, matmul::SgemmKernel};
use camel_cuda::{Buffer, CudaDevice, DevPtr};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A tensor's data in device memory.
#[derive(Debug)]
pub struct CudaStorage {
    buf: Buffer,
    dev: Arc<CudaDevice>,
    dtype: DType,
    len: usize,
}

impl CudaStorage {
    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal()
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Raw device pointer (for launchers and benchmarks).
    pub fn ptr(&self) -> DevPtr {
        self.buf.ptr()
    }
    /// The device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

/// The CUDA device with this ordinal, or a clear error when there is none.
pub fn device(ordinal: usize) -> Result<Arc<CudaDevice>> {
    camel_cuda::device(ordinal).map_err(|e| Error::DeviceUnavailable {
        device: Device::Cuda(ordinal),
        reason: e.to_string(),
    })
}

/// The SGEMM ladder step `matmul` runs on this thread ([`config::sgemm_kernel`]).
pub fn sgemm_kernel() -> SgemmKernel {
    config::sgemm_kernel()
}

/// A new uninitialized (or poisoned) output of `len` elements.
fn alloc(dev: &Arc<CudaDevice>, len: usize, dtype: DType) -> Result<CudaStorage> {
    let buf = dev.alloc(len * dtype.size())?;
    if config::poison() && len > 0 {
        k::elementwise::fill_f32(dev, buf.ptr(), len * dtype.size() / 4, f32::NAN)?;
    }
    Ok(CudaStorage {
        buf,
        dev: dev.clone(),
        dtype,
        len,
    })
}

fn like(s: &CudaStorage, len: usize, dtype: DType) -> Result<CudaStorage> {
    alloc(&s.dev, len, dtype)
}

fn expect(op: &'static str, s: &CudaStorage, dtype: DType) -> Result<()> {
    if s.dtype != dtype {
        return Err(Error::DTypeMismatch {
            op,
            expected: dtype,
            got: s.dtype,
        });
    }
    Ok(())
}

// ------------------------------------------------------------------ deferred index errors

struct ErrSlot {
    buf: Buffer,
    armed: AtomicBool,
}

type SlotKey = (usize, std::thread::ThreadId);

fn err_slots() -> &'static Mutex<HashMap<SlotKey, Arc<ErrSlot>>> {
    static S: OnceLock<Mutex<HashMap<SlotKey, Arc<ErrSlot>>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// This thread's index-error slot on the device, marked as possibly written (checked at the next host read).
fn err_slot(dev: &Arc<CudaDevice>) -> Result<DevPtr> {
    let mut map = err_slots().lock().expect("err slot lock");
    let key = (dev.ordinal(), std::thread::current().id());
    let slot = match map.get(&key) {
        Some(s) => s.clone(),
        None => {
            let buf = dev.alloc(4 * 8)?;
            dev.memset_zero(&buf)?;
            let s = Arc::new(ErrSlot {
                buf,
                armed: AtomicBool::new(false),
            });
            map.insert(key, s.clone());
            s
        }
    };
    slot.armed.store(true, Ordering::Release);
    Ok(slot.buf.ptr())
}

/// Return (and clear) an index error recorded by a kernel this thread launched since the last check.
pub fn check_index_errors(dev: &Arc<CudaDevice>) -> Result<()> {
    let key = (dev.ordinal(), std::thread::current().id());
    let slot = match err_slots().lock().expect("err slot lock").get(&key) {
        Some(s) => s.clone(),
        None => return Ok(()),
    };
    if !slot.armed.swap(false, Ordering::AcqRel) {
        return Ok(());
    }
    let v: Vec<i64> = dev.dtoh_vec(&slot.buf, 4)?;
    if v[0] == 0 {
        return Ok(());
    }
    dev.memset_zero(&slot.buf)?;
    let op = match v[1] {
        1 => "embedding",
        2 => "embedding backward",
        _ => "cross_entropy",
    };
    Err(Error::IndexOutOfRange {
        op,
        index: v[2],
        size: v[3] as usize,
    })
}

// ------------------------------------------------------------------ transfers

/// Upload host data to device `ordinal`.
pub fn upload(ordinal: usize, data: &CpuStorage) -> Result<CudaStorage> {
    let dev = device(ordinal)?;
    let (buf, dtype, len) = match data {
        CpuStorage::F32(v) => (dev.htod(v)?, DType::F32, v.len()),
        CpuStorage::I64(v) => (dev.htod(v)?, DType::I64, v.len()),
    };
    Ok(CudaStorage {
        buf,
        dev,
        dtype,
        len,
    })
}

/// Copy to the host (waits for the stream), then report any pending index error.
pub fn download(s: &CudaStorage) -> Result<CpuStorage> {
    let out = match s.dtype {
        DType::F32 => CpuStorage::F32(s.dev.dtoh_vec(&s.buf, s.len)?),
        DType::I64 => CpuStorage::I64(s.dev.dtoh_vec(&s.buf, s.len)?),
    };
    check_index_errors(&s.dev)?;
    Ok(out)
}

/// A device-side copy.
pub fn clone(s: &CudaStorage) -> Result<CudaStorage> {
    let out = like(s, s.len, s.dtype)?;
    s.dev.dtod(&s.buf, &out.buf, s.len * s.dtype.size())?;
    Ok(out)
}

/// `n` copies of `value`.
pub fn full(ordinal: usize, n: usize, value: f32) -> Result<CudaStorage> {
    let dev = device(ordinal)?;
    let out = alloc(&dev, n, DType::F32)?;
    k::elementwise::fill_f32(&dev, out.ptr(), n, value)?;
    Ok(out)
}

// ------------------------------------------------------------------ compute

/// Elementwise `f(x)`.
pub fn unary(x: &CudaStorage, op: UnaryOp) -> Result<CudaStorage> {
    expect("unary", x, DType::F32)?;
    let out = like(x, x.len, DType::F32)?;
    let (code, s) = op.code();
    let unary = k::elementwise::at(step(Family::Elementwise)).unary;
    unary(&x.dev, x.ptr(), out.ptr(), x.len, code, s)?;
    Ok(out)
}

/// Elementwise `a ∘ b`, broadcasting.
pub fn binary(
    a: &CudaStorage,
    b: &CudaStorage,
    a_shape: &[usize],
    b_shape: &[usize],
    out_shape: &[usize],
    op: BinaryOp,
) -> Result<CudaStorage> {
    expect("binary", a, DType::F32)?;
    expect("binary", b, DType::F32)?;
    let n: usize = out_shape.iter().product();
    let out = like(a, n, DType::F32)?;
    if a_shape == b_shape {
        let binary = k::elementwise::at(step(Family::Elementwise)).binary;
        binary(&a.dev, a.ptr(), b.ptr(), out.ptr(), n, op.code())?;
    } else if op == BinaryOp::GeluBwd {
        return Err(Error::ShapeMismatch {
            op: "gelu backward",
            lhs: a_shape.to_vec(),
            rhs: b_shape.to_vec(),
            expected: "equal shapes".into(),
        });
    } else {
        let sa = broadcast_strides(a_shape, out_shape);
        let sb = broadcast_strides(b_shape, out_shape);
        k::elementwise::binary_bcast_f32(
            &a.dev,
            a.ptr(),
            b.ptr(),
            out.ptr(),
            out_shape,
            &sa,
            &sb,
            op.code(),
        )?;
    }
    Ok(out)
}

/// Reduce `[outer, dim, inner]` along the middle axis.
pub fn reduce(
    x: &CudaStorage,
    outer: usize,
    dim: usize,
    inner: usize,
    op: ReduceOp,
) -> Result<CudaStorage> {
    expect("reduce", x, DType::F32)?;
    let out = like(x, outer * inner, DType::F32)?;
    let reduce = k::reduce::at(step(Family::Reduce)).reduce;
    reduce(&x.dev, x.ptr(), out.ptr(), outer, dim, inner, op.code())?;
    Ok(out)
}

/// Row-wise argmax → i64.
pub fn argmax_last(x: &CudaStorage, rows: usize, cols: usize) -> Result<CudaStorage> {
    expect("argmax", x, DType::F32)?;
    let out = like(x, rows, DType::I64)?;
    k::reduce::argmax_last_f32(&x.dev, x.ptr(), out.ptr(), rows, cols)?;
    Ok(out)
}

/// Batched SGEMM with the selected ladder step.
pub fn matmul(a: &CudaStorage, b: &CudaStorage, s: &MatmulSpec) -> Result<CudaStorage> {
    expect("matmul", a, DType::F32)?;
    expect("matmul", b, DType::F32)?;
    let out = like(a, s.batch * s.m * s.n, DType::F32)?;
    if s.k == 0 {
        k::elementwise::fill_f32(&a.dev, out.ptr(), out.len, 0.0)?;
        return Ok(out);
    }
    let g = k::matmul::Gemm {
        batch: s.batch,
        m: s.m,
        n: s.n,
        k: s.k,
        trans_a: s.trans_a,
        trans_b: s.trans_b,
        stride_a: s.stride_a,
        stride_b: s.stride_b,
    };
    k::matmul::sgemm(&a.dev, sgemm_kernel(), &g, a.ptr(), b.ptr(), out.ptr())?;
    Ok(out)
}

/// `act(x · wᵀ + bias)` in one GEMM with a fused epilogue (the pre-activation is saved too when
/// the activation is GELU).
pub fn linear(
    x: &CudaStorage,
    w: &CudaStorage,
    bias: Option<&CudaStorage>,
    (rows, inp, out): (usize, usize, usize),
    act: crate::backend::Activation,
) -> Result<(CudaStorage, Option<CudaStorage>)> {
    use crate::backend::Activation as A;
    use k::matmul::Activation as KA;
    expect("linear", x, DType::F32)?;
    expect("linear", w, DType::F32)?;
    if let Some(b) = bias {
        expect("linear", b, DType::F32)?;
    }
    let y = like(x, rows * out, DType::F32)?;
    let z = if act == A::Gelu {
        Some(like(x, rows * out, DType::F32)?)
    } else {
        None
    };
    let g = k::matmul::Gemm {
        batch: 1,
        m: rows,
        n: out,
        k: inp,
        trans_a: false,
        trans_b: true,
        stride_a: 0,
        stride_b: 0,
    };
    let epi = k::matmul::Epilogue {
        bias: bias.map(|b| b.ptr()),
        act: match act {
            A::Identity => KA::Identity,
            A::Relu => KA::Relu,
            A::Gelu => KA::Gelu,
        },
        pre_act: z.as_ref().map(|z| z.ptr()),
    };
    // k = 0 needs no special case: the kernels' K loop is empty and the epilogue still runs
    k::matmul::sgemm_epilogue(&x.dev, sgemm_kernel(), &g, x.ptr(), w.ptr(), y.ptr(), &epi)?;
    Ok((y, z))
}

/// Softmax / log-softmax per row.
pub fn softmax_last(x: &CudaStorage, rows: usize, cols: usize, log: bool) -> Result<CudaStorage> {
    expect("softmax", x, DType::F32)?;
    let out = like(x, rows * cols, DType::F32)?;
    let forward = k::softmax::at(step(Family::Softmax)).forward;
    forward(&x.dev, x.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}

/// Per-row cross-entropy.
pub fn cross_entropy_fwd(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    expect("cross_entropy", x, DType::F32)?;
    expect("cross_entropy", t, DType::I64)?;
    let out = like(x, rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    k::loss::block_per_row(&x.dev, x.ptr(), t.ptr(), out.ptr(), rows, cols, err)?;
    Ok(out)
}

/// Gradient of the per-row cross-entropy.
pub fn cross_entropy_bwd(
    x: &CudaStorage,
    t: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    expect("cross_entropy backward", t, DType::I64)?;
    let out = like(x, rows * cols, DType::F32)?;
    let err = err_slot(&x.dev)?;
    k::loss::block_per_row_bwd(
        &x.dev,
        x.ptr(),
        t.ptr(),
        g.ptr(),
        out.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(out)
}

/// Strided gather into a new contiguous buffer.
pub fn copy_strided(
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
pub fn cat(parts: &[&CudaStorage], outer: usize, widths: &[usize]) -> Result<CudaStorage> {
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

/// Constant padding.
pub fn pad(
    x: &CudaStorage,
    shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: f32,
) -> Result<CudaStorage> {
    expect("pad", x, DType::F32)?;
    let n: usize = (0..shape.len())
        .map(|d| shape[d] + before[d] + after[d])
        .product();
    let out = like(x, n, DType::F32)?;
    k::shape::pad_f32(&x.dev, x.ptr(), out.ptr(), shape, before, after, value)?;
    Ok(out)
}

/// Embedding lookup.
pub fn index_select_rows(
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
pub fn index_add_rows(
    g: &CudaStorage,
    idx: &CudaStorage,
    v: usize,
    d: usize,
) -> Result<CudaStorage> {
    expect("embedding backward", idx, DType::I64)?;
    let out = like(g, v * d, DType::F32)?;
    let err = err_slot(&g.dev)?;
    let n = idx.len;
    let st = step(Family::Embedding);
    let ks = k::embedding::at(st);
    if let Some(grouped) = ks.grouped.filter(|_| embedding_bwd_grouped(st, n * d)) {
        // writes every row itself: no zeroing pass
        grouped(&g.dev, g.ptr(), idx.ptr(), out.ptr(), n, v, d, err)?;
        return Ok(out);
    }
    g.dev.memset_zero(&out.buf)?;
    (ks.add)(&g.dev, g.ptr(), idx.ptr(), out.ptr(), n, v, d, err)?;
    Ok(out)
}

/// dtype conversion.
pub fn cast(x: &CudaStorage, dtype: DType) -> Result<CudaStorage> {
    let out = like(x, x.len, dtype)?;
    k::shape::cast(&x.dev, x.ptr(), out.ptr(), x.len, dtype == DType::I64)?;
    Ok(out)
}

/// One optimizer update in place.
pub fn update(
    p: &CudaStorage,
    g: &CudaStorage,
    state: &[&CudaStorage],
    rule: &UpdateRule,
) -> Result<()> {
    expect("optimizer step", p, DType::F32)?;
    expect("optimizer step", g, DType::F32)?;
    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        } => {
            let buf = if momentum != 0.0 {
                state[0].ptr()
            } else {
                DevPtr(0)
            };
            k::optim::sgd_f32(
                &p.dev,
                p.ptr(),
                g.ptr(),
                buf,
                p.len,
                lr,
                momentum,
                weight_decay,
            )
        }
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
        } => k::optim::adam_f32(
            &p.dev,
            p.ptr(),
            g.ptr(),
            state[0].ptr(),
            state[1].ptr(),
            p.len,
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
        ),
    }?;
    Ok(())
}

// ------------------------------------------------------------------ memory-bound ladders
// (which step each family runs: `backend::ladder`, re-exported above)

/// Backward of softmax / log-softmax from the forward's output `y`.
pub fn softmax_last_bwd(
    y: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<CudaStorage> {
    expect("softmax backward", y, DType::F32)?;
    expect("softmax backward", g, DType::F32)?;
    let out = like(y, rows * cols, DType::F32)?;
    let backward = k::softmax::at(step(Family::Softmax)).backward;
    backward(&y.dev, y.ptr(), g.ptr(), out.ptr(), rows, cols, log)?;
    Ok(out)
}

/// Per-row cross-entropy and, with steps 2 and 3, the row statistics (max, Σ exp) for the
/// backward.
pub fn cross_entropy_fwd_stats(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<(CudaStorage, Option<CudaStorage>)> {
    let Some((forward, _)) = k::loss::at(step(Family::CrossEntropy)).per_row else {
        return Ok((cross_entropy_fwd(x, t, rows, cols)?, None));
    };
    expect("cross_entropy", x, DType::F32)?;
    expect("cross_entropy", t, DType::I64)?;
    let loss = like(x, rows, DType::F32)?;
    let stats = like(x, 2 * rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    forward(
        &x.dev,
        x.ptr(),
        t.ptr(),
        loss.ptr(),
        stats.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok((loss, Some(stats)))
}

/// Gradient of the per-row cross-entropy; one pass over the logits when the forward saved
/// `stats`, else step 1 (which recomputes them).
pub fn cross_entropy_bwd_stats(
    x: &CudaStorage,
    t: &CudaStorage,
    stats: Option<&CudaStorage>,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    let Some(stats) = stats else {
        return cross_entropy_bwd(x, t, g, rows, cols);
    };
    expect("cross_entropy backward", t, DType::I64)?;
    let out = like(x, rows * cols, DType::F32)?;
    let err = err_slot(&x.dev)?;
    // the stats are the same (max, Σ exp) in steps 2 to 4; a forward at step 1 saves none
    let Some((_, backward)) = k::loss::at(step(Family::CrossEntropy)).per_row else {
        return cross_entropy_bwd(x, t, g, rows, cols);
    };
    backward(
        &x.dev,
        x.ptr(),
        t.ptr(),
        stats.ptr(),
        g.ptr(),
        out.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(out)
}

/// The mean cross-entropy over the rows in one kernel (step 4 of the family): `Some((mean,
/// stats))`, the mean a one-element buffer; `None` at steps 1–3, whose per-row kernels the op
/// follows with a mean, and when there are no classes (every target is then out of range, which
/// the per-row path reports).
pub fn cross_entropy_mean_fwd(
    x: &CudaStorage,
    t: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<Option<(CudaStorage, CudaStorage)>> {
    let Some((forward, _)) = k::loss::at(step(Family::CrossEntropy)).mean else {
        return Ok(None);
    };
    if rows == 0 || cols == 0 {
        return Ok(None);
    }
    expect("cross_entropy", x, DType::F32)?;
    expect("cross_entropy", t, DType::I64)?;
    let mean = like(x, 1, DType::F32)?;
    let stats = like(x, 2 * rows, DType::F32)?;
    let err = err_slot(&x.dev)?;
    forward(
        &x.dev,
        x.ptr(),
        t.ptr(),
        mean.ptr(),
        stats.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(Some((mean, stats)))
}

/// Gradient of [`cross_entropy_mean_fwd`]'s mean with respect to the logits, from its `stats`
/// and the one upstream gradient `g`; one kernel.
pub fn cross_entropy_mean_bwd(
    x: &CudaStorage,
    t: &CudaStorage,
    stats: &CudaStorage,
    g: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<CudaStorage> {
    expect("cross_entropy backward", t, DType::I64)?;
    expect("cross_entropy backward", g, DType::F32)?;
    let out = like(x, rows * cols, DType::F32)?;
    let err = err_slot(&x.dev)?;
    k::loss::fused_mean_bwd(
        &x.dev,
        x.ptr(),
        t.ptr(),
        stats.ptr(),
        g.ptr(),
        out.ptr(),
        rows,
        cols,
        err,
    )?;
    Ok(out)
}

/// LayerNorm forward: `(y, mean, rstd)`.
pub fn layer_norm_fwd(
    x: &CudaStorage,
    gamma: &CudaStorage,
    beta: &CudaStorage,
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(CudaStorage, CudaStorage, CudaStorage)> {
    for s in [x, gamma, beta] {
        expect("layer_norm", s, DType::F32)?;
    }
    let y = like(x, rows * cols, DType::F32)?;
    let mean = like(x, rows, DType::F32)?;
    let rstd = like(x, rows, DType::F32)?;
    let forward = k::layernorm::at(step(Family::LayerNorm)).forward;
    forward(
        &x.dev,
        x.ptr(),
        gamma.ptr(),
        beta.ptr(),
        y.ptr(),
        mean.ptr(),
        rstd.ptr(),
        rows,
        cols,
        eps,
    )?;
    Ok((y, mean, rstd))
}

/// LayerNorm backward: `(dx, dgamma, dbeta)`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd(
    x: &CudaStorage,
    gamma: &CudaStorage,
    g: &CudaStorage,
    mean: &CudaStorage,
    rstd: &CudaStorage,
    rows: usize,
    cols: usize,
) -> Result<(CudaStorage, CudaStorage, CudaStorage)> {
    expect("layer_norm backward", g, DType::F32)?;
    let dx = like(x, rows * cols, DType::F32)?;
    let dgamma = like(x, cols, DType::F32)?;
    let dbeta = like(x, cols, DType::F32)?;
    let backward = k::layernorm::at(step(Family::LayerNorm)).backward;
    backward(
        &x.dev,
        x.ptr(),
        gamma.ptr(),
        g.ptr(),
        mean.ptr(),
        rstd.ptr(),
        dx.ptr(),
        dgamma.ptr(),
        dbeta.ptr(),
        rows,
        cols,
    )?;
    Ok((dx, dgamma, dbeta))
}

/// Optimizer updates of many parameters. At a step with multi-tensor kernels (2 to 4, see
/// `k::optim::STEPS`), and when every rule is of one kind with the same hyper-parameters
/// (Adam's bias corrections may differ per tensor), one launch for all of them; otherwise one
/// [`update`] per tensor.
pub fn update_multi(
    ps: &[&CudaStorage],
    gs: &[&CudaStorage],
    states: &[Vec<&CudaStorage>],
    rules: &[UpdateRule],
) -> Result<()> {
    let per_tensor = || -> Result<()> {
        for i in 0..ps.len() {
            update(ps[i], gs[i], &states[i], &rules[i])?;
        }
        Ok(())
    };
    let Some(first) = rules.first() else {
        return Ok(());
    };
    let strip = |r: &UpdateRule| match *r {
        UpdateRule::Adam { .. } => {
            let mut r = *r;
            if let UpdateRule::Adam { bc1, bc2, .. } = &mut r {
                (*bc1, *bc2) = (1.0, 1.0);
            }
            r
        }
        sgd => sgd,
    };
    let uniform = rules.iter().all(|r| strip(r) == strip(first));
    let Some((sgd_multi, adam_multi)) = k::optim::at(step(Family::Optim)).multi else {
        return per_tensor();
    };
    if !uniform {
        return per_tensor();
    }
    for (p, g) in ps.iter().zip(gs) {
        expect("optimizer step", p, DType::F32)?;
        expect("optimizer step", g, DType::F32)?;
    }
    let dev = &ps[0].dev;
    let mut ts = Vec::with_capacity(ps.len());
    for i in 0..ps.len() {
        let (bc1, bc2) = match rules[i] {
            UpdateRule::Adam { bc1, bc2, .. } => (bc1, bc2),
            UpdateRule::Sgd { .. } => (1.0, 1.0),
        };
        let st = &states[i];
        ts.push(k::optim::MultiTensor {
            p: ps[i].ptr(),
            g: gs[i].ptr(),
            s1: st.first().map_or(DevPtr(0), |s| s.ptr()),
            s2: st.get(1).map_or(DevPtr(0), |s| s.ptr()),
            n: ps[i].len,
            bc1,
            bc2,
        });
    }
    match *first {
        UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        } => sgd_multi(dev, &ts, lr, momentum, weight_decay)?,
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            ..
        } => adam_multi(dev, &ts, lr, beta1, beta2, eps, weight_decay, decoupled)?,
    }
    Ok(())
}
