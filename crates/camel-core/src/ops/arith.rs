//! `std::ops` operators on tensors and `f32` scalars, each returning `Result<Tensor>` (candle's
//! pattern), so that shape and device errors stay typed: `(&a + &b)?`, `(&a * 2.0)?`,
//! `(-&a)?`. Every operator calls the named method (`add`, `sub`, `mul`, `div`, `add_scalar`,
//! `mul_scalar`, `neg`), so broadcasting and autograd are those of the method.
//!
//! ```
//! use camel_core::{Device, Tensor};
//! let a = Tensor::from_vec(vec![1., 2.], &[2], Device::Cpu)?;
//! let b = Tensor::from_vec(vec![3., 4.], &[2], Device::Cpu)?;
//! let c = ((&a + &b)? * 2.0)?;
//! assert_eq!(c.to_vec()?, vec![8., 12.]);
//! assert_eq!((1.0 - &a)?.to_vec()?, vec![0., -1.]);
//! assert_eq!((-&a)?.to_vec()?, vec![-1., -2.]);
//! # Ok::<(), camel_core::Error>(())
//! ```

use crate::{Result, Tensor};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// Tensor ∘ tensor for every mix of owned and borrowed operands.
macro_rules! tensor_tensor {
    ($trait:ident, $fn:ident, $method:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, rhs: &Tensor) -> Result<Tensor> {
                self.$method(rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, rhs: Tensor) -> Result<Tensor> {
                self.$method(&rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, rhs: &Tensor) -> Result<Tensor> {
                (&self).$method(rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, rhs: Tensor) -> Result<Tensor> {
                (&self).$method(&rhs)
            }
        }
    };
}

tensor_tensor!(Add, add, add);
tensor_tensor!(Sub, sub, sub);
tensor_tensor!(Mul, mul, mul);
tensor_tensor!(Div, div, div);

/// Tensor ∘ scalar and scalar ∘ tensor, for owned and borrowed tensors. `$ts` computes
/// `t ∘ s`, `$st` computes `s ∘ t`.
macro_rules! tensor_scalar {
    ($trait:ident, $fn:ident, |$t:ident, $s:ident| $ts:expr, |$t2:ident, $s2:ident| $st:expr) => {
        impl $trait<f32> for &Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, $s: f32) -> Result<Tensor> {
                let $t = self;
                $ts
            }
        }
        impl $trait<f32> for Tensor {
            type Output = Result<Tensor>;
            fn $fn(self, $s: f32) -> Result<Tensor> {
                let $t = &self;
                $ts
            }
        }
        impl $trait<&Tensor> for f32 {
            type Output = Result<Tensor>;
            fn $fn(self, $t2: &Tensor) -> Result<Tensor> {
                let $s2 = self;
                $st
            }
        }
        impl $trait<Tensor> for f32 {
            type Output = Result<Tensor>;
            fn $fn(self, rhs: Tensor) -> Result<Tensor> {
                let ($s2, $t2) = (self, &rhs);
                $st
            }
        }
    };
}

tensor_scalar!(Add, add, |t, s| t.add_scalar(s), |t, s| t.add_scalar(s));
tensor_scalar!(Sub, sub, |t, s| t.add_scalar(-s), |t, s| t
    .neg()?
    .add_scalar(s));
tensor_scalar!(Mul, mul, |t, s| t.mul_scalar(s), |t, s| t.mul_scalar(s));
tensor_scalar!(Div, div, |t, s| t.mul_scalar(1.0 / s), |t, s| Tensor::full(
    t.shape(),
    s,
    t.device()
)?
.div(t));

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}
