//! Launchers for `kernels/elementwise/` (one PTX module per ladder step).

use super::rows::KernelName;
use super::shape::Elem;
use super::{dims_array, launch, launch_elems, MAX_DIMS};
use crate::{launch_1d, CudaDevice, DevPtr, Result};

/// PTX module of step 1: `kernels/elementwise/01_thread_per_element.cu`.
const STEP1: &str = "elementwise/01_thread_per_element";
/// PTX module of step 2: `kernels/elementwise/02_vec4.cu`.
const STEP2: &str = "elementwise/02_vec4";

/// `out[i] = value` for `i < n` (`n` floats at `out`).
pub fn fill_f32(dev: &CudaDevice, out: DevPtr, n: usize, value: f32) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `fill_f32(float* out, long long n, float value)`; the caller passes `n`
    // floats of device memory at `out`.
    unsafe { launch_elems(dev, STEP1, "fill_f32", n, &[&out, &ni, &value]) }
}

launchers! {
    // the unary ops of each step (the Unary type)
    (dev: &CudaDevice, x: DevPtr, y: DevPtr, n: usize, code: i32, s: f32);

    /// `y[i] = f(x[i])` for camel-core's unary op `code` (with scalar `s`).
    pub fn unary_f32(..) {
        let ni = n as i64;
        // SAFETY: matches `unary_f32(const float*, float*, long long, int, float)`; n floats each.
        unsafe { launch_elems(dev, STEP1, "unary_f32", n, &[&x, &y, &ni, &code, &s]) }
    }

    /// Step 2 of `unary_f32`: float4 loads and stores. Falls back to step 1 when a pointer is not
    /// 16-byte aligned.
    pub fn unary_vec4_f32(..) {
        if !super::rows::aligned16(&[x, y]) {
            return unary_f32(dev, x, y, n, code, s);
        }
        if n == 0 {
            return Ok(());
        }
        let (cfg, ni) = (vec4_config(n), n as i64);
        // SAFETY: matches `unary_vec4_f32(const float*, float*, long long, int, float)`; aligned.
        unsafe { launch(dev, STEP2, "unary_vec4_f32", cfg, &[&x, &y, &ni, &code, &s]) }
    }
}

launchers! {
    // binary ops (the Binary type)
    (dev: &CudaDevice, a: DevPtr, b: DevPtr, out: DevPtr, n: usize, code: i32);

    /// `out[i] = a[i] op b[i]` for equal shapes.
    pub fn binary_f32(..) {
        binary_elems(dev, "binary_f32", a, b, out, n, code)
    }

    /// Step 1 of the binary ops including [`GELU_BWD`]: one element per thread per iteration.
    pub fn binary2_f32(..) {
        binary_elems(dev, "binary2_f32", a, b, out, n, code)
    }

    /// Step 2 of the same-shape binary ops (and [`GELU_BWD`]): float4. Falls back to step 1 when a
    /// pointer is not 16-byte aligned.
    pub fn binary_vec4_f32(..) {
        if !super::rows::aligned16(&[a, b, out]) {
            return binary2_f32(dev, a, b, out, n, code);
        }
        if n == 0 {
            return Ok(());
        }
        let (cfg, ni) = (vec4_config(n), n as i64);
        let args: [&dyn crate::KernelArg; 5] = [&a, &b, &out, &ni, &code];
        // SAFETY: matches `binary_vec4_f32(const float*, const float*, float*, long long, int)`.
        unsafe { launch(dev, STEP2, "binary_vec4_f32", cfg, &args) }
    }

    /// Step 1's binary ops: GELU backward has its own kernel (`binary2_f32`), the rest
    /// `binary_f32`.
    fn thread_per_element_binary(..) {
        if code == GELU_BWD {
            binary2_f32(dev, a, b, out, n, code)
        } else {
            binary_f32(dev, a, b, out, n, code)
        }
    }
}

/// Launches the step-1 binary kernel `name` (`binary_f32` or `binary2_f32`, which share their
/// parameters), a thread per element.
fn binary_elems(
    dev: &CudaDevice,
    name: &str,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    n: usize,
    code: i32,
) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `binary_f32` / `binary2_f32(const float*, const float*, float*, long long,
    // int)`; the callers pass `n` floats at `a`, `b` and `out`.
    unsafe { launch_elems(dev, STEP1, name, n, &[&a, &b, &out, &ni, &code]) }
}

/// Kernel argument of `binary_bcast_f32` (layout of `BcastArgs` in kernels/elementwise/01_thread_per_element.cu).
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct BcastArgs {
    ndim: i64,
    shape: [i64; MAX_DIMS],
    sa: [i64; MAX_DIMS],
    sb: [i64; MAX_DIMS],
}

#[allow(clippy::too_many_arguments)]
/// `out = a op b` with broadcasting: `sa`/`sb` are the inputs' strides against `out_shape`
/// (0 along broadcast dims).
pub fn binary_bcast_f32(
    dev: &CudaDevice,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    out_shape: &[usize],
    sa: &[usize],
    sb: &[usize],
    code: i32,
) -> Result<()> {
    let n: usize = out_shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let name = "binary_bcast_f32";
    let p = BcastArgs {
        ndim: out_shape.len() as i64,
        shape: dims_array(name, out_shape)?,
        sa: dims_array(name, sa)?,
        sb: dims_array(name, sb)?,
    };
    let ni = n as i64;
    // SAFETY: matches `binary_bcast_f32(const float*, const float*, float*, long long, int, BcastArgs)`;
    // the strides keep every read inside a and b.
    unsafe { launch_elems(dev, STEP1, name, n, &[&a, &b, &out, &ni, &code, &p]) }
}

/// The kernel-name suffix of a 16-bit element type, or an error naming `op`.
fn half_suffix(op: &str, elem: Elem) -> Result<&'static str> {
    match elem {
        Elem::F16 => Ok("f16"),
        Elem::BF16 => Ok("bf16"),
        other => Err(crate::Error::InvalidArgument {
            op: op.into(),
            msg: format!("{other:?} is not a 16-bit float"),
        }),
    }
}

/// `y[i] = f(x[i])` on f16 or bf16 elements (`elem`): widened to f32, the f32 function, rounded
/// once to nearest even. Eight elements a thread in 16-byte words (step 2's form,
/// `unary_vec8_*`) when the pointers are 16-byte aligned, one a thread otherwise.
#[allow(clippy::too_many_arguments)]
pub fn unary_half(
    dev: &CudaDevice,
    elem: Elem,
    x: DevPtr,
    y: DevPtr,
    n: usize,
    code: i32,
    s: f32,
) -> Result<()> {
    let suffix = half_suffix("unary", elem)?;
    if n == 0 {
        return Ok(());
    }
    let ni = n as i64;
    if super::rows::aligned16(&[x, y]) {
        let name = format!("unary_vec8_{suffix}");
        // SAFETY: matches `unary_vec8_f16/bf16(const T*, T*, long long, int, float)`; aligned.
        // two 16-byte words a thread
        let cfg = launch_1d(n.div_ceil(16).max(8));
        return unsafe { launch(dev, STEP2, &name, cfg, &[&x, &y, &ni, &code, &s]) };
    }
    let name = format!("unary_{suffix}");
    // SAFETY: matches `unary_f16/bf16(const T*, T*, long long, int, float)`; n elements each.
    unsafe { launch_elems(dev, STEP1, &name, n, &[&x, &y, &ni, &code, &s]) }
}

/// `out[i] = a[i] op b[i]` on f16 or bf16 elements of equal shapes (the ops of
/// [`binary2_f32`], GELU backward included), computed in f32 and rounded once; eight elements a
/// thread when the pointers are 16-byte aligned (`binary_vec8_*`), one otherwise.
#[allow(clippy::too_many_arguments)]
pub fn binary_half(
    dev: &CudaDevice,
    elem: Elem,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    n: usize,
    code: i32,
) -> Result<()> {
    let suffix = half_suffix("binary", elem)?;
    if n == 0 {
        return Ok(());
    }
    let ni = n as i64;
    if super::rows::aligned16(&[a, b, out]) {
        let name = format!("binary_vec8_{suffix}");
        let args: [&dyn crate::KernelArg; 5] = [&a, &b, &out, &ni, &code];
        // SAFETY: matches `binary_vec8_f16/bf16(const T*, const T*, T*, long long, int)`; aligned.
        return unsafe { launch(dev, STEP2, &name, vec8_config(n), &args) };
    }
    let name = format!("binary2_{suffix}");
    // SAFETY: matches `binary2_f16/bf16(const T*, const T*, T*, long long, int)`.
    unsafe { launch_elems(dev, STEP1, &name, n, &[&a, &b, &out, &ni, &code]) }
}

/// [`binary_bcast_f32`] on f16 or bf16 elements.
#[allow(clippy::too_many_arguments)]
pub fn binary_bcast_half(
    dev: &CudaDevice,
    elem: Elem,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    out_shape: &[usize],
    sa: &[usize],
    sb: &[usize],
    code: i32,
) -> Result<()> {
    let name = format!("binary_bcast_{}", half_suffix("binary", elem)?);
    let n: usize = out_shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let p = BcastArgs {
        ndim: out_shape.len() as i64,
        shape: dims_array("binary_bcast", out_shape)?,
        sa: dims_array("binary_bcast", sa)?,
        sb: dims_array("binary_bcast", sb)?,
    };
    let ni = n as i64;
    // SAFETY: matches `binary_bcast_f16/bf16(const T*, const T*, T*, long long, int, BcastArgs)`;
    // the strides keep every read inside a and b.
    unsafe { launch_elems(dev, STEP1, &name, n, &[&a, &b, &out, &ni, &code, &p]) }
}

/// Kernel argument of `where_*` (layout of `WhereArgs` in kernels/elementwise/01_thread_per_element.cu).
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct WhereArgs {
    ndim: i64,
    shape: [i64; MAX_DIMS],
    sm: [i64; MAX_DIMS],
    sa: [i64; MAX_DIMS],
    sb: [i64; MAX_DIMS],
}

/// `out = mask != 0 ? a : b` elementwise, each operand read through its strides against
/// `out_shape` (0 along broadcast dims); the mask's elements are `[mask_elem]`, the values' (a, b
/// and out) `elem`. One thread per output element (step 1's form in every step).
#[allow(clippy::too_many_arguments)]
pub fn where_select(
    dev: &CudaDevice,
    [mask_elem, elem]: [Elem; 2],
    mask: DevPtr,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    out_shape: &[usize],
    sm: &[usize],
    sa: &[usize],
    sb: &[usize],
) -> Result<()> {
    let n: usize = out_shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let name = KernelName::new(format_args!(
        "where_{}_{}",
        mask_elem.float_suffix("where")?,
        elem.float_suffix("where")?
    ));
    let name = name.as_str();
    let p = WhereArgs {
        ndim: out_shape.len() as i64,
        shape: dims_array(name, out_shape)?,
        sm: dims_array(name, sm)?,
        sa: dims_array(name, sa)?,
        sb: dims_array(name, sb)?,
    };
    let ni = n as i64;
    // SAFETY: matches `where_{M}_{T}(const M*, const T*, const T*, T*, long long, WhereArgs)`;
    // the strides keep every read inside mask, a and b.
    unsafe { launch_elems(dev, STEP1, name, n, &[&mask, &a, &b, &out, &ni, &p]) }
}

/// `y = triu(x, k)` (`upper`) or `tril(x, k)` over the last two dims of `x` viewed as
/// `[n / (rows·cols), rows, cols]`, `n` elements of `elem`: elements outside the triangle are
/// written as 0.
#[allow(clippy::too_many_arguments)]
pub fn triangle(
    dev: &CudaDevice,
    elem: Elem,
    x: DevPtr,
    y: DevPtr,
    n: usize,
    rows: usize,
    cols: usize,
    k: i64,
    upper: bool,
) -> Result<()> {
    let name = KernelName::new(format_args!("triangle_{}", elem.float_suffix("triangle")?));
    let (ni, r, c, up) = (n as i64, rows as i64, cols as i64, upper as i32);
    // SAFETY: matches `triangle_{T}(const T*, T*, long long ×4, int)`; n elements of `elem` each.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            name.as_str(),
            n,
            &[&x, &y, &ni, &r, &c, &k, &up],
        )
    }
}

/// `y = clamp(x, lo, hi)` (`grad == false`) or its derivative mask, 1 where `lo ≤ x ≤ hi`
/// (`grad == true`), for `n` elements of `elem`, computed in f32 and rounded once.
#[allow(clippy::too_many_arguments)]
pub fn clamp(
    dev: &CudaDevice,
    elem: Elem,
    x: DevPtr,
    y: DevPtr,
    n: usize,
    lo: f32,
    hi: f32,
    grad: bool,
) -> Result<()> {
    let name = KernelName::new(format_args!("clamp_{}", elem.float_suffix("clamp")?));
    let (ni, mode) = (n as i64, grad as i32);
    // SAFETY: matches `clamp_{T}(const T*, T*, long long, float, float, int)`; n elements each.
    unsafe {
        launch_elems(
            dev,
            STEP1,
            name.as_str(),
            n,
            &[&x, &y, &ni, &lo, &hi, &mode],
        )
    }
}

/// `out[i] = start + i·step` for `n` i64 values at `out`; the caller checks that the last value
/// fits in i64.
pub fn arange_i64(dev: &CudaDevice, out: DevPtr, n: usize, start: i64, step: i64) -> Result<()> {
    let ni = n as i64;
    // SAFETY: matches `arange_i64(long long*, long long, long long, long long)`; n i64 at out.
    unsafe { launch_elems(dev, STEP1, "arange_i64", n, &[&out, &ni, &start, &step]) }
}

/// Binary op code of the fused GELU backward: `out = b · gelu'(a)` (a = x, b = upstream grad).
pub const GELU_BWD: i32 = 5;

/// A thread per float4 of `n` floats; the first `n % 4` threads of the grid also do the tail, so
/// at least that many threads.
fn vec4_config(n: usize) -> crate::LaunchConfig {
    launch_1d(n.div_ceil(4).max(4))
}

/// A grid for eight elements a thread (at least 8 threads, for the tail).
pub(crate) fn vec8_config(n: usize) -> crate::LaunchConfig {
    launch_1d(n.div_ceil(8).max(8))
}

// ------------------------------------------------------------------ the ladder's table

/// A unary launcher: `(dev, x, y, n, code, scalar)`.
pub type Unary = fn(&CudaDevice, DevPtr, DevPtr, usize, i32, f32) -> Result<()>;
/// A same-shape binary launcher: `(dev, a, b, out, n, code)`.
pub type Binary = fn(&CudaDevice, DevPtr, DevPtr, DevPtr, usize, i32) -> Result<()>;

/// The launchers of one step of the elementwise ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Elementwise`]'s table).
    pub step: super::rows::Step,
    /// Its unary launcher.
    pub unary: Unary,
    /// Its same-shape binary launcher.
    pub binary: Binary,
}

/// The elementwise ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 2] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            unary: unary_f32,
            binary: thread_per_element_binary,
        },
        Kernels {
            step: Step::Two,
            unary: unary_vec4_f32,
            binary: binary_vec4_f32,
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}
