//! The CUDA backend's storage, [`CudaStorage`], and what every op's `cuda.rs` shares: outputs
//! allocated from the device's caching allocator, transfers, and the deferred index errors. Each
//! op (`ops/<op>/cuda.rs`) queues camel-cuda's kernels on the device's stream; nothing copies to
//! the host except `download`, the explicit host read.
//!
//! Index errors (an embedding index or a cross-entropy target out of range) are found by the
//! kernels, which never dereference a bad index: they record it in a small per-device slot, and
//! the next host read (`item()`, `to_vec()`, ...) returns [`Error::IndexOutOfRange`]. Like CUDA's
//! own errors, they surface at the next synchronization, not at the launch. Slots are kept per
//! device *and per host thread*, so the error is reported to the thread that launched the kernel.
//!
//! With `CAMEL_POISON` on ([`crate::config`]) every new output is filled with NaN before its
//! kernel runs, so an element a kernel forgot to write shows up in tests.

use super::cpu::CpuStorage;
pub use super::ladder::{embedding_bwd_grouped, Family, EMBEDDING_SORTED_MIN};
use crate::config;
use crate::{DType, Device, Error, Result};
use camel_cuda::kernels as k;
use camel_cuda::{Buffer, CudaDevice, DevPtr};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A tensor's data in device memory.
#[derive(Debug)]
pub struct CudaStorage {
    pub(crate) buf: Buffer,
    pub(crate) dev: Arc<CudaDevice>,
    pub(crate) dtype: DType,
    pub(crate) len: usize,
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

/// A new uninitialized (or poisoned) output of `len` elements.
pub(crate) fn alloc(dev: &Arc<CudaDevice>, len: usize, dtype: DType) -> Result<CudaStorage> {
    let bytes = len
        .checked_mul(dtype.size())
        .ok_or(crate::Error::OutOfMemory {
            op: "cuda alloc",
            bytes: len as u128 * dtype.size() as u128,
        })?;
    let buf = dev.alloc(bytes)?;
    if config::poison() && len > 0 {
        match dtype {
            // a quiet NaN in every element
            DType::F16 => k::shape::fill_b16(dev, buf.ptr(), len, 0x7e00)?,
            DType::BF16 => k::shape::fill_b16(dev, buf.ptr(), len, 0x7fc0)?,
            DType::F32 | DType::I64 => {
                k::elementwise::fill_f32(dev, buf.ptr(), len * dtype.size() / 4, f32::NAN)?
            }
        }
    }
    Ok(CudaStorage {
        buf,
        dev: dev.clone(),
        dtype,
        len,
    })
}

/// A new output of `len` elements on `s`'s device.
pub(crate) fn like(s: &CudaStorage, len: usize, dtype: DType) -> Result<CudaStorage> {
    alloc(&s.dev, len, dtype)
}

/// camel-cuda's name for the element type `dtype` (kernel-name suffixes).
pub(crate) fn elem(dtype: DType) -> k::shape::Elem {
    match dtype {
        DType::F32 => k::shape::Elem::F32,
        DType::I64 => k::shape::Elem::I64,
        DType::F16 => k::shape::Elem::F16,
        DType::BF16 => k::shape::Elem::BF16,
    }
}

/// Error unless `s` holds `dtype`.
pub(crate) fn expect(op: &'static str, s: &CudaStorage, dtype: DType) -> Result<()> {
    if s.dtype != dtype {
        return Err(Error::DTypeMismatch {
            op,
            expected: dtype,
            got: s.dtype,
        });
    }
    Ok(())
}

/// Error naming `op` unless `s` holds floats (f32, f16 or bf16).
pub(crate) fn expect_float(op: &'static str, s: &CudaStorage) -> Result<()> {
    if !s.dtype.is_float() {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::F32,
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
pub(crate) fn err_slot(dev: &Arc<CudaDevice>) -> Result<DevPtr> {
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
    if v[1] == 4 {
        // a multinomial row that cannot be sampled: index = the row, size = the reason
        let msg = if v[3] == 2 {
            "has fewer positive weights than the samples asked without replacement"
        } else {
            "holds a weight that is negative, NaN or infinite, or does not sum to a positive \
             finite number"
        };
        return Err(Error::InvalidArgument {
            op: "multinomial",
            msg: format!("row {} of the weights {msg}", v[2]),
        });
    }
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
        CpuStorage::F16(v) => (dev.htod(v)?, DType::F16, v.len()),
        CpuStorage::BF16(v) => (dev.htod(v)?, DType::BF16, v.len()),
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
        DType::F16 => CpuStorage::F16(s.dev.dtoh_vec(&s.buf, s.len)?),
        DType::BF16 => CpuStorage::BF16(s.dev.dtoh_vec(&s.buf, s.len)?),
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

// ------------------------------------------------------------------ memory-bound ladders
// (which step each family runs: `backend::ladder`, re-exported above)
