//! Gradient clipping by global norm.

use camel_nn::{Parameter, Result, Tensor};

/// Clips the gradients of `params` by their global L2 norm, in place (PyTorch's
/// `torch.nn.utils.clip_grad_norm_(params, max_norm)`): every gradient is multiplied by
/// `min(1, max_norm / (norm + 1e-6))`. Returns the norm before clipping as a `[1]` tensor on
/// the parameters' device, without reading it on the host (call `.item()` to read it). On a GPU
/// it is one pass over all gradients ([`Tensor::clip_grad_norm`]). Parameters without a
/// gradient are skipped; a NaN or inf in a gradient gives a NaN or inf norm (and NaN
/// gradients), which is not hidden. `max_norm` must be > 0; `f32::INFINITY` only measures.
///
/// ```
/// use camel_nn::{Device, Parameter, Tensor};
/// use camel_optim::clip_grad_norm;
/// let p = Parameter::new(Tensor::from_vec(vec![1.0, 1.0], &[2], Device::Cpu)?)?;
/// p.tensor().mul_scalar(3.0)?.sum()?.backward()?; // gradient [3, 3]: norm √18
/// let norm = clip_grad_norm(&[p.clone()], 1.0)?;
/// assert!((norm.item()? - 18f32.sqrt()).abs() < 1e-5);
/// let g = p.grad().unwrap().to_vec()?;
/// assert!((g[0] * g[0] + g[1] * g[1] - 1.0).abs() < 1e-5);
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub fn clip_grad_norm(params: &[Parameter], max_norm: f32) -> Result<Tensor> {
    let ts: Vec<Tensor> = params.iter().map(|p| p.tensor()).collect();
    Tensor::clip_grad_norm(&ts, max_norm)
}
