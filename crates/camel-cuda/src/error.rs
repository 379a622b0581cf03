//! The crate's error type. Every message names the driver call or kernel it comes from.

/// Errors from camel-cuda.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No usable CUDA device: no driver, no GPU, a driver too old, or built without `cuda`.
    #[error("no CUDA device: {reason}")]
    NoDevice {
        /// What the driver said, and which libcuda was loaded.
        reason: String,
    },
    /// A driver call failed.
    #[error("CUDA driver call `{op}` failed: {msg} (CUresult {code})")]
    Driver {
        /// The call, with the kernel or module it concerned, e.g. `cuLaunchKernel(elementwise::fill_f32)`.
        op: String,
        /// The raw `CUresult`.
        code: u32,
        /// The driver's name and description of `code`, plus any hint.
        msg: String,
    },
    /// A kernel module has no embedded PTX.
    #[error(
        "no PTX embedded for kernel module `{module}` (embedded: {available}); \
         does kernels/{module}.cu exist? run `cargo xtask build-kernels` and rebuild"
    )]
    MissingPtx {
        /// The module asked for, e.g. `elementwise` or `matmul/01_naive`.
        module: String,
        /// The modules this build embeds.
        available: String,
    },
    /// A launch configuration the device or kernel cannot run.
    #[error("invalid launch configuration for kernel `{kernel}`: {msg}")]
    LaunchConfig {
        /// `module::kernel`.
        kernel: String,
        /// Which limit was exceeded, with the numbers.
        msg: String,
    },
    /// The device has no memory left for an allocation, even after emptying the cache.
    #[error(
        "CUDA out of memory on device {ordinal}: cannot allocate {bytes} bytes \
         ({in_use} bytes in use by camel; cache emptied and retried)"
    )]
    OutOfMemory {
        /// Device ordinal.
        ordinal: usize,
        /// Requested size (rounded up to its size class).
        bytes: usize,
        /// Bytes held by live buffers.
        in_use: usize,
    },
    /// A wrong argument: a size that does not fit, a buffer from another device, ...
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The operation, e.g. `dtoh` or `elementwise::fill_f32`.
        op: String,
        /// What was wrong.
        msg: String,
    },
    /// The device cannot run this module, e.g. sm_90a PTX on a non-Hopper GPU.
    #[error("{what} is not supported on device {ordinal}: {msg}")]
    Unsupported {
        /// The module or feature.
        what: String,
        /// Device ordinal.
        ordinal: usize,
        /// Why.
        msg: String,
    },
}

/// Result alias for camel-cuda.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn invalid(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op: op.into(),
            msg: msg.into(),
        }
    }

    pub(crate) fn launch(kernel: &str, msg: impl Into<String>) -> Self {
        Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: msg.into(),
        }
    }
}
