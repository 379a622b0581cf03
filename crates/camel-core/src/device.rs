//! Devices and element types.

use std::fmt;

/// Where a tensor's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory; the reference implementation of every op.
    #[default]
    Cpu,
    /// CUDA device with the given ordinal (needs the `cuda` feature and a GPU).
    Cuda(usize),
}

impl Device {
    /// True for `Device::Cuda(_)`.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// The first CUDA device if one answers, else the CPU. Handy for examples.
    pub fn cuda_if_available() -> Device {
        if cuda_available() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }
    }
}

/// True when camel was built with `cuda` and a CUDA device answers.
pub fn cuda_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        camel_cuda::device(0).is_ok()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(i)) => Ok(Device::Cuda(i)),
                _ => Err(format!(
                    "unknown device '{s}' (expected cpu, cuda or cuda:N)"
                )),
            },
        }
    }
}

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float: all compute.
    F32,
    /// 64-bit signed integer: labels and token ids.
    I64,
    /// IEEE 754 half precision (1 sign, 5 exponent, 10 mantissa bits): range ±65504.
    F16,
    /// bfloat16 (1 sign, 8 exponent, 7 mantissa bits): f32's range at 8 bits of precision.
    BF16,
}

impl DType {
    /// Bytes per element.
    pub fn size(&self) -> usize {
        match self {
            DType::F32 => 4,
            DType::I64 => 8,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// True for the floating-point dtypes (f32, f16, bf16).
    pub fn is_float(&self) -> bool {
        match self {
            DType::F32 | DType::F16 | DType::BF16 => true,
            DType::I64 => false,
        }
    }

    /// True for the 16-bit floating-point dtypes (f16, bf16).
    pub fn is_half(&self) -> bool {
        match self {
            DType::F16 | DType::BF16 => true,
            DType::F32 | DType::I64 => false,
        }
    }

    /// The dtype's short name: `f32`, `i64`, `f16`, `bf16`.
    pub fn name(&self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;

    /// `f32`, `i64`, `f16` or `bf16` (also PyTorch's `float32`, `int64`, `float16`, `half`,
    /// `bfloat16`).
    fn from_str(s: &str) -> std::result::Result<DType, String> {
        match s {
            "f32" | "float32" | "float" => Ok(DType::F32),
            "i64" | "int64" | "long" => Ok(DType::I64),
            "f16" | "float16" | "half" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::BF16),
            _ => Err(format!(
                "unknown dtype '{s}' (expected f32, i64, f16 or bf16)"
            )),
        }
    }
}
