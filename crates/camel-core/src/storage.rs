//! `Storage`: a tensor's data on one device. Every primitive is a method here that matches on the
//! device and calls the CPU reference (`backend::cpu`) or the CUDA launchers (`backend::cuda`).
//! Operands on different devices are an error, never a silent copy.

use crate::backend::cpu::{self, MatmulSpec};
#[cfg(feature = "cuda")]
use crate::backend::cuda::{self, CudaStorage};
use crate::backend::{BinaryOp, ReduceOp, UnaryOp, UpdateRule};
use crate::{DType, Device, Error, Result};

/// Host data, one variant per dtype.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A tensor's data on one device.
#[derive(Debug)]
pub enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

fn dtype_err(op: &'static str, expected: DType, got: DType) -> Error {
    Error::DTypeMismatch { op, expected, got }
}

impl Storage {
    /// Device this storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(CpuStorage::F32(v)) => v.len(),
            Storage::Cpu(CpuStorage::I64(v)) => v.len(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(CpuStorage::F32(_)) => DType::F32,
            Storage::Cpu(CpuStorage::I64(_)) => DType::I64,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.dtype(),
        }
    }

    /// Upload host data to `device`.
    pub fn from_cpu(data: CpuStorage, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Storage::Cuda(cuda::upload(i, &data)?)),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Err(Error::DeviceUnavailable {
                device,
                reason: "camel was built without the `cuda` feature".into(),
            }),
        }
    }

    /// Copy to host memory (synchronizes with the device).
    pub fn to_cpu(&self) -> Result<CpuStorage> {
        match self {
            Storage::Cpu(s) => Ok(s.clone()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => cuda::download(s),
        }
    }

    /// Copy to `device` (a clone when it is already there).
    pub fn to_device(&self, device: Device) -> Result<Storage> {
        match (self, device) {
            (Storage::Cpu(s), _) => Storage::from_cpu(s.clone(), device),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(s), Device::Cuda(i)) if s.ordinal() == i => {
                Ok(Storage::Cuda(cuda::clone(s)?))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(s), _) => Storage::from_cpu(cuda::download(s)?, device),
        }
    }

    /// A storage of `n` copies of `value`.
    pub fn full(n: usize, value: f32, device: Device) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuStorage::F32(vec![value; n]))),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Storage::Cuda(cuda::full(i, n, value)?)),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Storage::from_cpu(CpuStorage::F32(vec![]), device),
        }
    }

    fn cpu_f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            Storage::Cpu(CpuStorage::F32(v)) => Ok(v),
            Storage::Cpu(CpuStorage::I64(_)) => Err(dtype_err(op, DType::F32, DType::I64)),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => unreachable!("cpu_f32 on a CUDA storage"),
        }
    }

    fn cpu_i64(&self, op: &'static str) -> Result<&[i64]> {
        match self {
            Storage::Cpu(CpuStorage::I64(v)) => Ok(v),
            Storage::Cpu(CpuStorage::F32(_)) => Err(dtype_err(op, DType::I64, DType::F32)),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => unreachable!("cpu_i64 on a CUDA storage"),
        }
    }

    fn same_device(&self, op: &'static str, other: &Storage) -> Result<()> {
        if self.device() != other.device() {
            return Err(Error::DeviceMismatch {
                op,
                lhs: self.device(),
                rhs: other.device(),
            });
        }
        Ok(())
    }

    /// Elementwise `f(x)`.
    pub fn unary(&self, op: UnaryOp) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(CpuStorage::F32(cpu::unary(
                self.cpu_f32("unary")?,
                op,
            )))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::unary(s, op)?)),
        }
    }

    /// Elementwise `a ∘ b` broadcast to `out_shape`.
    pub fn binary(
        &self,
        rhs: &Storage,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Storage> {
        self.same_device("binary", rhs)?;
        match (self, rhs) {
            (Storage::Cpu(_), Storage::Cpu(_)) => Ok(Storage::Cpu(CpuStorage::F32(cpu::binary(
                self.cpu_f32("binary")?,
                a_shape,
                rhs.cpu_f32("binary")?,
                b_shape,
                out_shape,
                op,
            )))),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(cuda::binary(
                a, b, a_shape, b_shape, out_shape, op,
            )?)),
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Reduce `[outer, dim, inner]` along the middle axis.
    pub fn reduce(&self, outer: usize, dim: usize, inner: usize, op: ReduceOp) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(CpuStorage::F32(cpu::reduce(
                self.cpu_f32("reduce")?,
                outer,
                dim,
                inner,
                op,
            )))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::reduce(s, outer, dim, inner, op)?)),
        }
    }

    /// Row-wise argmax of `[rows, cols]` → i64 `[rows]`.
    pub fn argmax_last(&self, rows: usize, cols: usize) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(CpuStorage::I64(cpu::argmax_last(
                self.cpu_f32("argmax")?,
                rows,
                cols,
            )))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::argmax_last(s, rows, cols)?)),
        }
    }

    /// Batched matrix product.
    pub fn matmul(&self, rhs: &Storage, spec: &MatmulSpec) -> Result<Storage> {
        self.same_device("matmul", rhs)?;
        match (self, rhs) {
            (Storage::Cpu(_), Storage::Cpu(_)) => Ok(Storage::Cpu(CpuStorage::F32(cpu::matmul(
                self.cpu_f32("matmul")?,
                rhs.cpu_f32("matmul")?,
                spec,
            )))),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(cuda::matmul(a, b, spec)?)),
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// `act(x · wᵀ + bias)` with `x` `[rows, inp]`, `w` `[out, inp]`, plus the pre-activation
    /// when the activation is GELU.
    pub fn linear(
        &self,
        w: &Storage,
        bias: Option<&Storage>,
        dims: (usize, usize, usize),
        act: crate::backend::Activation,
    ) -> Result<(Storage, Option<Storage>)> {
        self.same_device("linear", w)?;
        if let Some(b) = bias {
            self.same_device("linear", b)?;
        }
        match self {
            Storage::Cpu(_) => {
                let b = match bias {
                    Some(b) => Some(b.cpu_f32("linear")?),
                    None => None,
                };
                let (y, z) =
                    cpu::linear(self.cpu_f32("linear")?, w.cpu_f32("linear")?, b, dims, act);
                Ok((
                    Storage::Cpu(CpuStorage::F32(y)),
                    z.map(|z| Storage::Cpu(CpuStorage::F32(z))),
                ))
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda(x) => {
                let (Storage::Cuda(w), b) = (w, bias) else {
                    unreachable!("devices checked above")
                };
                let b = match b {
                    Some(Storage::Cuda(b)) => Some(b),
                    Some(_) => unreachable!("devices checked above"),
                    None => None,
                };
                let (y, z) = cuda::linear(x, w, b, dims, act)?;
                Ok((Storage::Cuda(y), z.map(Storage::Cuda)))
            }
        }
    }

    /// Softmax or log-softmax of each row.
    pub fn softmax_last(&self, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(CpuStorage::F32(cpu::softmax_last(
                self.cpu_f32("softmax")?,
                rows,
                cols,
                log,
            )))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::softmax_last(s, rows, cols, log)?)),
        }
    }

    /// Per-row cross-entropy of logits `[rows, cols]` against i64 targets `[rows]`.
    pub fn cross_entropy_fwd(&self, t: &Storage, rows: usize, cols: usize) -> Result<Storage> {
        self.same_device("cross_entropy", t)?;
        match (self, t) {
            (Storage::Cpu(_), Storage::Cpu(_)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::cross_entropy_fwd(
                    self.cpu_f32("cross_entropy")?,
                    t.cpu_i64("cross_entropy")?,
                    rows,
                    cols,
                )?)))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t)) => {
                Ok(Storage::Cuda(cuda::cross_entropy_fwd(x, t, rows, cols)?))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Gradient of per-row cross-entropy given the per-row upstream gradient `g`.
    pub fn cross_entropy_bwd(
        &self,
        t: &Storage,
        g: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<Storage> {
        self.same_device("cross_entropy backward", t)?;
        self.same_device("cross_entropy backward", g)?;
        match (self, t, g) {
            (Storage::Cpu(_), Storage::Cpu(_), Storage::Cpu(_)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::cross_entropy_bwd(
                    self.cpu_f32("cross_entropy")?,
                    t.cpu_i64("cross_entropy")?,
                    g.cpu_f32("cross_entropy")?,
                    rows,
                    cols,
                )?)))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t), Storage::Cuda(g)) => {
                Ok(Storage::Cuda(cuda::cross_entropy_bwd(x, t, g, rows, cols)?))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Strided gather (permute / slice / expand) into a new contiguous storage.
    pub fn copy_strided(
        &self,
        shape: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Storage> {
        match self {
            Storage::Cpu(CpuStorage::F32(v)) => Ok(Storage::Cpu(CpuStorage::F32(
                cpu::copy_strided(v, shape, strides, offset),
            ))),
            Storage::Cpu(CpuStorage::I64(v)) => Ok(Storage::Cpu(CpuStorage::I64(
                cpu::copy_strided(v, shape, strides, offset),
            ))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::copy_strided(
                s, shape, strides, offset,
            )?)),
        }
    }

    /// `parts[i]` is `[outer, widths[i]]`; the result is `[outer, Σ widths]` with the parts side
    /// by side in each row (the data movement of `cat`). All parts on one device, of one dtype.
    pub fn cat(parts: &[&Storage], outer: usize, widths: &[usize]) -> Result<Storage> {
        let first = parts.first().ok_or_else(|| Error::InvalidArgument {
            op: "cat",
            msg: "no tensors to join".into(),
        })?;
        for p in parts {
            first.same_device("cat", p)?;
            if p.dtype() != first.dtype() {
                return Err(dtype_err("cat", first.dtype(), p.dtype()));
            }
        }
        fn rows<T: Copy>(parts: &[&[T]], outer: usize, widths: &[usize]) -> Vec<T> {
            let mut out = Vec::with_capacity(outer * widths.iter().sum::<usize>());
            for o in 0..outer {
                for (p, &w) in parts.iter().zip(widths) {
                    out.extend_from_slice(&p[o * w..(o + 1) * w]);
                }
            }
            out
        }
        match first {
            Storage::Cpu(CpuStorage::F32(_)) => {
                let v = parts
                    .iter()
                    .map(|p| p.cpu_f32("cat"))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Storage::Cpu(CpuStorage::F32(rows(&v, outer, widths))))
            }
            Storage::Cpu(CpuStorage::I64(_)) => {
                let v = parts
                    .iter()
                    .map(|p| p.cpu_i64("cat"))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Storage::Cpu(CpuStorage::I64(rows(&v, outer, widths))))
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => {
                let c: Vec<&CudaStorage> = parts
                    .iter()
                    .map(|p| match p {
                        Storage::Cuda(c) => c,
                        _ => unreachable!("devices checked above"),
                    })
                    .collect();
                Ok(Storage::Cuda(cuda::cat(&c, outer, widths)?))
            }
        }
    }

    /// Constant padding.
    pub fn pad(
        &self,
        shape: &[usize],
        before: &[usize],
        after: &[usize],
        value: f32,
    ) -> Result<Storage> {
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(CpuStorage::F32(cpu::pad(
                self.cpu_f32("pad")?,
                shape,
                before,
                after,
                value,
            )))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::pad(s, shape, before, after, value)?)),
        }
    }

    /// Embedding lookup: rows of the `[v, d]` table picked by i64 `idx`.
    pub fn index_select_rows(&self, idx: &Storage, v: usize, d: usize) -> Result<Storage> {
        self.same_device("embedding", idx)?;
        match (self, idx) {
            (Storage::Cpu(_), Storage::Cpu(_)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::index_select_rows(
                    self.cpu_f32("embedding")?,
                    v,
                    d,
                    idx.cpu_i64("embedding")?,
                )?)))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(t), Storage::Cuda(i)) => {
                Ok(Storage::Cuda(cuda::index_select_rows(t, i, v, d)?))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Embedding backward: scatter-add rows of `self` (`[n, d]`) into a zero `[v, d]` table.
    pub fn index_add_rows(&self, idx: &Storage, v: usize, d: usize) -> Result<Storage> {
        self.same_device("embedding backward", idx)?;
        match (self, idx) {
            (Storage::Cpu(_), Storage::Cpu(_)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::index_add_rows(
                    self.cpu_f32("embedding backward")?,
                    idx.cpu_i64("embedding backward")?,
                    v,
                    d,
                )?)))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(g), Storage::Cuda(i)) => {
                Ok(Storage::Cuda(cuda::index_add_rows(g, i, v, d)?))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Convert between f32 and i64 (f32 → i64 truncates toward zero).
    pub fn cast(&self, dtype: DType) -> Result<Storage> {
        if self.dtype() == dtype {
            return self.to_device(self.device());
        }
        match self {
            Storage::Cpu(CpuStorage::F32(v)) => Ok(Storage::Cpu(CpuStorage::I64(
                v.iter().map(|&x| x as i64).collect(),
            ))),
            Storage::Cpu(CpuStorage::I64(v)) => Ok(Storage::Cpu(CpuStorage::F32(
                v.iter().map(|&x| x as f32).collect(),
            ))),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(Storage::Cuda(cuda::cast(s, dtype)?)),
        }
    }
}

/// One optimizer update in place: `p` and the `state` buffers are modified; `g` is read.
pub fn update(
    p: &mut Storage,
    g: &Storage,
    state: &mut [&mut Storage],
    rule: &UpdateRule,
) -> Result<()> {
    p.same_device("optimizer step", g)?;
    for s in state.iter() {
        p.same_device("optimizer step", s)?;
    }
    match p {
        Storage::Cpu(CpuStorage::F32(pv)) => {
            let gv = g.cpu_f32("optimizer step")?;
            let mut bufs: Vec<&mut [f32]> = Vec::with_capacity(state.len());
            for s in state.iter_mut() {
                match &mut **s {
                    Storage::Cpu(CpuStorage::F32(v)) => bufs.push(v.as_mut_slice()),
                    _ => return Err(dtype_err("optimizer step", DType::F32, DType::I64)),
                }
            }
            cpu::update(pv, gv, &mut bufs, rule);
            Ok(())
        }
        Storage::Cpu(CpuStorage::I64(_)) => {
            Err(dtype_err("optimizer step", DType::F32, DType::I64))
        }
        #[cfg(feature = "cuda")]
        Storage::Cuda(pc) => {
            let Storage::Cuda(gc) = g else {
                unreachable!("devices checked above")
            };
            let mut bufs: Vec<&CudaStorage> = Vec::with_capacity(state.len());
            for s in state.iter() {
                let Storage::Cuda(c) = &**s else {
                    unreachable!("devices checked above")
                };
                bufs.push(c);
            }
            cuda::update(pc, gc, &bufs, rule)
        }
    }
}

// ------------------------------------------------------------------ memory-bound ops (issue 4)

impl Storage {
    /// Backward of softmax / log-softmax (`log`) of each row, from the forward's output.
    pub fn softmax_last_bwd(
        &self,
        g: &Storage,
        rows: usize,
        cols: usize,
        log: bool,
    ) -> Result<Storage> {
        self.same_device("softmax backward", g)?;
        match (self, g) {
            (Storage::Cpu(_), Storage::Cpu(_)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::softmax_last_bwd(
                    self.cpu_f32("softmax backward")?,
                    g.cpu_f32("softmax backward")?,
                    rows,
                    cols,
                    log,
                ))))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(y), Storage::Cuda(g)) => Ok(Storage::Cuda(cuda::softmax_last_bwd(
                y, g, rows, cols, log,
            )?)),
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Per-row cross-entropy and the row statistics (max, Σ exp) its backward can reuse; `None`
    /// when the selected CUDA step does not save them.
    pub fn cross_entropy_fwd_stats(
        &self,
        t: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<(Storage, Option<Storage>)> {
        self.same_device("cross_entropy", t)?;
        match (self, t) {
            (Storage::Cpu(_), Storage::Cpu(_)) => {
                let (loss, stats) = cpu::cross_entropy_fwd_stats(
                    self.cpu_f32("cross_entropy")?,
                    t.cpu_i64("cross_entropy")?,
                    rows,
                    cols,
                )?;
                Ok((
                    Storage::Cpu(CpuStorage::F32(loss)),
                    Some(Storage::Cpu(CpuStorage::F32(stats))),
                ))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t)) => {
                let (loss, stats) = cuda::cross_entropy_fwd_stats(x, t, rows, cols)?;
                Ok((Storage::Cuda(loss), stats.map(Storage::Cuda)))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Gradient of the per-row cross-entropy, from the forward's statistics when it saved them.
    pub fn cross_entropy_bwd_stats(
        &self,
        t: &Storage,
        stats: Option<&Storage>,
        g: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<Storage> {
        self.same_device("cross_entropy backward", t)?;
        self.same_device("cross_entropy backward", g)?;
        match (self, t, g, stats) {
            (Storage::Cpu(_), Storage::Cpu(_), Storage::Cpu(_), Some(st)) => {
                Ok(Storage::Cpu(CpuStorage::F32(cpu::cross_entropy_bwd_stats(
                    self.cpu_f32("cross_entropy backward")?,
                    t.cpu_i64("cross_entropy backward")?,
                    st.cpu_f32("cross_entropy backward")?,
                    g.cpu_f32("cross_entropy backward")?,
                    rows,
                    cols,
                )?)))
            }
            (Storage::Cpu(_), Storage::Cpu(_), Storage::Cpu(_), None) => {
                self.cross_entropy_bwd(t, g, rows, cols)
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t), Storage::Cuda(g), st) => {
                let st = match st {
                    Some(Storage::Cuda(s)) => Some(s),
                    Some(_) => unreachable!("statistics live beside the logits"),
                    None => None,
                };
                Ok(Storage::Cuda(cuda::cross_entropy_bwd_stats(
                    x, t, st, g, rows, cols,
                )?))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// The mean cross-entropy over the rows in one kernel, with the row statistics its backward
    /// reads: `Some((mean, stats))` on CUDA at cross-entropy step 4; `None` on the CPU and at
    /// steps 1–3, where the op averages [`Storage::cross_entropy_fwd_stats`]'s per-row losses.
    pub fn cross_entropy_mean_fwd(
        &self,
        t: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<Option<(Storage, Storage)>> {
        self.same_device("cross_entropy", t)?;
        #[cfg(not(feature = "cuda"))]
        let _ = (rows, cols);
        match (self, t) {
            (Storage::Cpu(_), Storage::Cpu(_)) => Ok(None),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t)) => {
                Ok(cuda::cross_entropy_mean_fwd(x, t, rows, cols)?
                    .map(|(m, s)| (Storage::Cuda(m), Storage::Cuda(s))))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// Gradient of [`Storage::cross_entropy_mean_fwd`]'s mean (upstream gradient `g`, one
    /// element) with respect to the logits.
    pub fn cross_entropy_mean_bwd(
        &self,
        t: &Storage,
        stats: &Storage,
        g: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<Storage> {
        self.same_device("cross_entropy backward", t)?;
        self.same_device("cross_entropy backward", g)?;
        #[cfg(not(feature = "cuda"))]
        let _ = (rows, cols);
        match (self, t, stats, g) {
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(t), Storage::Cuda(st), Storage::Cuda(g)) => Ok(
                Storage::Cuda(cuda::cross_entropy_mean_bwd(x, t, st, g, rows, cols)?),
            ),
            _ => Err(Error::InvalidArgument {
                op: "cross_entropy backward",
                msg: "the fused mean's backward runs on CUDA only (its forward is CUDA only)"
                    .into(),
            }),
        }
    }

    /// LayerNorm of each row of `[rows, cols]` with `gamma`, `beta` of `[cols]`:
    /// `(y, mean, rstd)`.
    pub fn layer_norm_fwd(
        &self,
        gamma: &Storage,
        beta: &Storage,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<(Storage, Storage, Storage)> {
        self.same_device("layer_norm", gamma)?;
        self.same_device("layer_norm", beta)?;
        match (self, gamma, beta) {
            (Storage::Cpu(_), Storage::Cpu(_), Storage::Cpu(_)) => {
                let (y, m, r) = cpu::layer_norm_fwd(
                    self.cpu_f32("layer_norm")?,
                    gamma.cpu_f32("layer_norm")?,
                    beta.cpu_f32("layer_norm")?,
                    rows,
                    cols,
                    eps,
                );
                let f = |v| Storage::Cpu(CpuStorage::F32(v));
                Ok((f(y), f(m), f(r)))
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(x), Storage::Cuda(gm), Storage::Cuda(bt)) => {
                let (y, m, r) = cuda::layer_norm_fwd(x, gm, bt, rows, cols, eps)?;
                Ok((Storage::Cuda(y), Storage::Cuda(m), Storage::Cuda(r)))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }

    /// LayerNorm backward from the forward's `mean` and `rstd`: `(dx, dgamma, dbeta)`.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_norm_bwd(
        &self,
        gamma: &Storage,
        g: &Storage,
        mean: &Storage,
        rstd: &Storage,
        rows: usize,
        cols: usize,
    ) -> Result<(Storage, Storage, Storage)> {
        for o in [gamma, g, mean, rstd] {
            self.same_device("layer_norm backward", o)?;
        }
        match (self, gamma, g, mean, rstd) {
            (
                Storage::Cpu(_),
                Storage::Cpu(_),
                Storage::Cpu(_),
                Storage::Cpu(_),
                Storage::Cpu(_),
            ) => {
                let op = "layer_norm backward";
                let (dx, dg, db) = cpu::layer_norm_bwd(
                    self.cpu_f32(op)?,
                    gamma.cpu_f32(op)?,
                    g.cpu_f32(op)?,
                    mean.cpu_f32(op)?,
                    rstd.cpu_f32(op)?,
                    rows,
                    cols,
                );
                let f = |v| Storage::Cpu(CpuStorage::F32(v));
                Ok((f(dx), f(dg), f(db)))
            }
            #[cfg(feature = "cuda")]
            (
                Storage::Cuda(x),
                Storage::Cuda(gm),
                Storage::Cuda(g),
                Storage::Cuda(m),
                Storage::Cuda(r),
            ) => {
                let (dx, dg, db) = cuda::layer_norm_bwd(x, gm, g, m, r, rows, cols)?;
                Ok((Storage::Cuda(dx), Storage::Cuda(dg), Storage::Cuda(db)))
            }
            #[cfg(feature = "cuda")]
            _ => unreachable!("devices checked above"),
        }
    }
}

/// Optimizer updates of many parameters in place (`ps[i]`, its gradient `gs[i]`, its state
/// buffers `states[i]`, its rule `rules[i]`); all on one device. On a GPU, one kernel launch for
/// all of them (see [`cuda::update_multi`]); on the CPU, [`update`] for each.
pub fn update_multi(
    ps: &mut [&mut Storage],
    gs: &[&Storage],
    states: &mut [Vec<&mut Storage>],
    rules: &[UpdateRule],
) -> Result<()> {
    let Some(first) = ps.first() else {
        return Ok(());
    };
    let dev = first.device();
    for (i, p) in ps.iter().enumerate() {
        p.same_device("optimizer step", gs[i])?;
        if p.device() != dev {
            return Err(Error::DeviceMismatch {
                op: "optimizer step",
                lhs: dev,
                rhs: p.device(),
            });
        }
        for s in states[i].iter() {
            p.same_device("optimizer step", s)?;
        }
    }
    match dev {
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => {
            fn unwrap(s: &Storage) -> &CudaStorage {
                match s {
                    Storage::Cuda(c) => c,
                    _ => unreachable!("devices checked above"),
                }
            }
            let pc: Vec<&CudaStorage> = ps.iter().map(|p| unwrap(p)).collect();
            let gc: Vec<&CudaStorage> = gs.iter().map(|g| unwrap(g)).collect();
            let sc: Vec<Vec<&CudaStorage>> = states
                .iter()
                .map(|st| st.iter().map(|s| unwrap(s)).collect())
                .collect();
            cuda::update_multi(&pc, &gc, &sc, rules)
        }
        _ => {
            for (i, p) in ps.iter_mut().enumerate() {
                update(p, gs[i], &mut states[i], &rules[i])?;
            }
            Ok(())
        }
    }
}
