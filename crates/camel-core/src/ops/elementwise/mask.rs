//! The masking family: comparisons giving a mask, `where_cond`, `masked_fill`, `triu`/`tril`,
//! `clamp`, `abs`, `minimum`/`maximum` and the i64 `arange`.
//!
//! camel has no bool dtype: a mask is an f32 tensor of 0.0 and 1.0, and an op that reads a mask
//! takes any non-zero value as true. Comparisons follow IEEE: every comparison with a NaN is
//! false except `ne`, which is true. They are not differentiable (their output never requires
//! grad). Comparisons and scalar comparisons are codes of the elementwise unary/binary kernels,
//! so they run on every step of the elementwise ladder; `where_cond`/`masked_fill`,
//! `triu`/`tril`, `clamp` and `arange` have their own kernels in the ladder's first step
//! (`kernels/elementwise/01_thread_per_element.cu`), in f32, f16 and bf16. They read and write
//! the tensor's own dtype: a select or a triangle copies values, and `clamp` computes in f32 and
//! rounds once, so only a fill value or a bound that the dtype cannot hold rounds. A mask may be
//! of any float dtype, whatever the values' dtype.

use super::{BinaryOp, UnaryOp};
use crate::ops::{expect_float, same_device, same_dtype};
use crate::shape::broadcast_shape;
use crate::storage::Storage;
use crate::{Device, Error, Result, Tensor};

impl Tensor {
    /// A comparison of two tensors (broadcasting) as a 0/1 mask of their dtype, outside
    /// autograd.
    fn compare(&self, rhs: &Tensor, op: BinaryOp, name: &'static str) -> Result<Tensor> {
        let (s, shape) = self.binary_op(rhs, op, name)?;
        Ok(Tensor::from_storage(s, shape))
    }

    /// A comparison with a scalar as a 0/1 mask of this tensor's dtype, outside autograd.
    fn compare_scalar(&self, op: UnaryOp, name: &'static str) -> Result<Tensor> {
        crate::ops::expect_float(name, self)?;
        self.unary_plain(op)
    }

    /// 1.0 where `self == rhs`, else 0.0, broadcasting (`torch.eq`; not differentiable).
    pub fn eq(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Eq, "eq")
    }

    /// 1.0 where `self != rhs`, else 0.0, broadcasting (`torch.ne`); 1.0 where either is NaN.
    pub fn ne(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Ne, "ne")
    }

    /// 1.0 where `self < rhs`, else 0.0, broadcasting (`torch.lt`).
    pub fn lt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Lt, "lt")
    }

    /// 1.0 where `self <= rhs`, else 0.0, broadcasting (`torch.le`).
    pub fn le(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Le, "le")
    }

    /// 1.0 where `self > rhs`, else 0.0, broadcasting (`torch.gt`).
    pub fn gt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Gt, "gt")
    }

    /// 1.0 where `self >= rhs`, else 0.0, broadcasting (`torch.ge`).
    pub fn ge(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, BinaryOp::Ge, "ge")
    }

    /// 1.0 where `self == s`, else 0.0 (`torch.eq(x, s)`).
    pub fn eq_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::EqScalar(s), "eq_scalar")
    }

    /// 1.0 where `self != s`, else 0.0 (`torch.ne(x, s)`); 1.0 at NaN.
    pub fn ne_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::NeScalar(s), "ne_scalar")
    }

    /// 1.0 where `self < s`, else 0.0 (`torch.lt(x, s)`).
    pub fn lt_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::LtScalar(s), "lt_scalar")
    }

    /// 1.0 where `self <= s`, else 0.0 (`torch.le(x, s)`).
    pub fn le_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::LeScalar(s), "le_scalar")
    }

    /// 1.0 where `self > s`, else 0.0 (`torch.gt(x, s)`).
    pub fn gt_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::GtScalar(s), "gt_scalar")
    }

    /// 1.0 where `self >= s`, else 0.0 (`torch.ge(x, s)`).
    pub fn ge_scalar(&self, s: f32) -> Result<Tensor> {
        self.compare_scalar(UnaryOp::GeScalar(s), "ge_scalar")
    }

    /// `mask ? a : b` without autograd, the three broadcast to `out_shape`.
    fn where_plain(mask: &Tensor, a: &Tensor, b: &Tensor, out_shape: &[usize]) -> Result<Tensor> {
        let s = mask.storage()?.where_select(
            &*a.storage()?,
            &*b.storage()?,
            mask.shape(),
            a.shape(),
            b.shape(),
            out_shape,
        )?;
        Ok(Tensor::from_storage(s, out_shape.to_vec()))
    }

    /// `on_true` where this mask is non-zero, else `on_false` (`torch.where(mask, a, b)`), the
    /// three broadcast together. A select: an inf or NaN in the branch not taken never reaches
    /// the output. The gradient goes to `on_true` where the mask is set and to `on_false` where
    /// it is not (summed back to each one's shape); the mask gets none.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// let x = Tensor::from_vec(vec![-1.0, 2.0, -3.0], &[3], Device::Cpu)?;
    /// let zero = Tensor::zeros(&[], Device::Cpu)?;
    /// let y = x.gt_scalar(0.0)?.where_cond(&x, &zero)?; // relu, written as a select
    /// assert_eq!(y.to_vec()?, [0.0, 2.0, 0.0]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        const OP: &str = "where_cond";
        // inside an autocast scope, an f32 branch and a 16-bit one select in f32
        if let Some((a, b)) = crate::autocast::promote(on_true, on_false)? {
            return self.where_cond(&a, &b);
        }
        for t in [self, on_true, on_false] {
            expect_float(OP, t)?;
        }
        same_dtype(OP, on_true, on_false)?;
        same_device(OP, self, on_true)?;
        same_device(OP, self, on_false)?;
        let ab = broadcast_shape(OP, on_true.shape(), on_false.shape())?;
        let out_shape = broadcast_shape(OP, self.shape(), &ab)?;
        let out = Tensor::where_plain(self, on_true, on_false, &out_shape)?;
        let (mask, sa, sb) = (
            self.detach(),
            on_true.shape().to_vec(),
            on_false.shape().to_vec(),
        );
        let (ra, rb) = (on_true.requires_grad(), on_false.requires_grad());
        let storage = out.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            out_shape.clone(),
            OP,
            &[self, on_true, on_false],
            Box::new(move |g| {
                let zero = scalar(0.0, g)?;
                let ga = if ra {
                    Some(Tensor::where_plain(&mask, g, &zero, g.shape())?.sum_to(&sa)?)
                } else {
                    None
                };
                let gb = if rb {
                    Some(Tensor::where_plain(&mask, &zero, g, g.shape())?.sum_to(&sb)?)
                } else {
                    None
                };
                Ok(vec![None, ga, gb])
            }),
        ))
    }

    /// `value` where `mask` is non-zero, else this tensor (`torch.Tensor.masked_fill`). The mask
    /// broadcasts to this tensor's shape; `value` may be ±inf (the usual `-inf` before a
    /// softmax). The gradient passes where the mask is 0 and is 0 where it is set.
    ///
    /// # Examples
    ///
    /// ```
    /// use camel_core::{Device, Tensor};
    /// // a causal mask: key j is hidden from query i when j > i
    /// let scores = Tensor::zeros(&[3, 3], Device::Cpu)?;
    /// let future = Tensor::ones(&[3, 3], Device::Cpu)?.triu(1)?;
    /// let p = scores.masked_fill(&future, f32::NEG_INFINITY)?.softmax()?;
    /// assert_eq!(p.to_vec()?[..3], [1.0, 0.0, 0.0]);
    /// # Ok::<(), camel_core::Error>(())
    /// ```
    pub fn masked_fill(&self, mask: &Tensor, value: f32) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        expect_float(OP, self)?;
        expect_float(OP, mask)?;
        same_device(OP, self, mask)?;
        if broadcast_shape(OP, self.shape(), mask.shape())? != self.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: mask.shape().to_vec(),
                expected: "a mask that broadcasts to the input's shape".into(),
            });
        }
        let fill = scalar(value, self)?;
        let out = Tensor::where_plain(mask, &fill, self, self.shape())?;
        let m = mask.detach();
        let storage = out.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            self.shape().to_vec(),
            OP,
            &[self],
            Box::new(move |g| {
                let zero = scalar(0.0, g)?;
                Ok(vec![Some(Tensor::where_plain(&m, &zero, g, g.shape())?)])
            }),
        ))
    }

    /// The triangle of the last two dims without autograd.
    fn triangle_plain(&self, k: i64, upper: bool) -> Result<Tensor> {
        let r = self.rank();
        let (rows, cols) = (self.shape()[r - 2], self.shape()[r - 1]);
        let s = self.storage()?.triangle(rows, cols, k, upper)?;
        Ok(Tensor::from_storage(s, self.shape().to_vec()))
    }

    fn triangle(&self, k: i64, upper: bool, op: &'static str) -> Result<Tensor> {
        expect_float(op, self)?;
        if self.rank() < 2 {
            return Err(Error::BadShape {
                op,
                shape: self.shape().to_vec(),
                expected: "rank ≥ 2 (a matrix or a batch of matrices)".into(),
            });
        }
        let out = self.triangle_plain(k, upper)?;
        let storage = out.storage_arc().clone();
        Ok(Tensor::op_output(
            storage,
            self.shape().to_vec(),
            op,
            &[self],
            Box::new(move |g| Ok(vec![Some(g.triangle_plain(k, upper)?)])),
        ))
    }

    /// The upper triangle of the last two dims (`torch.triu(x, k)`): element `(i, j)` is kept
    /// when `j − i ≥ k`, else 0 (even where it is NaN). `k = 0` keeps the diagonal, `k > 0`
    /// starts above it. The gradient is masked the same way. Rank ≥ 2.
    pub fn triu(&self, k: i64) -> Result<Tensor> {
        self.triangle(k, true, "triu")
    }

    /// The lower triangle of the last two dims (`torch.tril(x, k)`): element `(i, j)` is kept
    /// when `j − i ≤ k`, else 0. The gradient is masked the same way. Rank ≥ 2.
    pub fn tril(&self, k: i64) -> Result<Tensor> {
        self.triangle(k, false, "tril")
    }

    /// `[start, start + step, …)` up to (excluding) `end` as i64 (`torch.arange` with integer
    /// arguments), made on `device` by a kernel. A zero step, a step pointing away from `end`,
    /// or more elements than can be allocated is an error.
    pub fn arange(start: i64, end: i64, step: i64, device: Device) -> Result<Tensor> {
        let bad = |why: &str| Error::InvalidArgument {
            op: "arange",
            msg: format!("cannot step from {start} to {end} by {step}: {why}"),
        };
        if step == 0 {
            return Err(bad("the step must be non-zero"));
        }
        // In i128, where neither the width nor the count can overflow.
        let (w, st) = (end as i128 - start as i128, step as i128);
        if w != 0 && (w < 0) != (st < 0) {
            return Err(bad("the step points away from end"));
        }
        let count = (w + st - st.signum()) / st; // ceil(w / st) for w and st of one sign
        if count > (isize::MAX as usize / std::mem::size_of::<i64>()) as i128 {
            return Err(bad("too many elements to allocate"));
        }
        let n = count as usize;
        let storage = match device {
            Device::Cpu => {
                let mut v = crate::backend::cpu::try_vec("arange", n)?;
                // Every value lies between start and end, but `i · step` alone may not fit in
                // i64 (start and end of opposite signs): two's-complement wrapping gives the
                // exact sum, as the kernel's unsigned arithmetic does.
                v.extend((0..n as i64).map(|i| start.wrapping_add(i.wrapping_mul(step))));
                Storage::Cpu(crate::backend::cpu::CpuStorage::I64(v))
            }
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Storage::Cuda(super::cuda::arange_i64(i, n, start, step)?),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => {
                return Err(Error::DeviceUnavailable {
                    device,
                    reason: "camel was built without the `cuda` feature".into(),
                })
            }
        };
        Ok(Tensor::from_storage(storage, vec![n]))
    }

    /// Each element limited to `[min, max]` (`torch.clamp`); either bound may be ±inf (no limit
    /// on that side). NaN stays NaN; `min > max` gives `max` everywhere, as PyTorch. The gradient
    /// is the upstream gradient where `min ≤ x ≤ max` and 0 outside. A NaN bound is an error.
    pub fn clamp(&self, min: f32, max: f32) -> Result<Tensor> {
        const OP: &str = "clamp";
        expect_float(OP, self)?;
        if min.is_nan() || max.is_nan() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("the bounds [{min}, {max}] must not be NaN (use ±inf for no bound)"),
            });
        }
        let s = self.storage()?.clamp(min, max, false)?;
        let x = self.detach();
        Ok(Tensor::from_op(
            s,
            self.shape().to_vec(),
            OP,
            &[self],
            move |g| {
                let m = x.storage()?.clamp(min, max, true)?;
                let m = Tensor::from_storage(m, x.shape().to_vec());
                Ok(vec![Some(g.mul(&m)?)])
            },
        ))
    }

    /// `|self|` (`torch.abs`); NaN stays NaN. The gradient is `sign(x)`: ±1, and 0 at 0.
    pub fn abs(&self) -> Result<Tensor> {
        self.unary_op(UnaryOp::Abs, "abs", |x, _, g| {
            g.mul(&x.unary_plain(UnaryOp::Sign)?)
        })
    }

    /// The gradient of `minimum`/`maximum` to each side: all of it to the chosen side, half to
    /// each on a tie.
    fn extreme2(&self, rhs: &Tensor, op: BinaryOp, name: &'static str) -> Result<Tensor> {
        if let Some((a, b)) = crate::autocast::promote(self, rhs)? {
            return a.extreme2(&b, op, name);
        }
        let (s, shape) = self.binary_op(rhs, op, name)?;
        let (a, b) = (self.detach(), rhs.detach());
        let (ra, rb) = (self.requires_grad(), rhs.requires_grad());
        // a side gets the gradient where it wins the comparison, with swapped operands for rhs
        let wins = if op == BinaryOp::Minimum {
            BinaryOp::Lt
        } else {
            BinaryOp::Gt
        };
        Ok(Tensor::from_op(s, shape, name, &[self, rhs], move |g| {
            let half_tie = a.compare(&b, BinaryOp::Eq, name)?.mul_scalar(0.5)?;
            let side = |first: bool| -> Result<Tensor> {
                let (x, y, shape) = if first {
                    (&a, &b, a.shape())
                } else {
                    (&b, &a, b.shape())
                };
                let w = x.compare(y, wins, name)?;
                g.mul(&w.add(&half_tie)?)?.sum_to(shape)
            };
            Ok(vec![
                if ra { Some(side(true)?) } else { None },
                if rb { Some(side(false)?) } else { None },
            ])
        }))
    }

    /// The smaller of `self` and `rhs` elementwise, broadcasting (`torch.minimum`); NaN where
    /// either is NaN. The gradient goes to the smaller side (half to each on a tie).
    pub fn minimum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.extreme2(rhs, BinaryOp::Minimum, "minimum")
    }

    /// The larger of `self` and `rhs` elementwise, broadcasting (`torch.maximum`); NaN where
    /// either is NaN. The gradient goes to the larger side (half to each on a tie).
    pub fn maximum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.extreme2(rhs, BinaryOp::Maximum, "maximum")
    }
}

/// A `[]` tensor holding `value` in `like`'s dtype (rounded once to a 16-bit one), on its device.
fn scalar(value: f32, like: &Tensor) -> Result<Tensor> {
    let t = Tensor::full(&[], value, like.device())?;
    if like.dtype() == crate::DType::F32 {
        Ok(t)
    } else {
        t.to_dtype(like.dtype())
    }
}
