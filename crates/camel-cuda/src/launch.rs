//! Launch configurations, their checks, device pointers and kernel arguments. Pure Rust: none
//! of this calls the driver, so it is tested on any machine.

use crate::error::{Error, Result};
use std::os::raw::c_void;

/// Grid or block dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl Dim3 {
    /// `(x, 1, 1)`.
    pub const fn x(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
    /// `(x, y, 1)`.
    pub const fn xy(x: u32, y: u32) -> Self {
        Dim3 { x, y, z: 1 }
    }
    /// `(x, y, z)`.
    pub const fn xyz(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    /// `x * y * z`.
    pub const fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::x(x)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::xy(x, y)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::xyz(x, y, z)
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes (`extern __shared__`).
    pub shared_mem_bytes: u32,
}

/// Threads per block used by [`launch_1d`].
pub const BLOCK_1D: u32 = 256;
/// Most blocks [`launch_1d`] asks for; kernels loop (grid-stride, `GRID_STRIDE_LOOP` in
/// `kernels/common/common.cuh`) over whatever the grid does not cover.
pub const GRID_1D_CAP: u32 = 65_535;

/// One thread per element for `n` elements, [`BLOCK_1D`] threads a block, at most
/// [`GRID_1D_CAP`] blocks (the kernel must use a grid-stride loop). At least one block.
pub fn launch_1d(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK_1D as usize).clamp(1, GRID_1D_CAP as usize) as u32;
    LaunchConfig {
        grid: Dim3::x(blocks),
        block: Dim3::x(BLOCK_1D),
        shared_mem_bytes: 0,
    }
}

impl LaunchConfig {
    /// A configuration with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
        }
    }

    /// The same configuration with `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Checks the configuration against the device's limits and the kernel's own (its register
    /// use caps threads per block; its static shared memory adds to the dynamic amount).
    /// Errors name `kernel` and give the numbers.
    pub fn validate(&self, kernel: &str, dev: &DeviceLimits, k: &KernelLimits) -> Result<()> {
        let (g, b) = (self.grid, self.block);
        if g.volume() == 0 || b.volume() == 0 {
            return Err(Error::launch(
                kernel,
                format!("empty grid {g:?} or block {b:?}"),
            ));
        }
        let bmax = dev.max_block;
        if b.x > bmax.x || b.y > bmax.y || b.z > bmax.z {
            return Err(Error::launch(
                kernel,
                format!("block {b:?} exceeds the device's maximum {bmax:?}"),
            ));
        }
        let threads = b.volume();
        if threads > dev.max_threads_per_block as u64 {
            return Err(Error::launch(
                kernel,
                format!(
                    "{threads} threads per block exceed the device's {}",
                    dev.max_threads_per_block
                ),
            ));
        }
        if threads > k.max_threads_per_block as u64 {
            return Err(Error::launch(
                kernel,
                format!(
                    "{threads} threads per block exceed the kernel's {} (it uses {} registers per thread)",
                    k.max_threads_per_block, k.num_regs
                ),
            ));
        }
        let gmax = dev.max_grid;
        if g.x > gmax.x || g.y > gmax.y || g.z > gmax.z {
            return Err(Error::launch(
                kernel,
                format!("grid {g:?} exceeds the device's maximum {gmax:?}"),
            ));
        }
        let smem = self.shared_mem_bytes as u64 + k.static_shared_bytes as u64;
        if smem > dev.max_shared_per_block_optin as u64 {
            return Err(Error::launch(
                kernel,
                format!(
                    "{} bytes of dynamic + {} bytes of static shared memory exceed the device's {} per block",
                    self.shared_mem_bytes, k.static_shared_bytes, dev.max_shared_per_block_optin
                ),
            ));
        }
        Ok(())
    }
}

/// The device limits launches are checked against (queried once per device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Compute capability, e.g. `(8, 0)` for A100, `(9, 0)` for H100.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads in a warp (32).
    pub warp_size: u32,
    /// Most threads in a block.
    pub max_threads_per_block: u32,
    /// Largest block extents.
    pub max_block: Dim3,
    /// Largest grid extents.
    pub max_grid: Dim3,
    /// Shared memory a block gets without opting in (48 KiB).
    pub max_shared_per_block: u32,
    /// Shared memory a block can opt into (camel opts in automatically when a launch needs it).
    pub max_shared_per_block_optin: u32,
    /// Shared memory of one SM, shared by its resident blocks (228 KiB on the H100; the driver
    /// also reserves 1 KiB a block).
    pub max_shared_per_sm: u32,
}

/// A kernel's own limits, from the driver's function attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLimits {
    /// Most threads per block this kernel can launch with (register use lowers it).
    pub max_threads_per_block: u32,
    /// Statically declared `__shared__` bytes.
    pub static_shared_bytes: u32,
    /// Registers per thread.
    pub num_regs: u32,
}

impl KernelLimits {
    /// How many blocks of `threads` threads, with `dynamic_smem` bytes of dynamic shared memory,
    /// fit on one multiprocessor of `d` at once by this kernel's registers (64 Ki a
    /// multiprocessor from sm_80 to sm_90, allocated 256 a warp) and shared memory (static plus
    /// dynamic, plus the 1 KiB the driver reserves a block). Caps on threads and blocks a
    /// multiprocessor are the caller's.
    pub fn blocks_per_sm(&self, d: &DeviceLimits, threads: u32, dynamic_smem: u32) -> u32 {
        let warps = threads.div_ceil(32).max(1);
        let regs_per_warp = (self.num_regs * 32).next_multiple_of(256).max(256);
        let by_regs = 65_536 / (regs_per_warp * warps);
        let by_smem = d.max_shared_per_sm / (self.static_shared_bytes + dynamic_smem + 1024);
        by_regs.min(by_smem)
    }
}

/// A raw device address (`CUdeviceptr`), as kernels receive it. Launchers take these rather
/// than buffers so they can address sub-ranges; [`crate::Buffer::ptr`] gives one.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, DeviceCopy)]
pub struct DevPtr(pub u64);

impl DevPtr {
    /// The null device pointer.
    pub const NULL: DevPtr = DevPtr(0);

    /// The raw `CUdeviceptr`.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// This address plus `bytes`.
    pub const fn byte_add(self, bytes: usize) -> DevPtr {
        DevPtr(self.0 + bytes as u64)
    }

    /// This address plus `count` elements of `T`.
    pub const fn add<T>(self, count: usize) -> DevPtr {
        self.byte_add(count * std::mem::size_of::<T>())
    }
}

/// Plain data: `Copy`, no padding, every bit pattern valid. Such values can be copied to and
/// from the device byte for byte ([`crate::CudaDevice::htod`], [`crate::CudaDevice::dtoh`]).
/// Kernel arguments need less, cust's [`DeviceCopy`] (no references to host memory): it allows
/// `bool` or `Option<T>`, which a copy back from the device could fill with invalid bits, so
/// host copies keep this stricter trait.
///
/// # Safety
/// Implement only for types meeting that description.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => { $(unsafe impl Pod for $t {})* };
}
pod!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    usize,
    isize,
    f32,
    f64,
    half::f16,
    half::bf16,
    DevPtr
);

pub use cust_core::DeviceCopy;
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// A value that can be passed to a kernel parameter of the same size and layout: every
/// [`DeviceCopy`] type (derive it with `#[derive(Clone, Copy, DeviceCopy)]` on a `#[repr(C)]`
/// struct passed by value), [`DevPtr`] included.
pub trait KernelArg {
    /// Address of the value, as `cuLaunchKernel` wants it.
    fn as_kernel_param(&self) -> *mut c_void;
}

impl<T: DeviceCopy> KernelArg for T {
    fn as_kernel_param(&self) -> *mut c_void {
        self as *const T as *mut c_void
    }
}

/// Most arguments a kernel launch may pass.
pub const MAX_KERNEL_ARGS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn a100() -> DeviceLimits {
        DeviceLimits {
            compute_capability: (8, 0),
            sm_count: 108,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_block: Dim3::xyz(1024, 1024, 64),
            max_grid: Dim3::xyz(i32::MAX as u32, 65_535, 65_535),
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 163 * 1024,
            max_shared_per_sm: 164 * 1024,
        }
    }

    const K: KernelLimits = KernelLimits {
        max_threads_per_block: 1024,
        static_shared_bytes: 0,
        num_regs: 16,
    };

    #[test]
    fn launch_1d_covers_and_caps() {
        assert_eq!(launch_1d(0).grid, Dim3::x(1));
        assert_eq!(launch_1d(1).grid, Dim3::x(1));
        assert_eq!(launch_1d(256).grid, Dim3::x(1));
        assert_eq!(launch_1d(257).grid, Dim3::x(2));
        assert_eq!(launch_1d(usize::MAX).grid, Dim3::x(GRID_1D_CAP));
        assert_eq!(launch_1d(1000).block, Dim3::x(BLOCK_1D));
        assert!(launch_1d(1 << 40).validate("k", &a100(), &K).is_ok());
    }

    #[test]
    fn bad_configs_name_the_kernel() {
        let dev = a100();
        let cases = [
            LaunchConfig::new(1, 2048),
            LaunchConfig::new(1, (32, 32, 2)),
            LaunchConfig::new(1, (1, 1, 128)),
            LaunchConfig::new((1, 70_000), 32),
            LaunchConfig::new(0, 32),
            LaunchConfig::new(1, 32).with_shared_mem(200 * 1024),
        ];
        for cfg in cases {
            let err = cfg.validate("elementwise::fill_f32", &dev, &K).unwrap_err();
            assert!(matches!(err, Error::LaunchConfig { .. }), "{err:?}");
            assert!(err.to_string().contains("elementwise::fill_f32"), "{err}");
        }
        let heavy = KernelLimits {
            max_threads_per_block: 512,
            static_shared_bytes: 40_000,
            num_regs: 128,
        };
        let err = LaunchConfig::new(1, 1024)
            .validate("k", &dev, &heavy)
            .unwrap_err();
        assert!(err.to_string().contains("128 registers"), "{err}");
        let err = LaunchConfig::new(1, 256)
            .with_shared_mem(130_000)
            .validate("k", &dev, &heavy)
            .unwrap_err();
        assert!(err.to_string().contains("static shared memory"), "{err}");
        assert!(LaunchConfig::new(1, 256)
            .with_shared_mem(100_000)
            .validate("k", &dev, &K)
            .is_ok());
    }

    #[test]
    fn dev_ptr_arithmetic_and_params() {
        let p = DevPtr(0x1000);
        assert_eq!(p.add::<f32>(4), DevPtr(0x1010));
        assert_eq!(p.byte_add(1).raw(), 0x1001);
        let v = 7u64;
        assert_eq!(v.as_kernel_param() as usize, &v as *const u64 as usize);
        assert_eq!(p.as_kernel_param() as usize, &p as *const DevPtr as usize);
    }
}
