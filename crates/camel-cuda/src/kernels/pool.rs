//! Launchers for `kernels/pool/01_thread_per_output.cu`: 2-D max and average pooling over NCHW,
//! forward and backward. The forwards run a thread per output element; the backwards a thread
//! per input element that gathers from the windows covering it (no atomics, so the result is
//! the same on every run). Each takes the element type of its float tensors (`elem`: f32, f16 or
//! bf16), which the kernels widen to f32 as they read and round once as they write.

use super::launch_elems;
use super::rows::KernelName;
use super::shape::Elem;
use crate::{CudaDevice, DevPtr, Error, Result};

const MODULE: &str = "pool/01_thread_per_output";

/// The geometry of a 2-D pooling: input `[n, c, h, w]`, windows `kh × kw` every `sh`, `sw`
/// with `ph`, `pw` of padding, output `[n, c, oh, ow]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PoolGeom {
    /// Images.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Window height.
    pub kh: usize,
    /// Window width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Padding above and below.
    pub ph: usize,
    /// Padding left and right.
    pub pw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl PoolGeom {
    /// Output elements.
    pub fn out_len(&self) -> usize {
        self.n * self.c * self.oh * self.ow
    }

    /// Input elements.
    pub fn in_len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }

    fn args(&self, kernel: &str) -> Result<PoolArgs> {
        if self.kh == 0 || self.kw == 0 || self.sh == 0 || self.sw == 0 {
            return Err(Error::LaunchConfig {
                kernel: kernel.to_string(),
                msg: format!("inconsistent pooling geometry {self:?}"),
            });
        }
        let i = |v: usize| v as i64;
        Ok(PoolArgs {
            n: i(self.n),
            c: i(self.c),
            h: i(self.h),
            w: i(self.w),
            kh: i(self.kh),
            kw: i(self.kw),
            sh: i(self.sh),
            sw: i(self.sw),
            ph: i(self.ph),
            pw: i(self.pw),
            oh: i(self.oh),
            ow: i(self.ow),
        })
    }
}

/// `PoolArgs` of the kernels, passed by value.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct PoolArgs {
    n: i64,
    c: i64,
    h: i64,
    w: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    oh: i64,
    ow: i64,
}

/// Max pooling: `y` the maximum of each window (NaN wins), `idx` (i64) its offset `iy·w + ix`
/// in the input plane (the first maximum in row-major window order on ties).
pub fn max_pool2d(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    idx: DevPtr,
    g: &PoolGeom,
    elem: Elem,
) -> Result<()> {
    let name = KernelName::new(format_args!("max_pool2d_{}", elem.suffix()));
    let name = name.as_str();
    let a = g.args(name)?;
    // SAFETY: matches `max_pool2d_{dtype}(const T*, T*, long long*, PoolArgs)`, T `elem`'s type;
    // `x` holds `g.in_len()` elements, `y` and `idx` `g.out_len()`.
    unsafe { launch_elems(dev, MODULE, name, g.out_len(), &[&x, &y, &idx, &a]) }
}

/// Backward of [`max_pool2d`]: `dx[p] = Σ dy[q]` over the outputs `q` whose saved index is `p`.
pub fn max_pool2d_bwd(
    dev: &CudaDevice,
    dy: DevPtr,
    idx: DevPtr,
    dx: DevPtr,
    g: &PoolGeom,
    elem: Elem,
) -> Result<()> {
    let name = KernelName::new(format_args!("max_pool2d_bwd_{}", elem.suffix()));
    let name = name.as_str();
    let a = g.args(name)?;
    // SAFETY: matches `max_pool2d_bwd_{dtype}(const T*, const long long*, T*, PoolArgs)`, T
    // `elem`'s type; `dy` and `idx` hold `g.out_len()` elements, `dx` `g.in_len()`.
    unsafe { launch_elems(dev, MODULE, name, g.in_len(), &[&dy, &idx, &dx, &a]) }
}

/// Average pooling: each window's sum divided by its size (`count_include_pad`) or by the
/// input elements it covers.
pub fn avg_pool2d(
    dev: &CudaDevice,
    x: DevPtr,
    y: DevPtr,
    g: &PoolGeom,
    count_include_pad: bool,
    elem: Elem,
) -> Result<()> {
    let name = KernelName::new(format_args!("avg_pool2d_{}", elem.suffix()));
    let name = name.as_str();
    let a = g.args(name)?;
    let cip = count_include_pad as i32;
    // SAFETY: matches `avg_pool2d_{dtype}(const T*, T*, PoolArgs, int)`, T `elem`'s type; `x`
    // holds `g.in_len()` elements, `y` `g.out_len()`.
    unsafe { launch_elems(dev, MODULE, name, g.out_len(), &[&x, &y, &a, &cip]) }
}

/// Backward of [`avg_pool2d`]: `dx[p] = Σ dy[q] / size(q)` over the windows `q` covering `p`.
pub fn avg_pool2d_bwd(
    dev: &CudaDevice,
    dy: DevPtr,
    dx: DevPtr,
    g: &PoolGeom,
    count_include_pad: bool,
    elem: Elem,
) -> Result<()> {
    let name = KernelName::new(format_args!("avg_pool2d_bwd_{}", elem.suffix()));
    let name = name.as_str();
    let a = g.args(name)?;
    let cip = count_include_pad as i32;
    // SAFETY: matches `avg_pool2d_bwd_{dtype}(const T*, T*, PoolArgs, int)`, T `elem`'s type;
    // `dy` holds `g.out_len()` elements, `dx` `g.in_len()`.
    unsafe { launch_elems(dev, MODULE, name, g.in_len(), &[&dy, &dx, &a, &cip]) }
}
