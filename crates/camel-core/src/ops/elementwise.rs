//! Elementwise ops. Binary ops broadcast NumPy-style; their backward sums the gradient back to
//! each input's shape (`sum_to`).

use super::{expect_f32, same_device};
use crate::backend::{BinaryOp, UnaryOp};
use crate::shape::broadcast_shape;
use crate::{Result, Tensor};

impl Tensor {
    fn binary_op(
        &self,
        rhs: &Tensor,
        op: BinaryOp,
        name: &'static str,
    ) -> Result<(crate::storage::Storage, Vec<usize>)> {
        expect_f32(name, self)?;
        expect_f32(name, rhs)?;
        same_device(name, self, rhs)?;
        let out_shape = broadcast_shape(name, self.shape(), rhs.shape())?;
        let s =
            self.storage()?
                .binary(&*rhs.storage()?, self.shape(), rhs.shape(), &out_shape, op)?;
        Ok((s, out_shape))
    }

    /// `self + rhs`, broadcasting.
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        let (s, shape) = self.binary_op(rhs, BinaryOp::Add, "add")?;
        let (sa, sb) = (self.shape().to_vec(), rhs.shape().to_vec());
        Ok(Tensor::from_op(s, shape, "add", &[self, rhs], move |g| {
            Ok(vec![Some(g.sum_to(&sa)?), Some(g.sum_to(&sb)?)])
        }))
    }

    /// `self - rhs`, broadcasting.
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        let (s, shape) = self.binary_op(rhs, BinaryOp::Sub, "sub")?;
        let (sa, sb) = (self.shape().to_vec(), rhs.shape().to_vec());
        Ok(Tensor::from_op(s, shape, "sub", &[self, rhs], move |g| {
            Ok(vec![Some(g.sum_to(&sa)?), Some(g.neg()?.sum_to(&sb)?)])
        }))
    }

    /// `self * rhs` elementwise, broadcasting.
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
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

    /// 1.0 where `self == rhs`, else 0.0 (broadcasting; not differentiable).
    pub fn eq_mask(&self, rhs: &Tensor) -> Result<Tensor> {
        let (s, shape) = self.binary_op(rhs, BinaryOp::Eq, "eq")?;
        Ok(Tensor::from_storage(s, shape))
    }

    /// Apply a unary primitive; `grad` maps (input, output, upstream grad) to the input's grad.
    fn unary_op(
        &self,
        op: UnaryOp,
        name: &'static str,
        grad: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        expect_f32(name, self)?;
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

    /// `max(self, 0)`.
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
