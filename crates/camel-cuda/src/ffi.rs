//! The CUDA driver entry points camel-cuda calls, declared by hand.
//!
//! `cust` (through `cust_raw`) is what links `libcuda` (its build script emits `-lcuda` and the
//! search path from `CUDA_LIBRARY_PATH`), but its bindings come from CUDA 11.4 headers and type
//! `CUresult` as a Rust `enum`: a newer driver returning an error code that 11.4 did not know
//! would be undefined behaviour. Here every `CUresult` is a plain `u32`, and every enum argument
//! a plain integer with the value from `cuda.h`. All functions but two are present in CUDA 11.4;
//! `cuLaunchKernelEx` (programmatic dependent launch) and `cuTensorMapEncodeTiled` (the tensor
//! maps of Hopper's TMA copies) came with CUDA 12.0. The kernels' PTX (version 9.0) needs a
//! CUDA 13.0 driver anyway, and the no-driver stub provides every one.
//!
//! Without the `cuda` feature the same functions exist as Rust functions that return
//! `CUDA_ERROR_NO_DEVICE`, so the rest of the crate has one code path and no `cfg`.
//!
//! `cargo xtask cuda-stub` reads the `fn cu…(` names below into the stub's symbol list.
#![allow(non_snake_case, dead_code)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

pub type CUresult = u32;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUevent = *mut c_void;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;

pub const CU_STREAM_NON_BLOCKING: c_uint = 1;

// CUdevice_attribute
pub const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: c_int = 1;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: c_int = 2;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: c_int = 3;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: c_int = 4;
pub const CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: c_int = 5;
pub const CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: c_int = 6;
pub const CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: c_int = 7;
pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: c_int = 8;
pub const CU_DEVICE_ATTRIBUTE_WARP_SIZE: c_int = 10;
pub const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: c_int = 81;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;
pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;

// CUfunction_attribute
pub const CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: c_int = 0;
pub const CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
pub const CU_FUNC_ATTRIBUTE_NUM_REGS: c_int = 4;
pub const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;

// CUlaunchAttributeID
pub const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: c_uint = 6;

/// `CUlaunchAttributeValue`: a union of 64 bytes; the int-valued attributes (such as
/// `programmaticStreamSerializationAllowed`) sit at offset 0.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct CUlaunchAttributeValue {
    pub words: [c_int; 16],
}

/// `CUlaunchAttribute` (72 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUlaunchAttribute {
    pub id: c_uint,
    pub pad: [u8; 4],
    pub value: CUlaunchAttributeValue,
}

/// `CUlaunchConfig` (56 bytes), for `cuLaunchKernelEx`.
#[repr(C)]
pub struct CUlaunchConfig {
    pub grid_dim_x: c_uint,
    pub grid_dim_y: c_uint,
    pub grid_dim_z: c_uint,
    pub block_dim_x: c_uint,
    pub block_dim_y: c_uint,
    pub block_dim_z: c_uint,
    pub shared_mem_bytes: c_uint,
    pub stream: CUstream,
    pub attrs: *mut CUlaunchAttribute,
    pub num_attrs: c_uint,
}

const _: () = assert!(std::mem::size_of::<CUlaunchAttribute>() == 72);
const _: () = assert!(std::mem::size_of::<CUlaunchConfig>() == 56);

// CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
// CUtensorMapFloatOOBfill
pub const CU_TENSOR_MAP_DATA_TYPE_FLOAT16: c_uint = 6;
pub const CU_TENSOR_MAP_DATA_TYPE_FLOAT32: c_uint = 7;
pub const CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: c_uint = 9;
pub const CU_TENSOR_MAP_INTERLEAVE_NONE: c_uint = 0;
pub const CU_TENSOR_MAP_SWIZZLE_128B: c_uint = 3;
pub const CU_TENSOR_MAP_L2_PROMOTION_L2_256B: c_uint = 3;
pub const CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: c_uint = 0;

// CUjit_option
pub const CU_JIT_ERROR_LOG_BUFFER: c_uint = 5;
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_uint = 6;

macro_rules! driver_api {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        #[cfg(feature = "cuda")]
        #[link(name = "cuda")]
        extern "C" {
            $(pub fn $name($($arg: $ty),*) -> CUresult;)*
        }

        $(
            #[cfg(not(feature = "cuda"))]
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> CUresult {
                $(let _ = $arg;)*
                CUDA_ERROR_NO_DEVICE
            }
        )*
    };
}

driver_api! {
    fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char);
    fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char);
    fn cuInit(flags: c_uint);
    fn cuDriverGetVersion(version: *mut c_int);
    fn cuDeviceGetCount(count: *mut c_int);
    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int);
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice);
    fn cuDeviceGetAttribute(pi: *mut c_int, attrib: c_int, dev: CUdevice);
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice);
    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice);
    fn cuCtxSetCurrent(ctx: CUcontext);
    fn cuStreamCreate(stream: *mut CUstream, flags: c_uint);
    fn cuStreamSynchronize(stream: CUstream);
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize);
    fn cuMemFree_v2(dptr: CUdeviceptr);
    fn cuMemcpyHtoDAsync_v2(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    );
    fn cuMemcpyDtoHAsync_v2(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    fn cuMemcpyDtoDAsync_v2(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream);
    fn cuModuleLoadDataEx(
        module: *mut CUmodule,
        image: *const c_void,
        num_options: c_uint,
        options: *mut c_uint,
        option_values: *mut *mut c_void,
    );
    fn cuModuleGetFunction(
        func: *mut CUfunction,
        module: CUmodule,
        name: *const c_char,
    );
    fn cuFuncGetAttribute(pi: *mut c_int, attrib: c_int, func: CUfunction);
    fn cuFuncSetAttribute(func: CUfunction, attrib: c_int, value: c_int);
    fn cuLaunchKernel(
        func: CUfunction,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_mem_bytes: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    fn cuLaunchKernelEx(
        config: *const CUlaunchConfig,
        func: CUfunction,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    fn cuEventCreate(event: *mut CUevent, flags: c_uint);
    fn cuEventRecord(event: CUevent, stream: CUstream);
    fn cuEventSynchronize(event: CUevent);
    fn cuEventQuery(event: CUevent);
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);
    fn cuEventDestroy_v2(event: CUevent);
    fn cuTensorMapEncodeTiled(
        tensor_map: *mut c_void,
        data_type: c_uint,
        rank: c_uint,
        global_address: *mut c_void,
        global_dim: *const u64,
        global_strides: *const u64,
        box_dim: *const u32,
        element_strides: *const u32,
        interleave: c_uint,
        swizzle: c_uint,
        l2_promotion: c_uint,
        oob_fill: c_uint,
    );
}
