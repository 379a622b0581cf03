//! The CPU backend: [`CpuStorage`], host data of one dtype. Each op's CPU reference lives in its
//! folder (`ops/<op>/cpu.rs`) as plain loops over slices, written to be read; every CUDA kernel
//! is tested against them.

use crate::{DType, Error, Result};
use half::{bf16, f16};

/// Keeps the buffers a training step frees in the process heap, so that the next step reuses
/// them instead of asking the kernel for fresh pages and faulting each one in again.
///
/// glibc returns freed memory at the top of its heap to the kernel once it exceeds the trim
/// threshold, and serves large requests from `mmap`; both thresholds move with the program's
/// frees, and a step's peak-then-release pattern keeps tripping them, so every step pays page
/// faults for memory it had just given back (`docs/gpt-mini.md` measures it). This sets the
/// `mmap` threshold to glibc's largest (32 MiB) and the trim threshold to 1 GiB, once per
/// process, as a caching allocator would; the process then holds on to up to 1 GiB of freed
/// heap. A process started with glibc's own `MALLOC_MMAP_THRESHOLD_` or
/// `MALLOC_TRIM_THRESHOLD_` keeps what it asked for.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let set = |name| std::env::var_os(name).is_some();
            if set("MALLOC_MMAP_THRESHOLD_") || set("MALLOC_TRIM_THRESHOLD_") {
                return;
            }
            // SAFETY: mallopt only changes the allocator's tuning parameters; it is called
            // once, before the buffers it concerns are allocated.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
            }
        });
    }
}

/// An empty vector with room for `n` elements, or [`Error::OutOfMemory`] naming `op` and the
/// bytes asked when the host cannot provide them (where `Vec::with_capacity` would abort).
pub(crate) fn try_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    keep_freed_memory();
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        op,
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
    })?;
    Ok(v)
}

/// `n` copies of `value`, or [`Error::OutOfMemory`] (see [`try_vec`]).
pub(crate) fn try_filled<T: Clone>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = try_vec(op, n)?;
    v.resize(n, value);
    Ok(v)
}

/// Host data, one variant per dtype.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f16` elements.
    F16(Vec<f16>),
    /// `bf16` elements.
    BF16(Vec<bf16>),
}

impl CpuStorage {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            CpuStorage::F32(v) => v.len(),
            CpuStorage::I64(v) => v.len(),
            CpuStorage::F16(v) => v.len(),
            CpuStorage::BF16(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The f32 data, or a dtype error naming `op`.
    pub(crate) fn f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            CpuStorage::F32(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op,
                expected: DType::F32,
                got: s.dtype(),
            }),
        }
    }

    /// The data of a float storage as f32: borrowed for f32, widened (exactly) for f16 and bf16;
    /// a dtype error naming `op` for i64. The 16-bit kernels of the CPU compute in f32 on it and
    /// round their result once with [`CpuStorage::from_f32_vec`].
    pub(crate) fn f32_widened(&self, op: &'static str) -> Result<std::borrow::Cow<'_, [f32]>> {
        match self {
            CpuStorage::F32(v) => Ok(std::borrow::Cow::Borrowed(v)),
            CpuStorage::F16(_) | CpuStorage::BF16(_) => {
                Ok(std::borrow::Cow::Owned(self.to_f32_vec()))
            }
            s => Err(Error::DTypeMismatch {
                op,
                expected: DType::F32,
                got: s.dtype(),
            }),
        }
    }

    /// The f32 data to write in place, or a dtype error naming `op`.
    pub(crate) fn f32_mut(&mut self, op: &'static str) -> Result<&mut [f32]> {
        match self {
            CpuStorage::F32(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op,
                expected: DType::F32,
                got: s.dtype(),
            }),
        }
    }

    /// The i64 data, or a dtype error naming `op`.
    pub(crate) fn i64(&self, op: &'static str) -> Result<&[i64]> {
        match self {
            CpuStorage::I64(v) => Ok(v),
            s => Err(Error::DTypeMismatch {
                op,
                expected: DType::I64,
                got: s.dtype(),
            }),
        }
    }

    /// Every element widened to f32 (exact for f32, f16 and bf16; i64 rounds to the nearest
    /// f32).
    pub(crate) fn to_f32_vec(&self) -> Vec<f32> {
        match self {
            CpuStorage::F32(v) => v.clone(),
            CpuStorage::I64(v) => v.iter().map(|&x| x as f32).collect(),
            CpuStorage::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            CpuStorage::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
        }
    }

    /// f32 values converted to `dtype`: rounded to nearest, ties to even, for f16 and bf16,
    /// truncated toward zero for i64 (NaN gives 0, as CUDA's conversion); f32 is a move.
    pub(crate) fn from_f32_vec(v: Vec<f32>, dtype: DType) -> CpuStorage {
        match dtype {
            DType::F32 => CpuStorage::F32(v),
            DType::I64 => CpuStorage::I64(v.iter().map(|&x| x as i64).collect()),
            DType::F16 => CpuStorage::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            DType::BF16 => CpuStorage::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        }
    }
}
