//! The CPU backend: [`CpuStorage`], host data of one dtype. Each op's CPU reference lives in its
//! folder (`ops/<op>/cpu.rs`) as plain loops over slices, written to be read; every CUDA kernel
//! is tested against them.

use crate::{DType, Error, Result};

/// An empty vector with room for `n` elements, or [`Error::OutOfMemory`] naming `op` and the
/// bytes asked when the host cannot provide them (where `Vec::with_capacity` would abort).
pub(crate) fn try_vec<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
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
}

impl CpuStorage {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::I64(_) => DType::I64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            CpuStorage::F32(v) => v.len(),
            CpuStorage::I64(v) => v.len(),
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
            CpuStorage::I64(_) => Err(Error::DTypeMismatch {
                op,
                expected: DType::F32,
                got: DType::I64,
            }),
        }
    }

    /// The i64 data, or a dtype error naming `op`.
    pub(crate) fn i64(&self, op: &'static str) -> Result<&[i64]> {
        match self {
            CpuStorage::I64(v) => Ok(v),
            CpuStorage::F32(_) => Err(Error::DTypeMismatch {
                op,
                expected: DType::I64,
                got: DType::F32,
            }),
        }
    }
}
