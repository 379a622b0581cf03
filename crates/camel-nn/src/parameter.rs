use camel_core::{Device, Result, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

static NEXT: AtomicUsize = AtomicUsize::new(1);

/// A trainable tensor: a leaf that requires grad. Cloning shares it, so a module and its
/// optimizer see the same parameter; [`Parameter::to`] moves it between devices in place.
#[derive(Clone, Debug)]
pub struct Parameter {
    id: usize,
    inner: Arc<RwLock<Tensor>>,
}

impl Parameter {
    /// Wrap `t` (detached) as a parameter that requires grad.
    pub fn new(t: Tensor) -> Result<Parameter> {
        let t = t.detach().requires_grad_(true)?;
        Ok(Parameter {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            inner: Arc::new(RwLock::new(t)),
        })
    }

    /// Stable identity of this parameter (survives device moves).
    pub fn id(&self) -> usize {
        self.id
    }

    /// The current tensor (a cheap handle).
    pub fn tensor(&self) -> Tensor {
        self.inner.read().expect("parameter lock").clone()
    }

    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.tensor().grad()
    }

    /// Clear the gradient.
    pub fn zero_grad(&self) {
        self.tensor().zero_grad()
    }

    /// Move the parameter to `device` (its gradient is dropped).
    pub fn to(&self, device: Device) -> Result<()> {
        let mut slot = self.inner.write().expect("parameter lock");
        if slot.device() != device {
            *slot = slot.detach().to(device)?.requires_grad_(true)?;
        }
        Ok(())
    }

    /// Replace the value with a copy of `t` on the parameter's device (its gradient is
    /// dropped); `t` must have the parameter's shape.
    pub fn set(&self, t: &Tensor) -> Result<()> {
        let mut slot = self.inner.write().expect("parameter lock");
        if t.shape() != slot.shape() {
            return Err(camel_core::Error::ShapeMismatch {
                op: "Parameter::set",
                lhs: slot.shape().to_vec(),
                rhs: t.shape().to_vec(),
                expected: "the new value must have the parameter's shape".into(),
            });
        }
        let device = slot.device();
        let copy = Tensor::from_vec(t.to_vec()?, t.shape(), device)?;
        *slot = copy.requires_grad_(true)?;
        Ok(())
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.tensor().numel()
    }
}
