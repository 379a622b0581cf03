//! Tensor maps for Hopper's TMA copy engine (`cp.async.bulk.tensor`).
//!
//! A TMA load copies a whole box of a matrix from global into shared memory in one instruction,
//! zero-filling what lies outside the matrix and swizzling the rows on the way. The geometry
//! (base address, sizes, strides, box, swizzle) is a 128-byte `CUtensorMap` the driver encodes
//! on the host; the kernel receives it by value as a `__grid_constant__` parameter.

use crate::ffi;
use crate::kernels::shape::Elem;
use crate::{DevPtr, DeviceCopy, Error, Result};

/// An encoded `CUtensorMap` (opaque, 64-byte aligned), passed to a kernel by value.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    words: [u64; 16],
}

// SAFETY: plain bytes with no pointers into host memory; the kernel parameter has the same size
// and alignment (`const __grid_constant__ wg::TmaMap`, kernels/matmul/wgmma.cuh).
unsafe impl DeviceCopy for TensorMap {}

/// A batch of row-major matrices as TMA sees them: `rows` rows of `inner` contiguous elements of
/// type `elem` (f16, bf16 or f32), `batch` matrices `batch_stride` elements apart (a stride of
/// 0: one matrix every batch reads).
#[derive(Clone, Copy, Debug)]
pub struct Matrices {
    /// Element type.
    pub elem: Elem,
    /// First element.
    pub base: DevPtr,
    /// Contiguous elements a row (also the row stride).
    pub inner: usize,
    /// Rows a matrix.
    pub rows: usize,
    /// Matrices.
    pub batch: usize,
    /// Elements from one matrix to the next; 0 broadcasts one matrix.
    pub batch_stride: usize,
}

impl Matrices {
    /// Whether TMA can address these matrices: 16-byte aligned base, rows and batch stride.
    pub fn tma_compatible(&self) -> bool {
        let per_16 = 16 / self.elem.bytes();
        self.base.0 % 16 == 0
            && self.inner % per_16 == 0
            && self.batch_stride % per_16 == 0
            && self.inner > 0
            && self.rows > 0
    }
}

/// The tensor-map data type of `elem` (f16, bf16 or f32), else an error naming `op`.
fn data_type(op: &str, elem: Elem) -> Result<std::ffi::c_uint> {
    match elem {
        Elem::F16 => Ok(ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
        Elem::BF16 => Ok(ffi::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
        Elem::F32 => Ok(ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32),
        other => Err(Error::invalid(
            op,
            format!("tensor maps here hold f16, bf16 or f32 elements, not {other:?}"),
        )),
    }
}

/// `cuTensorMapEncodeTiled` of a rank-`N` map (`dims`, byte `strides` of dims 1 … N − 1, `boxes`)
/// at `base`: swizzled in 128-byte rows, zero-filled outside the tensor. `what` names the
/// tensor in an error.
fn encode<const N: usize>(
    data_type: std::ffi::c_uint,
    base: DevPtr,
    dims: [u64; N],
    strides: &[u64],
    boxes: [u32; N],
    what: &dyn Fn() -> String,
) -> Result<TensorMap> {
    assert_eq!(strides.len() + 1, N, "a stride for every dim but the first");
    let element_strides = [1u32; N];
    let mut map = TensorMap { words: [0; 16] };
    // SAFETY: `map` is 128 writable bytes, 64-byte aligned; `dims`, `boxes` and
    // `element_strides` have `N` entries and `strides` N − 1 (asserted); the base is a device
    // address the caller keeps alive while kernels use the map.
    let code = unsafe {
        ffi::cuTensorMapEncodeTiled(
            (&mut map as *mut TensorMap).cast(),
            data_type,
            N as std::ffi::c_uint,
            base.0 as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            ffi::CU_TENSOR_MAP_INTERLEAVE_NONE,
            ffi::CU_TENSOR_MAP_SWIZZLE_128B,
            ffi::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            ffi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if code != ffi::CUDA_SUCCESS {
        return Err(Error::Driver {
            op: format!("cuTensorMapEncodeTiled({})", what()),
            code,
            msg: crate::device::describe(code),
        });
    }
    Ok(map)
}

/// Encodes a 3-D tensor map (contiguous dimension, rows, batch) of `m` with boxes of
/// `box_inner × box_rows` elements (one matrix deep), swizzled in 128-byte rows, zero-filled
/// outside the matrices.
pub fn encode_swizzled(m: &Matrices, box_inner: u32, box_rows: u32) -> Result<TensorMap> {
    let data_type = data_type("tma::encode_swizzled", m.elem)?;
    let size = m.elem.bytes();
    if !m.tma_compatible() || box_inner as usize * size > 128 {
        return Err(Error::invalid(
            "tma::encode_swizzled",
            format!(
                "{m:?} with a {box_inner}×{box_rows} box: TMA needs a 16-byte aligned base, \
                 rows and batch stride (multiples of 16 bytes), and a box row of at most 128 bytes"
            ),
        ));
    }
    let row_bytes = (m.inner * size) as u64;
    let (batch, batch_bytes) = if m.batch_stride == 0 {
        // one matrix: the batch extent is 1 and its stride is never used
        (1, (row_bytes * m.rows as u64).next_multiple_of(16))
    } else {
        (m.batch as u64, (m.batch_stride * size) as u64)
    };
    let dims = [m.inner as u64, m.rows as u64, batch];
    let what = || format!("{m:?}, box {box_inner}×{box_rows}");
    encode(
        data_type,
        m.base,
        dims,
        &[row_bytes, batch_bytes],
        [box_inner, box_rows, 1],
        &what,
    )
}

/// Encodes the 4-D tensor map (feature, token, head, batch) of `b × h` sequences of `t` tokens
/// of `d` contiguous elements of `elem` at `base`, `strides` elements apart along token, head and
/// batch, with boxes of `box_inner` features × `box_rows` tokens of one head, swizzled in
/// 128-byte rows and zero-filled past each sequence's end (attention's q, k and v views).
pub fn encode_heads(
    elem: Elem,
    base: DevPtr,
    [d, t, h, b]: [usize; 4],
    strides: [usize; 3],
    box_inner: u32,
    box_rows: u32,
) -> Result<TensorMap> {
    if !matches!(elem, Elem::F16 | Elem::BF16) {
        return Err(Error::invalid(
            "tma::encode_heads",
            format!("attention tensor maps hold f16 or bf16 elements, not {elem:?}"),
        ));
    }
    let data_type = data_type("tma::encode_heads", elem)?;
    let size = elem.bytes();
    let per_16 = 16 / size;
    if base.0 % 16 != 0
        || d % per_16 != 0
        || strides.iter().any(|s| s % per_16 != 0)
        || box_inner as usize * size > 128
        || [d, t, h, b].contains(&0)
    {
        return Err(Error::invalid(
            "tma::encode_heads",
            format!(
                "[{d}, {t}, {h}, {b}] with strides {strides:?} at {:#x}, box {box_inner}×{box_rows}: \
                 TMA needs a 16-byte aligned base and strides, and a box row of at most 128 bytes",
                base.0
            ),
        ));
    }
    let dims = [d as u64, t as u64, h as u64, b as u64];
    let bytes = strides.map(|s| (s * size) as u64);
    let what = || format!("[{d}, {t}, {h}, {b}], strides {strides:?}");
    encode(
        data_type,
        base,
        dims,
        &bytes,
        [box_inner, box_rows, 1, 1],
        &what,
    )
}
