//! Mixed precision: a scope in which matrix products run on 16-bit tensor cores while the
//! parameters, their gradients and the numerically sensitive ops stay f32 (`torch.autocast`).
//!
//! Inside [`autocast`]`(dtype, …)` on a thread:
//! - **matrix products** (`matmul`, `matmul_t`, `linear`) cast their f32 operands to `dtype` and
//!   return `dtype`. The cast is an op like any other, so a parameter's gradient comes back to it
//!   in f32: the parameters are the f32 master weights.
//! - **ops that need f32's range or precision** (sums and means, variance, softmax,
//!   log-softmax, the attention softmax, layer norm, cross-entropy, MSE) widen 16-bit inputs to
//!   f32 and return f32.
//! - **binary elementwise ops** given one f32 and one 16-bit operand widen the 16-bit one, so a
//!   residual stream kept in f32 can take a 16-bit branch.
//!
//! Every other op runs in its input's dtype, as outside the scope. Backward passes ignore the
//! scope: each op's backward runs in the dtypes its forward chose. Outside a scope, ops never
//! change a dtype on their own, and mixing dtypes is an error.

use crate::{DType, Error, Result, Tensor};
use std::cell::Cell;

thread_local! {
    static AUTOCAST: Cell<Option<DType>> = const { Cell::new(None) };
}

/// The 16-bit dtype matrix products run in on this thread, or `None` outside an autocast scope.
pub fn autocast_dtype() -> Option<DType> {
    AUTOCAST.with(|a| a.get())
}

/// Restores the previous autocast state when dropped. Made by [`autocast_guard`].
pub struct AutocastGuard(Option<DType>);

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.with(|a| a.set(self.0));
    }
}

/// Autocast to `dtype` (f16 or bf16), or turn it off with `None`, until the guard is dropped.
/// Any other dtype is an error naming the ones accepted.
pub fn autocast_guard(dtype: Option<DType>) -> Result<AutocastGuard> {
    if let Some(d) = dtype {
        if !d.is_half() {
            return Err(Error::InvalidArgument {
                op: "autocast",
                msg: format!("autocast runs matrix products in f16 or bf16, not {d}"),
            });
        }
    }
    Ok(AutocastGuard(AUTOCAST.with(|a| a.replace(dtype))))
}

/// Run `f` with matrix products in `dtype` (f16 or bf16) and the rules of the module docs.
///
/// ```
/// use camel_core::{autocast, DType, Device, Tensor};
/// let x = Tensor::ones(&[2, 3], Device::Cpu)?;
/// let w = Tensor::ones(&[4, 3], Device::Cpu)?.requires_grad_(true)?;
/// let y = autocast(DType::BF16, || x.matmul_t(&w, false, true))??;
/// assert_eq!(y.dtype(), DType::BF16);
/// y.to_dtype(DType::F32)?.sum()?.backward()?;
/// assert_eq!(w.grad().unwrap().dtype(), DType::F32); // the master weight's gradient
/// # Ok::<(), camel_core::Error>(())
/// ```
pub fn autocast<T>(dtype: DType, f: impl FnOnce() -> T) -> Result<T> {
    let _g = autocast_guard(Some(dtype))?;
    Ok(f())
}

/// `t` as a matrix product's operand: cast to the autocast dtype when a scope is active and `t`
/// is f32, else `t` itself.
pub(crate) fn lower(t: &Tensor) -> Result<Tensor> {
    match autocast_dtype() {
        Some(d) if t.dtype() == DType::F32 => t.to_dtype(d),
        _ => Ok(t.clone()),
    }
}

/// Run an op in f32 on a possibly 16-bit `x`, for the ops autocast keeps in f32: a 16-bit `x`
/// is widened on its own device (exact) and `f` runs in f32; inside an autocast scope the
/// result stays f32, outside one a floating result is rounded once back to `x`'s dtype.
/// Gradients flow through both casts. Other dtypes go to `f` as they are (and `f`'s own check
/// refuses what it cannot take).
pub(crate) fn via_f32_autocast(
    x: &Tensor,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if !x.dtype().is_half() {
        return f(x);
    }
    let y = f(&x.to_dtype(DType::F32)?)?;
    if autocast_dtype().is_some() || !y.dtype().is_float() {
        Ok(y)
    } else {
        y.to_dtype(x.dtype())
    }
}

/// The operands of a binary elementwise op inside an autocast scope when one is f32 and the
/// other 16-bit: both f32 (the 16-bit one widened). `None` when nothing is to change, so
/// outside a scope mixed dtypes still reach the op's dtype error.
pub(crate) fn promote(a: &Tensor, b: &Tensor) -> Result<Option<(Tensor, Tensor)>> {
    if autocast_dtype().is_none() || a.dtype() == b.dtype() {
        return Ok(None);
    }
    match (a.dtype(), b.dtype()) {
        (DType::F32, h) if h.is_half() => Ok(Some((a.clone(), b.to_dtype(DType::F32)?))),
        (h, DType::F32) if h.is_half() => Ok(Some((a.to_dtype(DType::F32)?, b.clone()))),
        _ => Ok(None),
    }
}
