//! Launchers for `kernels/shape/copy.cu`: strided gather, padding, dtype casts.

use super::{dims_array, launch_elems, MAX_DIMS};
use crate::{CudaDevice, DevPtr, Error, Result};

const MODULE: &str = "shape/copy";

/// The kernel of `op` for elements of `elem_bytes`: `b16` (2 bytes), `f32` (4 bytes) or `i64`
/// (8 bytes); an error naming `op` for any other size.
fn by_elem_size(
    op: &str,
    elem_bytes: usize,
    f32: &'static str,
    i64: &'static str,
    b16: &'static str,
) -> Result<&'static str> {
    match elem_bytes {
        2 => Ok(b16),
        4 => Ok(f32),
        8 => Ok(i64),
        _ => Err(Error::InvalidArgument {
            op: op.into(),
            msg: format!("unsupported element size {elem_bytes}"),
        }),
    }
}

#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct StridedArgs {
    ndim: i64,
    offset: i64,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}

/// `dst[i] = src[offset + Σ idx_d·strides[d]]` over the multi-indices of `shape`;
/// `elem_bytes` selects the 16-bit (2), f32 (4) or i64 (8) kernel.
pub fn copy_strided(
    dev: &CudaDevice,
    src: DevPtr,
    dst: DevPtr,
    shape: &[usize],
    strides: &[usize],
    offset: usize,
    elem_bytes: usize,
) -> Result<()> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let name = by_elem_size(
        "copy_strided",
        elem_bytes,
        "copy_strided_f32",
        "copy_strided_i64",
        "copy_strided_b16",
    )?;
    let a = StridedArgs {
        ndim: shape.len() as i64,
        offset: offset as i64,
        shape: dims_array(name, shape)?,
        strides: dims_array(name, strides)?,
    };
    let ni = n as i64;
    // SAFETY: matches `copy_strided_*(const T*, T*, long long, StridedArgs)`.
    unsafe { launch_elems(dev, MODULE, name, n, &[&src, &dst, &ni, &a]) }
}

#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct Strided2Args {
    ndim: i64,
    offset: i64,
    dst_offset: i64,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
    dst_strides: [i64; MAX_DIMS],
}

/// A strided view of `src` into a strided view of `dst`, over the multi-indices of `shape`:
/// `dst[dst_offset + Σ idx_d·dst_strides[d]] = src[offset + Σ idx_d·strides[d]]`.
/// `elem_bytes` selects the 16-bit (2), f32 (4) or i64 (8) kernel.
#[allow(clippy::too_many_arguments)]
pub fn copy_strided_into(
    dev: &CudaDevice,
    src: DevPtr,
    shape: &[usize],
    strides: &[usize],
    offset: usize,
    dst: DevPtr,
    dst_strides: &[usize],
    dst_offset: usize,
    elem_bytes: usize,
) -> Result<()> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let (f32, i64, b16) = (
        "copy_strided2_f32",
        "copy_strided2_i64",
        "copy_strided2_b16",
    );
    let name = by_elem_size("copy_strided_into", elem_bytes, f32, i64, b16)?;
    let a = Strided2Args {
        ndim: shape.len() as i64,
        offset: offset as i64,
        dst_offset: dst_offset as i64,
        shape: dims_array(name, shape)?,
        strides: dims_array(name, strides)?,
        dst_strides: dims_array(name, dst_strides)?,
    };
    let ni = n as i64;
    // SAFETY: matches `copy_strided2_*(const T*, T*, long long, Strided2Args)`.
    unsafe { launch_elems(dev, MODULE, name, n, &[&src, &dst, &ni, &a]) }
}

#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct PadArgs {
    ndim: i64,
    out_shape: [i64; MAX_DIMS],
    src_shape: [i64; MAX_DIMS],
    before: [i64; MAX_DIMS],
}

/// Constant padding of a `src_shape` tensor of `elem` by `before`/`after` per dim; `value`
/// rounds once to a 16-bit `elem` (`pad_{f32,f16,bf16}`).
#[allow(clippy::too_many_arguments)]
pub fn pad(
    dev: &CudaDevice,
    elem: Elem,
    src: DevPtr,
    dst: DevPtr,
    src_shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: f32,
) -> Result<()> {
    let out: Vec<usize> = (0..src_shape.len())
        .map(|d| src_shape[d] + before[d] + after[d])
        .collect();
    let n: usize = out.iter().product();
    if n == 0 {
        return Ok(());
    }
    let name = super::rows::KernelName::new(format_args!("pad_{}", elem.float_suffix("pad")?));
    let name = name.as_str();
    let a = PadArgs {
        ndim: out.len() as i64,
        out_shape: dims_array(name, &out)?,
        src_shape: dims_array(name, src_shape)?,
        before: dims_array(name, before)?,
    };
    let ni = n as i64;
    // SAFETY: matches `pad_{T}(const T*, T*, long long, PadArgs, float)`; the shapes give the
    // element counts at src and dst.
    unsafe { launch_elems(dev, MODULE, name, n, &[&src, &dst, &ni, &a, &value]) }
}

/// An element type the casts know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `float`.
    F32,
    /// `long long`.
    I64,
    /// `__half`.
    F16,
    /// `__nv_bfloat16`.
    BF16,
}

impl Elem {
    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::I64 => 8,
            Elem::F16 | Elem::BF16 => 2,
        }
    }

    /// The suffix of a kernel templated over the float types (`f32`, `f16`, `bf16`), or an
    /// error naming `op` for i64.
    pub fn float_suffix(self, op: &str) -> Result<&'static str> {
        match self {
            Elem::I64 => Err(Error::InvalidArgument {
                op: op.into(),
                msg: "i64 elements: the kernel takes f32, f16 or bf16".into(),
            }),
            e => Ok(e.suffix()),
        }
    }

    /// The kernel-name suffix: `f32`, `i64`, `f16`, `bf16`.
    pub fn suffix(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::I64 => "i64",
            Elem::F16 => "f16",
            Elem::BF16 => "bf16",
        }
    }
}

/// `y[i] = x[i]` converted from `from` to `to` through f32: narrowing rounds to nearest even,
/// to i64 truncates toward zero. `from == to` is an error (a copy is not a cast).
pub fn cast(dev: &CudaDevice, x: DevPtr, y: DevPtr, n: usize, from: Elem, to: Elem) -> Result<()> {
    if from == to {
        return Err(Error::InvalidArgument {
            op: "cast".into(),
            msg: format!("{from:?} to itself"),
        });
    }
    if n == 0 {
        return Ok(());
    }
    let ni = n as i64;
    // between f32, f16 and bf16, eight elements a thread in 16-byte accesses when aligned
    if from != Elem::I64 && to != Elem::I64 && super::rows::aligned16(&[x, y]) {
        let name = format!("cast_vec8_{}_{}", from.suffix(), to.suffix());
        let cfg = super::elementwise::vec8_config(n);
        // SAFETY: matches `cast_vec8_<from>_<to>(const S*, D*, long long)`; aligned.
        return unsafe { super::launch(dev, MODULE, &name, cfg, &[&x, &y, &ni]) };
    }
    let name = format!("cast_{}_{}", from.suffix(), to.suffix());
    // SAFETY: matches `cast_<from>_<to>(const S*, D*, long long)`.
    unsafe { launch_elems(dev, MODULE, &name, n, &[&x, &y, &ni]) }
}

/// `out[i] = value` for `n` 16-bit elements.
pub fn fill_b16(dev: &CudaDevice, out: DevPtr, n: usize, value: u16) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let ni = n as i64;
    // SAFETY: matches `fill_b16(unsigned short*, long long, unsigned short)`.
    unsafe { launch_elems(dev, MODULE, "fill_b16", n, &[&out, &ni, &value]) }
}
