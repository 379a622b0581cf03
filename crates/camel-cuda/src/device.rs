//! Devices, buffers, kernels and events: everything that calls the driver.

use crate::alloc::{size_class, MemoryStats, Pool};
use crate::error::{Error, Result};
use crate::ffi::{self, CUresult};
use crate::launch::{
    DevPtr, DeviceLimits, Dim3, KernelArg, KernelLimits, LaunchConfig, Pod, MAX_KERNEL_ARGS,
};
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};

/// Most device ordinals camel-cuda serves.
pub const MAX_DEVICES: usize = 64;
/// Folder name of the no-driver stub that build.rs puts on cargo's run-time library path.
const RUNTIME_STUB_DIR: &str = "camel-cuda-stub";

/// A driver handle (context, stream, module, function, event). Driver handles may be used from
/// any thread once the owning context is current, which every call here ensures.
#[derive(Clone, Copy, Debug)]
struct Handle(*mut c_void);
// SAFETY: see above; the handles are never freed while a `CudaDevice` can reach them.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

// ---------------------------------------------------------------------------------------------
// Driver errors and initialization
// ---------------------------------------------------------------------------------------------

/// `"CUDA_ERROR_X: description"` for a `CUresult`.
pub(crate) fn describe(code: CUresult) -> String {
    let mut name: *const c_char = ptr::null();
    let mut desc: *const c_char = ptr::null();
    // SAFETY: both calls only write a pointer to a static string.
    unsafe {
        if ffi::cuGetErrorName(code, &mut name) == ffi::CUDA_SUCCESS && !name.is_null() {
            let name = CStr::from_ptr(name).to_string_lossy();
            if ffi::cuGetErrorString(code, &mut desc) == ffi::CUDA_SUCCESS && !desc.is_null() {
                return format!("{name}: {}", CStr::from_ptr(desc).to_string_lossy());
            }
            return name.into_owned();
        }
    }
    let known = match code {
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY: the CUDA toolkit's stub libcuda was loaded instead of the driver",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than the CUDA runtime",
        100 => "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
        218 => "CUDA_ERROR_INVALID_PTX",
        222 => "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return format!("CUDA error {code}"),
    };
    known.to_string()
}

fn check(code: CUresult, op: impl FnOnce() -> String) -> Result<()> {
    if code == ffi::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            op: op(),
            code,
            msg: describe(code),
        })
    }
}

/// `cuInit`, once per process.
fn driver_init() -> std::result::Result<(), CUresult> {
    static INIT: OnceLock<CUresult> = OnceLock::new();
    // SAFETY: cuInit has no preconditions.
    match *INIT.get_or_init(|| unsafe { ffi::cuInit(0) }) {
        ffi::CUDA_SUCCESS => Ok(()),
        code => Err(code),
    }
}

/// Path of the `libcuda` mapped into this process, if any (Linux: from /proc/self/maps).
pub fn loaded_driver_library() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with("libcuda.so"))
        })
        .map(str::to_string)
}

fn stub_loaded() -> Option<String> {
    loaded_driver_library().filter(|p| p.contains(RUNTIME_STUB_DIR))
}

fn host_has_nvidia_driver() -> bool {
    std::path::Path::new("/proc/driver/nvidia/version").exists()
        || std::path::Path::new("/dev/nvidiactl").exists()
}

/// True when camel's no-driver stub was loaded although this machine has an NVIDIA driver
/// (a build made on a driver-less machine, run by cargo on a GPU machine).
pub(crate) fn stub_shadows_driver() -> bool {
    stub_loaded().is_some() && host_has_nvidia_driver()
}

fn no_device_reason(what: String) -> String {
    if !cfg!(feature = "cuda") {
        return "camel-cuda was built without the `cuda` feature".to_string();
    }
    let mut reason = what;
    match (stub_loaded(), loaded_driver_library()) {
        (Some(stub), _) => {
            reason += &format!("; libcuda.so.1 is camel-cuda's no-driver stub ({stub})");
            if host_has_nvidia_driver() {
                reason +=
                    ", which shadows this machine's NVIDIA driver: camel-cuda was built where no \
                           driver was found; rebuild it here (`cargo clean -p camel-cuda`)";
            }
        }
        (None, Some(lib)) => reason += &format!(" (driver library {lib})"),
        (None, None) => {}
    }
    reason
}

fn no_device(code: CUresult) -> Error {
    Error::NoDevice {
        reason: no_device_reason(format!("cuInit: {}", describe(code))),
    }
}

/// Number of CUDA devices; `Ok(0)` when the driver reports none (no GPU, the no-driver stub,
/// or built without the `cuda` feature). Other driver failures are errors.
pub fn device_count() -> Result<usize> {
    match driver_init() {
        Ok(()) => {}
        Err(ffi::CUDA_ERROR_NO_DEVICE) => return Ok(0),
        Err(code) => return Err(no_device(code)),
    }
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { ffi::cuDeviceGetCount(&mut n) }, || {
        "cuDeviceGetCount".into()
    })?;
    Ok(n.max(0) as usize)
}

/// True when at least one CUDA device answers.
pub fn is_available() -> bool {
    device_count().is_ok_and(|n| n > 0)
}

/// The device with this ordinal, opened on first use (primary context, one non-blocking stream,
/// caching allocator) and shared by every later caller. A clear [`Error::NoDevice`], never a
/// panic, when there is no such device.
pub fn device(ordinal: usize) -> Result<Arc<CudaDevice>> {
    static SLOTS: [OnceLock<Arc<CudaDevice>>; MAX_DEVICES] =
        [const { OnceLock::new() }; MAX_DEVICES];
    static OPENING: Mutex<()> = Mutex::new(());
    let slot = SLOTS.get(ordinal).ok_or_else(|| Error::NoDevice {
        reason: format!("device ordinal {ordinal} is beyond camel-cuda's limit of {MAX_DEVICES}"),
    })?;
    if let Some(dev) = slot.get() {
        return Ok(dev.clone());
    }
    let _guard = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(dev) = slot.get() {
        return Ok(dev.clone());
    }
    let dev = Arc::new(CudaDevice::open(ordinal)?);
    let _ = slot.set(dev.clone());
    Ok(dev)
}

// ---------------------------------------------------------------------------------------------
// CudaDevice
// ---------------------------------------------------------------------------------------------

/// The parts of a device that buffers and events keep alive.
struct Shared {
    ordinal: usize,
    ctx: Handle,
    stream: Handle,
    pool: Mutex<Pool>,
    /// For error messages: an asynchronous fault surfaces at a later call.
    last_kernel: Mutex<Option<&'static str>>,
}

impl Shared {
    /// Makes the device's context current on the calling thread (cheap; done before every
    /// driver call, since any thread may call).
    fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained for the life of the process.
        check(unsafe { ffi::cuCtxSetCurrent(self.ctx.0) }, || {
            format!("cuCtxSetCurrent(device {})", self.ordinal)
        })
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sync(&self, op: &str) -> Result<()> {
        // SAFETY: the stream lives as long as the process.
        let code = unsafe { ffi::cuStreamSynchronize(self.stream.0) };
        if code == ffi::CUDA_SUCCESS {
            return Ok(());
        }
        let last = *self
            .last_kernel
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let op = match last {
            Some(k) => format!(
                "{op} (reports an earlier asynchronous error; last kernel launched: {k}; \
                 CAMEL_CUDA_SYNC=1 checks after every launch)"
            ),
            None => op.to_string(),
        };
        Err(Error::Driver {
            op,
            code,
            msg: describe(code),
        })
    }
}

#[derive(Default)]
struct Modules {
    handles: HashMap<String, Handle>,
    kernels: HashMap<String, HashMap<String, Kernel>>,
    /// Per loaded module, its kernels that start with `griddepcontrol.wait`: launched with PDL.
    pdl: HashMap<String, HashSet<String>>,
}

/// One CUDA device: its primary context, one non-blocking stream on which all of camel's work
/// runs in order, a caching allocator, and the kernel modules loaded from embedded PTX.
///
/// Opened once per process by [`device`] and never closed. Every method may be called from any
/// thread; each makes the context current first.
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    limits: DeviceLimits,
    total_memory: usize,
    shared: Arc<Shared>,
    /// Modules loaded for launches with programmatic dependent launch (index 1) and without
    /// (index 0): each thread's [`Experiments::pdl`](crate::config::Experiments::pdl) picks one.
    modules: [RwLock<Modules>; 2],
    /// Zeroed ints for kernels that count arrivals across blocks (see [`CudaDevice::counters`]).
    counters: Mutex<Option<Buffer>>,
    /// The device supports programmatic dependent launch (compute capability 9.0 or later).
    pdl_capable: bool,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("compute_capability", &self.limits.compute_capability)
            .finish_non_exhaustive()
    }
}

impl CudaDevice {
    fn open(ordinal: usize) -> Result<CudaDevice> {
        driver_init().map_err(no_device)?;
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice {
                reason: no_device_reason(format!(
                    "device {ordinal} requested, the driver reports {count} device(s)"
                )),
            });
        }
        let mut dev: ffi::CUdevice = 0;
        // SAFETY (this block): each call writes plain values into the locals passed.
        unsafe {
            check(ffi::cuDeviceGet(&mut dev, ordinal as c_int), || {
                format!("cuDeviceGet({ordinal})")
            })?;
        }
        let mut buf = [0 as c_char; 256];
        check(
            unsafe { ffi::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int - 1, dev) },
            || "cuDeviceGetName".into(),
        )?;
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let attr = |a: c_int, label: &str| -> Result<u32> {
            let mut v: c_int = 0;
            check(unsafe { ffi::cuDeviceGetAttribute(&mut v, a, dev) }, || {
                format!("cuDeviceGetAttribute({label})")
            })?;
            Ok(v.max(0) as u32)
        };
        use ffi::*;
        let limits = DeviceLimits {
            compute_capability: (
                attr(
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    "compute capability major",
                )?,
                attr(
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    "compute capability minor",
                )?,
            ),
            sm_count: attr(
                CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                "multiprocessor count",
            )?,
            warp_size: attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size")?,
            max_threads_per_block: attr(
                CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "max threads per block",
            )?,
            max_block: Dim3::xyz(
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block x")?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "max block y")?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "max block z")?,
            ),
            max_grid: Dim3::xyz(
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid x")?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid y")?,
                attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid z")?,
            ),
            max_shared_per_block: attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
                "max shared memory per block",
            )?,
            max_shared_per_block_optin: attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                "max shared memory per block (opt-in)",
            )?,
            max_shared_per_sm: attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                "max shared memory per multiprocessor",
            )?,
        };
        let mut total_memory = 0usize;
        check(
            unsafe { cuDeviceTotalMem_v2(&mut total_memory, dev) },
            || "cuDeviceTotalMem".into(),
        )?;
        let mut ctx: ffi::CUcontext = ptr::null_mut();
        check(unsafe { cuDevicePrimaryCtxRetain(&mut ctx, dev) }, || {
            format!("cuDevicePrimaryCtxRetain({ordinal})")
        })?;
        let mut stream: ffi::CUstream = ptr::null_mut();
        let made =
            check(unsafe { cuCtxSetCurrent(ctx) }, || "cuCtxSetCurrent".into()).and_then(|()| {
                check(
                    unsafe { cuStreamCreate(&mut stream, CU_STREAM_NON_BLOCKING) },
                    || "cuStreamCreate".into(),
                )
            });
        if let Err(e) = made {
            unsafe { cuDevicePrimaryCtxRelease_v2(dev) };
            return Err(e);
        }
        Ok(CudaDevice {
            ordinal,
            name,
            limits,
            total_memory,
            shared: Arc::new(Shared {
                ordinal,
                ctx: Handle(ctx),
                stream: Handle(stream),
                pool: Mutex::new(Pool::default()),
                last_kernel: Mutex::new(None),
            }),
            modules: [RwLock::default(), RwLock::default()],
            counters: Mutex::new(None),
            pdl_capable: limits.compute_capability.0 >= 9,
        })
    }

    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// Limits that launches are checked against.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.limits.compute_capability
    }

    /// Whether kernels asked for on this thread are launched with programmatic dependent launch
    /// (kernels/common/pdl.cuh): on compute capability 9.0 and later, unless the thread's
    /// [`Experiments::pdl`](crate::config::Experiments::pdl) is off. Then modules load
    /// from their compute_90 build, whose kernels start with `griddepcontrol.wait`, and each
    /// launch of such a kernel lets the GPU schedule it while the kernel before it drains.
    pub fn pdl(&self) -> bool {
        self.pdl_capable && pdl_wanted()
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.total_memory
    }

    /// Raw `CUcontext` (the primary context), for interop.
    pub fn raw_context(&self) -> *mut c_void {
        self.shared.ctx.0
    }

    /// Raw `CUstream` all of camel's work runs on, for interop (e.g. timing other libraries).
    pub fn raw_stream(&self) -> *mut c_void {
        self.shared.stream.0
    }

    fn bind(&self) -> Result<()> {
        self.shared.bind()
    }

    fn own(&self, op: &str, buf: &Buffer) -> Result<()> {
        if buf.shared.ordinal == self.ordinal {
            Ok(())
        } else {
            Err(Error::invalid(
                op,
                format!(
                    "buffer of device {} used on device {}",
                    buf.shared.ordinal, self.ordinal
                ),
            ))
        }
    }

    // ---- memory ---------------------------------------------------------------------------

    /// An uninitialized buffer of `bytes`, from the cache when a block of its size class is free
    /// (no driver call), else from `cuMemAlloc`. On out-of-memory the cache is emptied and the
    /// allocation retried once. Zero bytes give an empty buffer with a null pointer.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let shared = self.shared.clone();
        if bytes == 0 {
            return Ok(Buffer {
                ptr: 0,
                bytes: 0,
                class: 0,
                shared,
            });
        }
        if bytes > usize::MAX / 4 {
            let in_use = self.shared.pool().stats().in_use;
            return Err(Error::OutOfMemory {
                ordinal: self.ordinal,
                bytes,
                in_use,
            });
        }
        let class = size_class(bytes);
        if let Some(ptr) = self.shared.pool().take(class, bytes) {
            return Ok(Buffer {
                ptr,
                bytes,
                class,
                shared,
            });
        }
        self.bind()?;
        let raw_alloc = || {
            let mut p: ffi::CUdeviceptr = 0;
            // SAFETY: writes one pointer.
            match unsafe { ffi::cuMemAlloc_v2(&mut p, class) } {
                ffi::CUDA_SUCCESS => Ok(p),
                code => Err(code),
            }
        };
        let ptr = match raw_alloc() {
            Ok(p) => p,
            Err(ffi::CUDA_ERROR_OUT_OF_MEMORY) => {
                self.empty_cache()?;
                raw_alloc().map_err(|code| match code {
                    ffi::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory {
                        ordinal: self.ordinal,
                        bytes: class,
                        in_use: self.shared.pool().stats().in_use,
                    },
                    code => Error::Driver {
                        op: format!("cuMemAlloc({class} bytes)"),
                        code,
                        msg: describe(code),
                    },
                })?
            }
            Err(code) => {
                return Err(Error::Driver {
                    op: format!("cuMemAlloc({class} bytes)"),
                    code,
                    msg: describe(code),
                })
            }
        };
        self.shared.pool().record_new(class, bytes);
        Ok(Buffer {
            ptr,
            bytes,
            class,
            shared,
        })
    }

    /// A new buffer holding `data`. Asynchronous on the device's stream; `data` (ordinary,
    /// pageable host memory) is staged by the driver before this returns, so it may be dropped
    /// or changed right away.
    pub fn htod<T: Pod>(&self, data: &[T]) -> Result<Buffer> {
        let buf = self.alloc(std::mem::size_of_val(data))?;
        self.htod_into(data, &buf)?;
        Ok(buf)
    }

    /// Copies `data` into the start of `dst` (asynchronous, like [`CudaDevice::htod`]).
    pub fn htod_into<T: Pod>(&self, data: &[T], dst: &Buffer) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        self.own("htod", dst)?;
        if bytes > dst.bytes {
            return Err(Error::invalid(
                "htod",
                format!("{bytes} bytes do not fit a buffer of {} bytes", dst.bytes),
            ));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `dst` holds at least `bytes`; the source is read before the call returns
        // (pageable memory is staged).
        check(
            unsafe {
                ffi::cuMemcpyHtoDAsync_v2(
                    dst.ptr,
                    data.as_ptr().cast(),
                    bytes,
                    self.shared.stream.0,
                )
            },
            || format!("cuMemcpyHtoDAsync({bytes} bytes)"),
        )
    }

    /// Copies the first `out.len()` elements of `src` to the host. Waits for all earlier work
    /// on the stream, so errors of earlier kernels surface here (naming the last kernel).
    pub fn dtoh<T: Pod>(&self, src: &Buffer, out: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(out);
        self.own("dtoh", src)?;
        if bytes > src.bytes {
            return Err(Error::invalid(
                "dtoh",
                format!("{bytes} bytes asked from a buffer of {} bytes", src.bytes),
            ));
        }
        self.bind()?;
        if bytes > 0 {
            // SAFETY: `out` is valid for `bytes` of writes, and any bit pattern is a valid `T`;
            // the stream is synchronized before `out` is used again.
            check(
                unsafe {
                    ffi::cuMemcpyDtoHAsync_v2(
                        out.as_mut_ptr().cast(),
                        src.ptr,
                        bytes,
                        self.shared.stream.0,
                    )
                },
                || format!("cuMemcpyDtoHAsync({bytes} bytes)"),
            )?;
        }
        self.shared.sync("dtoh: cuStreamSynchronize")
    }

    /// The first `len` elements of `src`, copied to a new vector (see [`CudaDevice::dtoh`]).
    pub fn dtoh_vec<T: Pod>(&self, src: &Buffer, len: usize) -> Result<Vec<T>> {
        // SAFETY: `Pod` types accept any bit pattern, zero included.
        let mut out = vec![unsafe { std::mem::zeroed::<T>() }; len];
        self.dtoh(src, &mut out)?;
        Ok(out)
    }

    /// Copies the first `bytes` of `src` to `dst`, asynchronously on the stream.
    pub fn dtod(&self, src: &Buffer, dst: &Buffer, bytes: usize) -> Result<()> {
        self.own("dtod", src)?;
        self.own("dtod", dst)?;
        if bytes > src.bytes || bytes > dst.bytes {
            return Err(Error::invalid(
                "dtod",
                format!(
                    "{bytes} bytes between buffers of {} and {} bytes",
                    src.bytes, dst.bytes
                ),
            ));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges are within live allocations of this device.
        check(
            unsafe { ffi::cuMemcpyDtoDAsync_v2(dst.ptr, src.ptr, bytes, self.shared.stream.0) },
            || format!("cuMemcpyDtoDAsync({bytes} bytes)"),
        )
    }

    /// At least `n` device ints that are zero whenever no kernel runs: kept for the device's
    /// lifetime, zeroed once (and again when they grow), and every kernel that uses them must
    /// leave them zero (as `sgemm_13_async_64x64x16_fk` does), so no memset is queued per launch.
    pub fn counters(&self, n: usize) -> Result<DevPtr> {
        let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        if c.as_ref().map_or(true, |b| b.bytes < n * 4) {
            let b = self.alloc(n.max(1024) * 4)?;
            self.memset_zero(&b)?;
            // the old buffer may still be in use by queued kernels: its return to the cache is
            // stream-ordered like any other buffer's
            *c = Some(b);
        }
        Ok(c.as_ref().map(|b| b.ptr()).unwrap_or_default())
    }

    /// Sets every byte of `buf` to zero, asynchronously on the stream.
    pub fn memset_zero(&self, buf: &Buffer) -> Result<()> {
        self.own("memset_zero", buf)?;
        if buf.bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range is within a live allocation of this device.
        check(
            unsafe { ffi::cuMemsetD8Async(buf.ptr, 0, buf.bytes, self.shared.stream.0) },
            || format!("cuMemsetD8Async({} bytes)", buf.bytes),
        )
    }

    /// Waits until all work queued on the device's stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.shared.sync("cuStreamSynchronize")
    }

    /// Allocator statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared.pool().stats()
    }

    /// Returns every cached (free) block to the driver, after waiting for the stream.
    pub fn empty_cache(&self) -> Result<()> {
        self.bind()?;
        self.shared.sync("empty_cache: cuStreamSynchronize")?;
        let blocks = self.shared.pool().drain();
        for p in blocks {
            // SAFETY: cached blocks belong to no buffer and no queued work.
            check(unsafe { ffi::cuMemFree_v2(p) }, || "cuMemFree".into())?;
        }
        Ok(())
    }

    // ---- kernels --------------------------------------------------------------------------

    /// The kernel `kernel` (its `extern "C"` name) of module `module` (path of its `.cu` under
    /// `kernels/`, without the extension, e.g. `elementwise` or `matmul/01_naive`). The module is
    /// loaded (JIT-compiled by the driver) from the embedded PTX on first use, then cached.
    pub fn function(&self, module: &str, kernel: &str) -> Result<Kernel> {
        let pdl = self.pdl();
        let modules = &self.modules[pdl as usize];
        {
            let mods = modules.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(k) = mods.kernels.get(module).and_then(|m| m.get(kernel)) {
                return Ok(*k);
            }
        }
        let mut mods = modules.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = mods.kernels.get(module).and_then(|m| m.get(kernel)) {
            return Ok(*k);
        }
        self.bind()?;
        let handle = match mods.handles.get(module) {
            Some(h) => *h,
            None => {
                let (h, pdl) = self.load_module(module, pdl)?;
                mods.handles.insert(module.to_string(), h);
                mods.pdl.insert(module.to_string(), pdl);
                h
            }
        };
        let full = format!("{module}::{kernel}");
        let cname = CString::new(kernel)
            .map_err(|_| Error::invalid(&full, "kernel name contains a NUL byte"))?;
        let mut func: ffi::CUfunction = ptr::null_mut();
        // SAFETY: the module is loaded; writes one handle.
        let code = unsafe { ffi::cuModuleGetFunction(&mut func, handle.0, cname.as_ptr()) };
        if code != ffi::CUDA_SUCCESS {
            return Err(Error::Driver {
                op: format!("cuModuleGetFunction({full})"),
                code,
                msg: format!(
                    "{}; is `{kernel}` declared `extern \"C\" __global__` in kernels/{module}.cu?",
                    describe(code)
                ),
            });
        }
        let attr = |a: c_int, label: &str| -> Result<u32> {
            let mut v: c_int = 0;
            check(unsafe { ffi::cuFuncGetAttribute(&mut v, a, func) }, || {
                format!("cuFuncGetAttribute({full}, {label})")
            })?;
            Ok(v.max(0) as u32)
        };
        let limits = KernelLimits {
            max_threads_per_block: attr(
                ffi::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "max threads per block",
            )?,
            static_shared_bytes: attr(ffi::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared size")?,
            num_regs: attr(ffi::CU_FUNC_ATTRIBUTE_NUM_REGS, "registers")?,
        };
        // Leaked once per kernel and device, so `Kernel` stays `Copy` and errors can name it.
        let name: &'static str = Box::leak(full.into_boxed_str());
        let k = Kernel {
            func: Handle(func),
            name,
            ordinal: self.ordinal,
            limits,
            pdl: mods.pdl.get(module).is_some_and(|p| p.contains(kernel)),
        };
        mods.kernels
            .entry(module.to_string())
            .or_default()
            .insert(kernel.to_string(), k);
        Ok(k)
    }

    /// Loads a module image that is not embedded — PTX text or a cubin, e.g. the GEMM
    /// autotuner's candidates read from a file — under the name `module`; its kernels are then
    /// found by [`CudaDevice::function`]. A name already loaded or embedded is an error.
    pub fn load_module_image(&self, module: &str, image: &[u8]) -> Result<()> {
        // both sets are locked, in index order, so the image is found with PDL on or off
        let [plain, with_pdl] = &self.modules;
        let mut plain = plain.write().unwrap_or_else(PoisonError::into_inner);
        let mut with_pdl = with_pdl.write().unwrap_or_else(PoisonError::into_inner);
        if plain.handles.contains_key(module) || crate::ptx::embedded_modules().contains(&module) {
            return Err(Error::invalid(
                format!("load_module_image({module})"),
                "a module of that name is already loaded or embedded",
            ));
        }
        self.bind()?;
        let mut data = image.to_vec();
        data.push(0); // PTX must be NUL-terminated; a cubin ignores the extra byte
        let h = self.load_module_data(module, &data)?;
        plain.handles.insert(module.to_string(), h);
        with_pdl.handles.insert(module.to_string(), h);
        Ok(())
    }

    /// Loads an embedded module: its PDL build when `pdl`, and the set of its kernels that may
    /// be launched with PDL (those whose PTX starts with the wait).
    fn load_module(&self, module: &str, pdl: bool) -> Result<(Handle, HashSet<String>)> {
        if pdl {
            if let Some(ptx) = crate::ptx::find_pdl(module) {
                let h = self.load_module_data(module, ptx.as_bytes())?;
                return Ok((h, crate::ptx::pdl_kernels(ptx)));
            }
        }
        let ptx = crate::ptx::find(module).ok_or_else(|| Error::MissingPtx {
            module: module.to_string(),
            available: crate::ptx::embedded_modules().join(", "),
        })?;
        if module.ends_with("_sm90a") && self.limits.compute_capability != (9, 0) {
            let (ma, mi) = self.limits.compute_capability;
            return Err(Error::Unsupported {
                what: format!("kernel module `{module}` (sm_90a PTX)"),
                ordinal: self.ordinal,
                msg: format!("it needs compute capability 9.0, the device has {ma}.{mi}"),
            });
        }
        let pdl = if pdl {
            crate::ptx::pdl_kernels(ptx)
        } else {
            HashSet::new()
        };
        Ok((self.load_module_data(module, ptx.as_bytes())?, pdl))
    }

    /// JIT-loads a NUL-terminated PTX text (or a cubin).
    fn load_module_data(&self, module: &str, ptx: &[u8]) -> Result<Handle> {
        let mut log = vec![0u8; 16 * 1024];
        let mut opts: [c_uint; 2] = [
            ffi::CU_JIT_ERROR_LOG_BUFFER,
            ffi::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
        let mut m: ffi::CUmodule = ptr::null_mut();
        // SAFETY: `ptx` is NUL-terminated (build.rs appends "\0"); the log buffer outlives the call.
        let code = unsafe {
            ffi::cuModuleLoadDataEx(
                &mut m,
                ptx.as_ptr().cast(),
                2,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if code == ffi::CUDA_SUCCESS {
            return Ok(Handle(m));
        }
        let mut msg = describe(code);
        if code == 222 || code == 218 {
            let text = String::from_utf8_lossy(ptx);
            let version = text
                .lines()
                .find(|l| l.starts_with(".version"))
                .unwrap_or(".version ?");
            msg += &format!(
                "; the PTX says `{version}`: the driver must support the CUDA release of the nvcc that \
                 built it (PTX 9.0 = CUDA 13.0, driver 580 or newer)"
            );
        }
        let log = CStr::from_bytes_until_nul(&log)
            .map(|c| c.to_string_lossy().trim().to_string())
            .unwrap_or_default();
        if !log.is_empty() {
            msg += &format!("; JIT log: {log}");
        }
        Err(Error::Driver {
            op: format!("cuModuleLoadDataEx(kernels/ptx/{module}.ptx)"),
            code,
            msg,
        })
    }

    /// Launches `kernel` on the device's stream after checking `cfg` against the device's and
    /// the kernel's limits (errors name the kernel). Asynchronous: a fault inside the kernel is
    /// reported by a later synchronizing call, or right here with `CAMEL_CUDA_SYNC=1`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and size; device pointers
    /// among them must address memory of this device that is valid for everything the kernel
    /// reads and writes. (Buffers may be dropped right after the launch: their blocks are only
    /// reused by work queued later on the same stream.)
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        if kernel.ordinal != self.ordinal {
            return Err(Error::invalid(
                kernel.name,
                format!(
                    "kernel loaded on device {} launched on device {}",
                    kernel.ordinal, self.ordinal
                ),
            ));
        }
        cfg.validate(kernel.name, &self.limits, &kernel.limits)?;
        if args.len() > MAX_KERNEL_ARGS {
            return Err(Error::launch(
                kernel.name,
                format!("{} arguments, at most {MAX_KERNEL_ARGS}", args.len()),
            ));
        }
        let mut params = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        for (p, a) in params.iter_mut().zip(args) {
            *p = a.as_kernel_param();
        }
        self.bind()?;
        if cfg.shared_mem_bytes + kernel.limits.static_shared_bytes
            > self.limits.max_shared_per_block
        {
            check(
                ffi::cuFuncSetAttribute(
                    kernel.func.0,
                    ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    cfg.shared_mem_bytes as c_int,
                ),
                || {
                    format!(
                        "cuFuncSetAttribute({}, max dynamic shared memory {})",
                        kernel.name, cfg.shared_mem_bytes
                    )
                },
            )?;
        }
        let (g, b) = (cfg.grid, cfg.block);
        if kernel.pdl {
            // Programmatic dependent launch (kernels/common/pdl.cuh): the kernel's first statement
            // waits for the kernel before it, so only its launch overlaps that one's tail.
            let mut attr = ffi::CUlaunchAttribute {
                id: ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                pad: [0; 4],
                value: ffi::CUlaunchAttributeValue { words: [0; 16] },
            };
            attr.value.words[0] = 1; // programmaticStreamSerializationAllowed
            let lc = ffi::CUlaunchConfig {
                grid_dim_x: g.x,
                grid_dim_y: g.y,
                grid_dim_z: g.z,
                block_dim_x: b.x,
                block_dim_y: b.y,
                block_dim_z: b.z,
                shared_mem_bytes: cfg.shared_mem_bytes,
                stream: self.shared.stream.0,
                attrs: &mut attr,
                num_attrs: 1,
            };
            check(
                ffi::cuLaunchKernelEx(&lc, kernel.func.0, params.as_mut_ptr(), ptr::null_mut()),
                || format!("cuLaunchKernelEx({}, {cfg:?}, PDL)", kernel.name),
            )?;
        } else {
            check(
                ffi::cuLaunchKernel(
                    kernel.func.0,
                    g.x,
                    g.y,
                    g.z,
                    b.x,
                    b.y,
                    b.z,
                    cfg.shared_mem_bytes,
                    self.shared.stream.0,
                    params.as_mut_ptr(),
                    ptr::null_mut(),
                ),
                || format!("cuLaunchKernel({}, {cfg:?})", kernel.name),
            )?;
        }
        *self
            .shared
            .last_kernel
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(kernel.name);
        LAUNCHES.with(|c| c.set(c.get() + 1));
        if sync_every_launch() {
            self.shared
                .sync(&format!("kernel {} (CAMEL_CUDA_SYNC=1)", kernel.name))?;
        }
        Ok(())
    }

    // ---- timing ---------------------------------------------------------------------------

    /// Records an event on the device's stream (for timing: see [`Event::elapsed_ms`]).
    pub fn record_event(&self) -> Result<Event> {
        self.bind()?;
        let mut e: ffi::CUevent = ptr::null_mut();
        // SAFETY: writes one handle; the stream is live.
        unsafe {
            check(ffi::cuEventCreate(&mut e, 0), || "cuEventCreate".into())?;
            let event = Event {
                raw: Handle(e),
                shared: self.shared.clone(),
            };
            check(ffi::cuEventRecord(e, self.shared.stream.0), || {
                "cuEventRecord".into()
            })?;
            Ok(event)
        }
    }
}

/// Whether programmatic dependent launch is wanted where the device has it
/// ([`crate::config::Experiments::pdl`], read when the device opens).
fn pdl_wanted() -> bool {
    crate::config::with_experiments(|e| e.pdl)
}

thread_local! {
    static LAUNCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Kernels this host thread has launched so far, on any device: a test shows that an op (a
/// view, say) launches nothing by reading it before and after.
pub fn thread_launch_count() -> u64 {
    LAUNCHES.with(|c| c.get())
}

/// `CAMEL_CUDA_SYNC` ([`crate::config::cuda_sync`]).
fn sync_every_launch() -> bool {
    crate::config::cuda_sync()
}

// ---------------------------------------------------------------------------------------------
// Buffer, Kernel, Event
// ---------------------------------------------------------------------------------------------

/// A block of device memory from a device's caching allocator. Dropping it returns the block
/// to the cache (no driver call, no synchronization). Not initialized by `alloc`.
pub struct Buffer {
    ptr: u64,
    bytes: usize,
    class: usize,
    shared: Arc<Shared>,
}

impl Buffer {
    /// Device address of the first byte (the raw `CUdeviceptr` is `.raw()` / `.0`).
    pub fn ptr(&self) -> DevPtr {
        DevPtr(self.ptr)
    }

    /// Size asked for, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Size of the underlying block (the size class), in bytes.
    pub fn capacity(&self) -> usize {
        self.class
    }

    /// Ordinal of the device the buffer lives on.
    pub fn ordinal(&self) -> usize {
        self.shared.ordinal
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.class > 0 {
            self.shared
                .pool()
                .give_back(self.ptr, self.class, self.bytes);
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Buffer(cuda:{} {:#x}, {} bytes)",
            self.shared.ordinal, self.ptr, self.bytes
        )
    }
}

/// A loaded kernel: a `CUfunction` plus its name and limits. Cheap to copy; valid for the life
/// of the process on the device that loaded it.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    func: Handle,
    name: &'static str,
    ordinal: usize,
    limits: KernelLimits,
    pdl: bool,
}

impl Kernel {
    /// `module::kernel`, as used in error messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Register-limited threads per block, static shared memory, registers.
    pub fn limits(&self) -> KernelLimits {
        self.limits
    }

    /// Raw `CUfunction`.
    pub fn raw(&self) -> *mut c_void {
        self.func.0
    }

    /// Whether launches of this kernel use programmatic dependent launch (its PTX starts with
    /// `griddepcontrol.wait` and the device uses PDL: [`CudaDevice::pdl`]).
    pub fn pdl(&self) -> bool {
        self.pdl
    }
}

/// An event recorded on a device's stream.
pub struct Event {
    raw: Handle,
    shared: Arc<Shared>,
}

impl Event {
    /// Whether the device has reached this event (`cuEventQuery`; does not wait). Benchmarks
    /// use it to check that the GPU was still busy when the host finished queueing work.
    pub fn is_done(&self) -> Result<bool> {
        self.shared.bind()?;
        // SAFETY: the event is live and recorded.
        match unsafe { ffi::cuEventQuery(self.raw.0) } {
            ffi::CUDA_SUCCESS => Ok(true),
            ffi::CUDA_ERROR_NOT_READY => Ok(false),
            code => check(code, || "cuEventQuery".into()).map(|()| false),
        }
    }

    /// Milliseconds between this event and a later one `end`; waits for `end` to complete.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.shared.bind()?;
        let mut ms = 0f32;
        // SAFETY: both events are live and recorded.
        unsafe {
            check(ffi::cuEventSynchronize(end.raw.0), || {
                "cuEventSynchronize".into()
            })?;
            check(
                ffi::cuEventElapsedTime(&mut ms, self.raw.0, end.raw.0),
                || "cuEventElapsedTime".into(),
            )?;
        }
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.shared.bind().is_ok() {
            // SAFETY: the event is live and owned.
            unsafe { ffi::cuEventDestroy_v2(self.raw.0) };
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Event(cuda:{})", self.shared.ordinal)
    }
}
