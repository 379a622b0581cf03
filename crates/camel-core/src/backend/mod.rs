//! The device backends. Each op's tensor-level code (in `ops/`) validates shapes and records
//! autograd; it then calls a method of [`crate::storage::Storage`], which dispatches to the CPU
//! reference in [`cpu`] or to the CUDA kernels through [`cuda`]. The enums here name the
//! primitive computations both backends implement.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod ladder;

/// The activation fused into a linear layer's GEMM epilogue ([`crate::Tensor::linear`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// No activation.
    #[default]
    Identity,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation (as [`UnaryOp::Gelu`]).
    Gelu,
}

impl Activation {
    /// The CPU reference of the activation.
    pub fn apply(&self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => UnaryOp::Relu.apply(x),
            Activation::Gelu => UnaryOp::Gelu.apply(x),
        }
    }
}

/// Elementwise functions of one tensor (and an optional scalar).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Neg,
    Relu,
    Sigmoid,
    Tanh,
    /// GELU, tanh approximation.
    Gelu,
    /// Derivative of the tanh-approximated GELU with respect to its input.
    GeluGrad,
    Exp,
    Log,
    /// 1 where x > 0, else 0 (the derivative of ReLU).
    Step,
    Sqrt,
    Square,
    AddScalar(f32),
    MulScalar(f32),
    PowScalar(f32),
}

impl UnaryOp {
    /// The op code and scalar passed to the CUDA kernel (kept in sync with kernels/elementwise.cu).
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
        }
    }

    /// The CPU reference of the function.
    #[inline]
    pub fn apply(&self, x: f32) -> f32 {
        match *self {
            UnaryOp::Neg => -x,
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Gelu => {
                let u = GELU_C * (x + 0.044715 * x * x * x);
                0.5 * x * (1.0 + u.tanh())
            }
            UnaryOp::GeluGrad => {
                let u = GELU_C * (x + 0.044715 * x * x * x);
                let t = u.tanh();
                let du = GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
            }
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Step => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Square => x * x,
            UnaryOp::AddScalar(s) => x + s,
            UnaryOp::MulScalar(s) => x * s,
            UnaryOp::PowScalar(s) => x.powf(s),
        }
    }
}

/// sqrt(2/pi), the constant of the tanh-approximated GELU.
pub const GELU_C: f32 = 0.797_884_6;

/// Elementwise functions of two tensors, with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// 1 where a == b, else 0.
    Eq,
    /// The fused GELU backward `b · gelu'(a)` (a = x, b = upstream gradient; equal shapes).
    GeluBwd,
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
        }
    }
}

/// Reductions along one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
}

impl ReduceOp {
    /// Op code passed to the CUDA kernel.
    pub fn code(&self) -> i32 {
        *self as i32
    }
}

/// Hyper-parameters of one optimizer update, shared by the CPU and CUDA implementations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateRule {
    /// SGD: `buf = momentum*buf + (g + wd*p); p -= lr*buf` (buf = g + wd*p when momentum is 0).
    Sgd {
        lr: f32,
        momentum: f32,
        weight_decay: f32,
    },
    /// Adam (L2 weight decay added to the gradient) or AdamW (decoupled decay), with bias correction.
    Adam {
        lr: f32,
        beta1: f32,
        beta2: f32,
        eps: f32,
        weight_decay: f32,
        decoupled: bool,
        /// 1 - beta1^t
        bc1: f32,
        /// 1 - beta2^t
        bc2: f32,
    },
}
