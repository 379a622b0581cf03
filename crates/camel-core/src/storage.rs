//! `Storage`: a tensor's data on one device, `Cpu(CpuStorage)` or `Cuda(CudaStorage)`.
//!
//! Each op defines its primitives once, as a trait in its folder (`ops/softmax/mod.rs`:
//! `SoftmaxKernels`) that `CpuStorage` implements in the folder's `cpu.rs` and `CudaStorage` in
//! its `cuda.rs`. The `dispatch!` macro, written once here, turns a call on `Storage`s into the
//! call on the device's own storage type: it checks that the operands share a device (operands
//! on different devices are an error, never a silent copy), runs the same expression in the CPU
//! or the CUDA arm, and wraps the result back into `Storage`. An op's `Storage` method is one
//! line of it, beside the op.

pub use crate::backend::cpu::CpuStorage;
#[cfg(feature = "cuda")]
use crate::backend::cuda::{self, CudaStorage};
use crate::{DType, Device, Error, Result};

/// A tensor's data on one device.
#[derive(Debug)]
pub enum Storage {
    /// Host memory.
    Cpu(CpuStorage),
    /// GPU memory.
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
            Storage::Cpu(s) => s.len(),
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
            Storage::Cpu(s) => s.dtype(),
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
            Device::Cpu => Ok(Storage::Cpu(CpuStorage::F32(
                crate::backend::cpu::try_filled("full", n, value)?,
            ))),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Ok(Storage::Cuda(cuda::full(i, n, value)?)),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Storage::from_cpu(CpuStorage::F32(vec![]), device),
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
}
