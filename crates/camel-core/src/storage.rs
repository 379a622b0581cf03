//! `Storage`: a tensor's data on one device, `Cpu(CpuStorage)` or `Cuda(CudaStorage)`.
//!
//! Each op defines its primitives once, as a trait in its folder (`ops/softmax/mod.rs`:
//! `SoftmaxKernels`) that `CpuStorage` implements in the folder's `cpu.rs` and `CudaStorage` in
//! its `cuda.rs`. The [`dispatch!`] macro, written once here, turns a call on `Storage`s into the
//! call on the device's own storage type: it checks that the operands share a device (operands
//! on different devices are an error, never a silent copy), runs the same expression in the CPU
//! or the CUDA arm, and wraps the result back into `Storage`. An op's `Storage` method is one
//! line of it, beside the op.

use crate::backend::cpu;
pub use crate::backend::cpu::CpuStorage;
#[cfg(feature = "cuda")]
use crate::backend::cuda::{self, CudaStorage};
use crate::backend::UpdateRule;
use crate::{DType, Device, Error, Result};

/// A tensor's data on one device.
#[derive(Debug)]
pub enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

/// Error unless `a` and `b` are on one device.
pub(crate) fn same_device(op: &'static str, a: &Storage, b: &Storage) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    Ok(())
}

/// A device's own result wrapped back into [`Storage`]: a storage, or a tuple or option of them.
pub(crate) trait IntoStorage {
    type Out;
    fn into_storage(self) -> Self::Out;
}

impl IntoStorage for CpuStorage {
    type Out = Storage;
    fn into_storage(self) -> Storage {
        Storage::Cpu(self)
    }
}

#[cfg(feature = "cuda")]
impl IntoStorage for CudaStorage {
    type Out = Storage;
    fn into_storage(self) -> Storage {
        Storage::Cuda(self)
    }
}

impl<A: IntoStorage> IntoStorage for Option<A> {
    type Out = Option<A::Out>;
    fn into_storage(self) -> Self::Out {
        self.map(A::into_storage)
    }
}

impl<A: IntoStorage, B: IntoStorage> IntoStorage for (A, B) {
    type Out = (A::Out, B::Out);
    fn into_storage(self) -> Self::Out {
        (self.0.into_storage(), self.1.into_storage())
    }
}

impl<A: IntoStorage, B: IntoStorage, C: IntoStorage> IntoStorage for (A, B, C) {
    type Out = (A::Out, B::Out, C::Out);
    fn into_storage(self) -> Self::Out {
        (
            self.0.into_storage(),
            self.1.into_storage(),
            self.2.into_storage(),
        )
    }
}

/// `dispatch!(op; a = expr_a, b = expr_b => body)`: with `a`, `b`, … the `&Storage` operands
/// of `op` (its name, for errors), checks they share a device, rebinds each name to the device's
/// own storage (`&CpuStorage` or `&CudaStorage`), evaluates `body` (a `Result` of that device's
/// storage, or a tuple or option of them) and wraps it back into `Storage`.
macro_rules! dispatch {
    ($op:expr; $first:ident = $fe:expr $(, $v:ident = $e:expr)* => $body:expr) => {{
        let $first: &$crate::storage::Storage = $fe;
        $(
            let $v: &$crate::storage::Storage = $e;
            $crate::storage::same_device($op, $first, $v)?;
        )*
        #[allow(unreachable_patterns)]
        match ($first, $($v,)*) {
            ($crate::storage::Storage::Cpu($first), $($crate::storage::Storage::Cpu($v),)*) => {
                $body.map($crate::storage::IntoStorage::into_storage)
            }
            #[cfg(feature = "cuda")]
            ($crate::storage::Storage::Cuda($first), $($crate::storage::Storage::Cuda($v),)*) => {
                $body.map($crate::storage::IntoStorage::into_storage)
            }
            _ => unreachable!("devices checked above"),
        }
    }};
}
pub(crate) use dispatch;

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

    fn same_device(&self, op: &'static str, other: &Storage) -> Result<()> {
        same_device(op, self, other)
    }

    fn cpu_f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            Storage::Cpu(c) => c.f32(op),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => unreachable!("cpu_f32 on a CUDA storage"),
        }
    }

    fn cpu_i64(&self, op: &'static str) -> Result<&[i64]> {
        match self {
            Storage::Cpu(c) => c.i64(op),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => unreachable!("cpu_i64 on a CUDA storage"),
        }
    }

    /// The host data, when this storage is on the CPU.
    pub(crate) fn as_cpu(&self) -> Option<&CpuStorage> {
        match self {
            Storage::Cpu(c) => Some(c),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => None,
        }
    }

    /// The device data, when this storage is on a GPU.
    #[cfg(feature = "cuda")]
    pub(crate) fn as_cuda(&self) -> Option<&CudaStorage> {
        match self {
            Storage::Cuda(c) => Some(c),
            Storage::Cpu(_) => None,
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
