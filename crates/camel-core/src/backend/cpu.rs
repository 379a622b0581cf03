//! The CPU backend: [`CpuStorage`], host data of one dtype. Each op's CPU reference lives in its
//! folder (`ops/<op>/cpu.rs`) as plain loops over slices, written to be read; every CUDA kernel
//! is tested against them.

use crate::{DType, Error, Result};

/// Host data, one variant per dtype.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    F32(Vec<f32>),
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
