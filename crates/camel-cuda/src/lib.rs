//! camel-cuda: CUDA context and stream, caching allocator, PTX modules and one typed launcher
//! per kernel. It knows buffers, streams and kernels — not tensors.
//!
//! # Overview
//! - [`device`]`(ordinal)` opens a device once per process (primary context, one non-blocking
//!   stream, caching allocator) and returns the shared [`CudaDevice`]. Every call may come from
//!   any thread: each makes the context current first.
//! - [`CudaDevice::alloc`] / [`htod`](CudaDevice::htod) give a [`Buffer`]; dropping it returns
//!   its block to the cache, so a steady-state training step makes no `cuMemAlloc` call
//!   ([`CudaDevice::memory_stats`] counts them).
//! - All work is queued in order on the device's stream; the host waits only in
//!   [`dtoh`](CudaDevice::dtoh), [`synchronize`](CudaDevice::synchronize) and
//!   [`empty_cache`](CudaDevice::empty_cache).
//! - Kernels are `extern "C" __global__` functions in `kernels/**/*.cu`, compiled to PTX by
//!   `cargo xtask build-kernels` and embedded in the crate at build time; a module is JIT-loaded
//!   by the driver the first time one of its kernels is asked for ([`CudaDevice::function`]).
//! - Launchers in [`kernels`] (`kernels::<family>::<kernel>`) are the typed entry points; each
//!   ladder's steps are a table beside them (`kernels::<family>::STEPS`, described in
//!   [`kernels::ladder`]; the SGEMM ladder's is [`kernels::matmul::SgemmKernel::ALL`]).
//! - [`config`] reads every `CAMEL_*` variable and holds the experiment switches.
//!
//! # Adding a kernel
//! 1. Write it in `kernels/<family>.cu` (or `kernels/<family>/NN_step.cu`; a file named
//!    `*_sm90a.cu` gets Hopper-only `sm_90a` PTX) as an `extern "C" __global__` function, with the
//!    helpers of `kernels/common/common.cuh` (counts and flat indices are `long long`):
//!    ```cuda
//!    extern "C" __global__ void scale_f32(const float* __restrict__ x, float* __restrict__ out,
//!                                         long long n, float a) {
//!        GRID_STRIDE_LOOP(i, n) { out[i] = a * x[i]; }
//!    }
//!    ```
//! 2. Add its launcher to `src/kernels/<family>.rs` (a new family also gets `pub mod <family>;`
//!    in `src/kernels/mod.rs`): look the kernel up by module and name, compute the launch
//!    configuration, pass the arguments in the kernel's order with the kernel's types
//!    ([`DevPtr`] for pointers, `i64` for `long long`, `i32` for `int`, `f32` for `float`, a
//!    `#[repr(C)]` struct deriving cust's [`DeviceCopy`] for a struct passed by value):
//!    ```ignore
//!    pub fn scale_f32(dev: &CudaDevice, x: DevPtr, out: DevPtr, n: usize, a: f32) -> Result<()> {
//!        if n == 0 { return Ok(()); }
//!        let k = dev.function(MODULE, "scale_f32")?;
//!        // SAFETY: matches `scale_f32(const float*, float*, long long, float)`.
//!        unsafe { dev.launch(&k, launch_1d(n), &[&x, &out, &(n as i64), &a]) }
//!    }
//!    ```
//!    A new step of a memory-bound ladder also gets its entry in its module's `STEPS` table (the
//!    launchers the backend, `bench_memory` and the tests run) and in [`kernels::ladder`] (its
//!    name, technique and needs), which a test keeps alike.
//! 3. `cargo xtask build-kernels` (rebuilds only what changed), then build with `--features cuda`.
//!
//! Module names are the `.cu` path under `kernels/` without extension (`matmul/01_naive`).
//! Launch configurations are checked in Rust against the device's and the kernel's limits
//! ([`LaunchConfig::validate`]), so a bad one is an [`Error::LaunchConfig`] naming the kernel,
//! not a driver error. Launchers are safe functions taking raw device pointers: a wrong pointer
//! or size can corrupt or fault *device* memory (reported at the next synchronizing call, or at
//! once with `CAMEL_CUDA_SYNC=1`), never host memory; callers check shapes before launching.
//!
//! # Building without a GPU
//! Without the `cuda` feature the crate has the same API with no CUDA dependency: every driver
//! function answers "no device", so [`device`] is an [`Error::NoDevice`] and [`device_count`]
//! is 0. With `cuda` it links `libcuda.so.1` through `cust`. On a machine without the NVIDIA
//! driver, build.rs generates a stub `libcuda` whose every entry point returns
//! `CUDA_ERROR_NO_DEVICE`, and links against it; `cargo test`/`cargo run` then load the stub
//! (cargo puts it on `LD_LIBRARY_PATH`, from the target folder), so GPU tests skip. The stub is
//! put there only when the build machine has no real `libcuda.so.1`
//! (or never, with `CAMEL_NO_STUB_RPATH=1`), and binaries carry no rpath: run on a GPU host
//! they load the real driver. See `build.rs` for details.
//!
//! # Environment
//! Every `CAMEL_*` variable is read by [`config`], whose documentation is the table of them.

#![warn(missing_docs)]

mod alloc;
pub mod config;
mod device;
mod error;
mod ffi;
pub mod kernels;
mod launch;
mod ptx;
mod testing;
pub mod tma;

pub use alloc::MemoryStats;
pub use device::{
    device, device_count, is_available, loaded_driver_library, thread_launch_count, Buffer,
    CudaDevice, Event, Kernel, MAX_DEVICES,
};
pub use error::{Error, Result};
pub use launch::{
    launch_1d, DevPtr, DeviceCopy, DeviceLimits, Dim3, KernelArg, KernelLimits, LaunchConfig, Pod,
    BLOCK_1D, GRID_1D_CAP, MAX_KERNEL_ARGS,
};
pub use ptx::embedded_modules;
pub use testing::{require_gpu, test_device};

/// True when the crate was built with the `cuda` feature (real driver calls, embedded PTX).
pub const CUDA_ENABLED: bool = cfg!(feature = "cuda");
