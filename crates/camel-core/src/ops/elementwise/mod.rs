//! Elementwise ops: unary functions (relu, gelu, exp, scalar ops, …) and binary ones (add, mul,
//! …) that broadcast NumPy-style; a binary op's backward sums the gradient back to each input's
//! shape (`sum_to`). The masking family (comparisons, `where_cond`, `masked_fill`, `triu`/`tril`,
//! `clamp`, `abs`, `minimum`/`maximum`, the i64 `arange`) is in `mask.rs`. The CPU reference is
//! `cpu.rs`, the CUDA launches `cuda.rs`.

use super::{expect_float, same_device, same_dtype};
use crate::autocast::promote;
use crate::shape::broadcast_shape;
use crate::storage::{dispatch, Storage};
use crate::{Result, Tensor};

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
mod mask;

/// Elementwise functions of one tensor (and an optional scalar).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `max(x, 0)`; NaN stays NaN (as `torch.relu`).
    Relu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// GELU, tanh approximation.
    Gelu,
    /// Derivative of the tanh-approximated GELU with respect to its input.
    GeluGrad,
    /// `exp(x)`.
    Exp,
    /// Natural logarithm `ln(x)`.
    Log,
    /// 0 where x ≤ 0, else 1 (the derivative of ReLU). NaN gives 1, so the gradient at a NaN
    /// input passes through as in PyTorch's `threshold_backward`.
    Step,
    /// `sqrt(x)`.
    Sqrt,
    /// `x * x`.
    Square,
    /// `x + c` for the scalar `c`.
    AddScalar(f32),
    /// `x * c` for the scalar `c`.
    MulScalar(f32),
    /// `x^c` for the scalar exponent `c`.
    PowScalar(f32),
    /// 1 where `x == c`, else 0.
    EqScalar(f32),
    /// 1 where `x != c`, else 0 (1 for a NaN `x`).
    NeScalar(f32),
    /// 1 where `x < c`, else 0.
    LtScalar(f32),
    /// 1 where `x <= c`, else 0.
    LeScalar(f32),
    /// 1 where `x > c`, else 0.
    GtScalar(f32),
    /// 1 where `x >= c`, else 0.
    GeScalar(f32),
    /// `|x|`.
    Abs,
    /// The sign of `x`: 1, -1, 0 at ±0; NaN stays NaN.
    Sign,
}

impl UnaryOp {
    /// The op code and scalar passed to the CUDA kernel (kept in sync with kernels/elementwise/elementwise.cuh).
    pub fn code(&self) -> (i32, f32) {
        match *self {
            UnaryOp::Neg => (0, 0.0),
            UnaryOp::Relu => (1, 0.0),
            UnaryOp::Sigmoid => (2, 0.0),
            UnaryOp::Tanh => (3, 0.0),
            UnaryOp::Gelu => (4, 0.0),
            UnaryOp::GeluGrad => (5, 0.0),
            UnaryOp::Exp => (6, 0.0),
            UnaryOp::Log => (7, 0.0),
            UnaryOp::Step => (8, 0.0),
            UnaryOp::Sqrt => (9, 0.0),
            UnaryOp::Square => (10, 0.0),
            UnaryOp::AddScalar(s) => (11, s),
            UnaryOp::MulScalar(s) => (12, s),
            UnaryOp::PowScalar(s) => (13, s),
            UnaryOp::EqScalar(s) => (14, s),
            UnaryOp::NeScalar(s) => (15, s),
            UnaryOp::LtScalar(s) => (16, s),
            UnaryOp::LeScalar(s) => (17, s),
            UnaryOp::GtScalar(s) => (18, s),
            UnaryOp::GeScalar(s) => (19, s),
            UnaryOp::Abs => (20, 0.0),
            UnaryOp::Sign => (21, 0.0),
        }
    }

    /// The CPU reference of the function.
    #[inline]
    pub fn apply(&self, x: f32) -> f32 {
        match *self {
            UnaryOp::Neg => -x,
            // A select, not `f32::max`, which returns the non-NaN operand.
            UnaryOp::Relu => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Gelu => gelu(x),
            UnaryOp::GeluGrad => gelu_grad(x),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Step => {
                if x <= 0.0 {
                    0.0
                } else {
                    1.0
                }
            }
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Square => x * x,
            UnaryOp::AddScalar(s) => x + s,
            UnaryOp::MulScalar(s) => x * s,
            UnaryOp::PowScalar(s) => x.powf(s),
            UnaryOp::EqScalar(s) => (x == s) as i32 as f32,
            UnaryOp::NeScalar(s) => (x != s) as i32 as f32,
            UnaryOp::LtScalar(s) => (x < s) as i32 as f32,
            UnaryOp::LeScalar(s) => (x <= s) as i32 as f32,
            UnaryOp::GtScalar(s) => (x > s) as i32 as f32,
            UnaryOp::GeScalar(s) => (x >= s) as i32 as f32,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
        }
    }
}

/// sqrt(2/pi), the constant of the tanh-approximated GELU.
pub const GELU_C: f32 = 0.797_884_6;

/// The tanh-approximated GELU, `0.5·x·(1 + tanh(u))` with `u = GELU_C·(x + 0.044715·x³)`,
/// computed as `x · σ(2u)` (the same function: `1 + tanh(u) = 2σ(2u)`), which needs one
/// exponential and has no cancellation where `tanh(u)` is near −1.
#[inline]
pub(crate) fn gelu(x: f32) -> f32 {
    let u = GELU_C * (x + 0.044715 * x * x * x);
    x / (1.0 + exp_f32(-2.0 * u))
}

/// The derivative of [`gelu`]: `0.5·(1 + t) + 0.5·x·(1 − t²)·u'` with `t = tanh(u)`, as
/// `s + 2·x·s·(1 − s)·u'` with `s = σ(2u)`; where `s` is above ½, `s·(1 − s)` is taken as
/// `e·s²` with `e = e^(−2u)`, which has no cancellation as `s` nears 1.
#[inline]
pub(crate) fn gelu_grad(x: f32) -> f32 {
    let u = GELU_C * (x + 0.044715 * x * x * x);
    let du = GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
    let e = exp_f32(-2.0 * u);
    let s = 1.0 / (1.0 + e);
    let ss = if e > 1.0 { s * (1.0 - s) } else { e * s * s };
    s + 2.0 * x * ss * du
}

/// `e^y` to about 1 ulp, written without calls or branches so that loops over it vectorize
/// (libm's `expf` and `tanhf` are scalar calls, and made GELU a quarter of the CPU's GPT step).
/// `y = n·ln 2 + r` with `|r| ≤ ln 2 / 2` (ln 2 split in two for an exact `n·ln 2`), `e^r` by
/// its Taylor series to r⁷ (truncation below 2⁻²⁷), and `2^n` as two powers of two built in
/// the exponent bits (so that subnormal results come out too). Above 88.72 (past `f32::MAX`) it
/// is +∞, below −103 (under the smallest subnormal) 0; NaN stays NaN.
#[inline]
pub(crate) fn exp_f32(x: f32) -> f32 {
    // selects rather than f32::clamp, so that a NaN passes through
    let y = if x > 88.72 { 88.72 } else { x };
    let y = if y < -103.0 { -103.0 } else { y };
    // round to nearest by the 1.5·2²³ trick (no SSE4.1 round instruction needed)
    const MAGIC: f32 = 12_582_912.0;
    let n = (y * std::f32::consts::LOG2_E + MAGIC) - MAGIC;
    let r = (y - n * 0.693_145_75) - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    // n in [−149, 128]: 2^n = 2^h · 2^(n−h), both normal
    let (n, h) = (n as i32, (n as i32) >> 1);
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    let e = p * pow2(h) * pow2(n - h);
    let e = if x > 88.72 { f32::INFINITY } else { e };
    if x < -103.0 {
        0.0
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_within_two_ulp_and_its_edges() {
        let mut x = -87.0f32;
        while x < 88.7 {
            let (got, want) = (exp_f32(x) as f64, (x as f64).exp());
            assert!(
                (got - want).abs() <= 2.5e-7 * want,
                "exp({x}) = {got}, want {want}"
            );
            x += 0.0137;
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        let tiny = exp_f32(-100.0) as f64; // a subnormal: 2⁻¹⁴⁹ apart
        assert!(
            (tiny - (-100f64).exp()).abs() <= 2f64.powi(-149),
            "exp(-100) = {tiny}"
        );
        assert_eq!(exp_f32(-110.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_and_its_derivative_against_f64() {
        let tanh_gelu = |x: f64| {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            (0.5 * x * (1.0 + u.tanh()), u)
        };
        let mut x = -12.0f32;
        while x < 12.0 {
            let xd = x as f64;
            let (want, u) = tanh_gelu(xd);
            let du = (2.0 / std::f64::consts::PI).sqrt() * (1.0 + 3.0 * 0.044715 * xd * xd);
            let t = u.tanh();
            let dwant = 0.5 * (1.0 + t) + 0.5 * xd * (1.0 - t * t) * du;
            let (got, dgot) = (gelu(x) as f64, gelu_grad(x) as f64);
            // u in f32 carries a relative error of a few 1e-8, which e^(−2u) multiplies by |2u|
            let tol = 2e-7 * (1.0 + 2.0 * u.abs()) * want.abs() + 1e-12;
            assert!((got - want).abs() <= tol, "gelu({x}) = {got}, want {want}");
            assert!(
                (dgot - dwant).abs() <= 1e-6,
                "gelu'({x}) = {dgot}, want {dwant}"
            );
            x += 0.00731;
        }
        // the ends: as 0.5·x·(1 + tanh(u)) gives them
        assert_eq!(gelu(f32::INFINITY), f32::INFINITY);
        assert!(gelu(f32::NEG_INFINITY).is_nan());
        assert_eq!(gelu(-1000.0), 0.0);
        assert!(gelu(f32::NAN).is_nan() && gelu_grad(f32::NAN).is_nan());
    }
}

/// Elementwise functions of two tensors, with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// 1 where a == b, else 0.
    Eq,
    /// The fused GELU backward `b · gelu'(a)` (a = x, b = upstream gradient; equal shapes).
    GeluBwd,
    /// 1 where a != b, else 0 (1 where either is NaN).
    Ne,
    /// 1 where a < b, else 0.
    Lt,
    /// 1 where a <= b, else 0.
    Le,
    /// 1 where a > b, else 0.
    Gt,
    /// 1 where a >= b, else 0.
    Ge,
    /// The smaller of a and b; NaN where either is NaN.
    Minimum,
    /// The larger of a and b; NaN where either is NaN.
    Maximum,
}

impl BinaryOp {
    /// Op code passed to the CUDA kernel.
    pub fn code(&self) -> i32 {
        *self as i32
    }

    /// The CPU reference of the function.
    #[inline]
    pub fn apply(&self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Eq => (a == b) as i32 as f32,
            BinaryOp::GeluBwd => b * UnaryOp::GeluGrad.apply(a),
            BinaryOp::Ne => (a != b) as i32 as f32,
            BinaryOp::Lt => (a < b) as i32 as f32,
            BinaryOp::Le => (a <= b) as i32 as f32,
            BinaryOp::Gt => (a > b) as i32 as f32,
            BinaryOp::Ge => (a >= b) as i32 as f32,
            BinaryOp::Minimum => {
                if a.is_nan() || b.is_nan() {
                    a + b
                } else if a < b {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Maximum => {
                if a.is_nan() || b.is_nan() {
                    a + b
                } else if a > b {
                    a
                } else {
                    b
                }
            }
        }
    }
}

/// The elementwise primitives of a backend (`cpu.rs`, `cuda.rs`).
pub(crate) trait ElementwiseKernels: Sized {
    /// `f(x)` elementwise.
    fn unary(&self, op: UnaryOp) -> Result<Self>;
    /// `a ∘ b` elementwise, `a` and `b` broadcast to `out_shape`.
    fn binary(
        &self,
        rhs: &Self,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Self>;
    /// `mask != 0 ? a : b` elementwise (`self` is the mask), each broadcast to `out_shape`.
    #[allow(clippy::too_many_arguments)]
    fn where_select(
        &self,
        a: &Self,
        b: &Self,
        m_shape: &[usize],
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<Self>;
    /// Zero the elements outside the upper (`upper`) or lower triangle of each `[rows, cols]`
    /// matrix: `(r, c)` is kept when `c − r ≥ k` (upper) or `c − r ≤ k` (lower).
    fn triangle(&self, rows: usize, cols: usize, k: i64, upper: bool) -> Result<Self>;
    /// `clamp(x, lo, hi)`, or with `grad` its derivative mask (1 where `lo ≤ x ≤ hi`).
    fn clamp(&self, lo: f32, hi: f32, grad: bool) -> Result<Self>;
}

impl Storage {
    /// [`ElementwiseKernels::unary`] on this storage's device.
    pub(crate) fn unary(&self, op: UnaryOp) -> Result<Storage> {
        dispatch!("unary"; x = self => x.unary(op))
    }

    /// [`ElementwiseKernels::binary`] on the operands' device.
    pub(crate) fn binary(
        &self,
        rhs: &Storage,
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
        op: BinaryOp,
    ) -> Result<Storage> {
        dispatch!("binary"; a = self, b = rhs => a.binary(b, a_shape, b_shape, out_shape, op))
    }

    /// [`ElementwiseKernels::where_select`] on the operands' device.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn where_select(
        &self,
        a: &Storage,
        b: &Storage,
        m_shape: &[usize],
        a_shape: &[usize],
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> Result<Storage> {
        dispatch!("where"; m = self, a = a, b = b =>
            m.where_select(a, b, m_shape, a_shape, b_shape, out_shape))
    }

    /// [`ElementwiseKernels::triangle`] on this storage's device.
    pub(crate) fn triangle(
        &self,
        rows: usize,
        cols: usize,
        k: i64,
        upper: bool,
    ) -> Result<Storage> {
        dispatch!("triangle"; x = self => x.triangle(rows, cols, k, upper))
    }

    /// [`ElementwiseKernels::clamp`] on this storage's device.
    pub(crate) fn clamp(&self, lo: f32, hi: f32, grad: bool) -> Result<Storage> {
        dispatch!("clamp"; x = self => x.clamp(lo, hi, grad))
    }
}

impl Tensor {
    pub(crate) fn binary_op(
        &self,
        rhs: &Tensor,
        op: BinaryOp,
        name: &'static str,
    ) -> Result<(Storage, Vec<usize>)> {
        expect_float(name, self)?;
        same_dtype(name, self, rhs)?;
        same_device(name, self, rhs)?;
        let out_shape = broadcast_shape(name, self.shape(), rhs.shape())?;
        let s =
            self.storage()?
                .binary(&*rhs.storage()?, self.shape(), rhs.shape(), &out_shape, op)?;
        Ok((s, out_shape))
    }

    /// `self + rhs`, broadcasting.
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        if let Some((a, b)) = promote(self, rhs)? {
            return a.add(&b);
        }
        let (s, shape) = self.binary_op(rhs, BinaryOp::Add, "add")?;
        let (sa, sb) = (self.shape().to_vec(), rhs.shape().to_vec());
        Ok(Tensor::from_op(s, shape, "add", &[self, rhs], move |g| {
            Ok(vec![Some(g.sum_to(&sa)?), Some(g.sum_to(&sb)?)])
        }))
    }

    /// `self - rhs`, broadcasting.
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        if let Some((a, b)) = promote(self, rhs)? {
            return a.sub(&b);
        }
        let (s, shape) = self.binary_op(rhs, BinaryOp::Sub, "sub")?;
        let (sa, sb) = (self.shape().to_vec(), rhs.shape().to_vec());
        Ok(Tensor::from_op(s, shape, "sub", &[self, rhs], move |g| {
            Ok(vec![Some(g.sum_to(&sa)?), Some(g.neg()?.sum_to(&sb)?)])
        }))
    }

    /// `self * rhs` elementwise, broadcasting.
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
        if let Some((a, b)) = promote(self, rhs)? {
            return a.mul(&b);
        }
        let (s, shape) = self.binary_op(rhs, BinaryOp::Mul, "mul")?;
        let (a, b) = (self.detach(), rhs.detach());
        let (ra, rb) = (self.requires_grad(), rhs.requires_grad());
        Ok(Tensor::from_op(s, shape, "mul", &[self, rhs], move |g| {
            let ga = if ra {
                Some(g.mul(&b)?.sum_to(a.shape())?)
            } else {
                None
            };
            let gb = if rb {
                Some(g.mul(&a)?.sum_to(b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }

    /// `self / rhs` elementwise, broadcasting.
    pub fn div(&self, rhs: &Tensor) -> Result<Tensor> {
        if let Some((a, b)) = promote(self, rhs)? {
            return a.div(&b);
        }
        let (s, shape) = self.binary_op(rhs, BinaryOp::Div, "div")?;
        let (a, b) = (self.detach(), rhs.detach());
        let (ra, rb) = (self.requires_grad(), rhs.requires_grad());
        Ok(Tensor::from_op(s, shape, "div", &[self, rhs], move |g| {
            let ga = if ra {
                Some(g.div(&b)?.sum_to(a.shape())?)
            } else {
                None
            };
            // d(a/b)/db = -a / b²
            let gb = if rb {
                Some(g.mul(&a)?.div(&b.square()?)?.neg()?.sum_to(b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }

    /// The same as [`Tensor::eq`]: 1.0 where `self == rhs`, else 0.0 (broadcasting; not
    /// differentiable).
    pub fn eq_mask(&self, rhs: &Tensor) -> Result<Tensor> {
        self.eq(rhs)
    }

    /// Apply a unary primitive; `grad` maps (input, output, upstream grad) to the input's grad.
    fn unary_op(
        &self,
        op: UnaryOp,
        name: &'static str,
        grad: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        expect_float(name, self)?;
        let s = self.storage()?.unary(op)?;
        let out = Tensor::from_storage(s, self.shape().to_vec());
        if !(crate::autograd::is_grad_enabled() && self.requires_grad()) {
            return Ok(out);
        }
        let (x, y) = (self.detach(), out.detach());
        let storage = out.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            self.shape().to_vec(),
            name,
            &[self],
            Box::new(move |g| Ok(vec![Some(grad(&x, &y, g)?)])),
        ))
    }

    /// `-self`.
    pub fn neg(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Neg, "neg", |_, _, g| g.neg())
    }

    /// `self + s` for a scalar `s`.
    pub fn add_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary_op(UnaryOp::AddScalar(s), "add_scalar", |_, _, g| Ok(g.clone()))
    }

    /// `self * s` for a scalar `s`.
    pub fn mul_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary_op(UnaryOp::MulScalar(s), "mul_scalar", move |_, _, g| {
            g.mul_scalar(s)
        })
    }

    /// `self ^ p` for a scalar exponent `p`.
    pub fn pow_scalar(&self, p: f32) -> Result<Tensor> {
        self.unary_op(UnaryOp::PowScalar(p), "pow_scalar", move |x, _, g| {
            g.mul(&x.pow_scalar(p - 1.0)?.mul_scalar(p)?)
        })
    }

    /// `self²`.
    pub fn square(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Square, "square", |x, _, g| {
            g.mul(&x.mul_scalar(2.0)?)
        })
    }

    /// `√self`.
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Sqrt, "sqrt", |_, y, g| g.div(&y.mul_scalar(2.0)?))
    }

    /// `max(self, 0)` (`torch.relu`). NaN propagates: `relu(NaN)` is NaN, and the gradient at a
    /// NaN input is the upstream gradient (PyTorch's rule); `relu(-0.0)` is `0.0`, `relu(±inf)` is
    /// `inf` / `0`.
    pub fn relu(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Relu, "relu", |x, _, g| {
            g.mul(&x.unary_plain(UnaryOp::Step)?)
        })
    }

    /// Logistic sigmoid `1 / (1 + e^-x)`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        // dy/dx = y (1 - y)
        self.unary_op(UnaryOp::Sigmoid, "sigmoid", |_, y, g| {
            g.mul(&y.mul(&y.neg()?.add_scalar(1.0)?)?)
        })
    }

    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Result<Tensor> {
        // dy/dx = 1 - y²
        self.unary_op(UnaryOp::Tanh, "tanh", |_, y, g| {
            g.mul(&y.square()?.neg()?.add_scalar(1.0)?)
        })
    }

    /// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    pub fn gelu(&self) -> Result<Tensor> {
        // backward: g · gelu'(x) in one fused kernel
        self.unary_op(UnaryOp::Gelu, "gelu", |x, _, g| {
            let s = x.storage()?.binary(
                &*g.storage()?,
                x.shape(),
                g.shape(),
                x.shape(),
                BinaryOp::GeluBwd,
            )?;
            Ok(Tensor::from_storage(s, x.shape().to_vec()))
        })
    }

    /// `e^self`.
    pub fn exp(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Exp, "exp", |_, y, g| g.mul(y))
    }

    /// Natural logarithm.
    pub fn log(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Log, "log", |x, _, g| g.div(x))
    }

    /// A unary primitive without autograd (used inside backward passes).
    pub(crate) fn unary_plain(&self, op: UnaryOp) -> Result<Tensor> {
        Ok(Tensor::from_storage(
            self.storage()?.unary(op)?,
            self.shape().to_vec(),
        ))
    }
}
