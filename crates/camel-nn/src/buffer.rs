//! Buffers: non-trainable tensors a module holds (a sinusoidal position table, later BatchNorm's
//! running statistics), saved in its state dict and moved with it, never given to an optimizer.

use camel_core::{Device, Result, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

static NEXT: AtomicUsize = AtomicUsize::new(1);

/// A non-trainable tensor held by a module (PyTorch's `register_buffer`). Cloning shares it, as
/// [`Parameter`] does; [`Buffer::to`] moves it between devices in place. It never requires grad.
#[derive(Clone, Debug)]
pub struct Buffer {
    id: usize,
    inner: Arc<RwLock<Tensor>>,
}

impl Buffer {
    /// Wrap `t` (detached) as a buffer.
    pub fn new(t: Tensor) -> Buffer {
        Buffer {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            inner: Arc::new(RwLock::new(t.detach())),
        }
    }

    /// Stable identity of this buffer (survives device moves).
    pub fn id(&self) -> usize {
        self.id
    }

    /// The current tensor (a cheap handle).
    pub fn tensor(&self) -> Tensor {
        self.inner.read().expect("buffer lock").clone()
    }

    /// Move the buffer to `device`.
    pub fn to(&self, device: Device) -> Result<()> {
        let mut slot = self.inner.write().expect("buffer lock");
        if slot.device() != device {
            *slot = slot.to(device)?.detach();
        }
        Ok(())
    }

    /// Replace the value with a bit-exact copy of `t` on the buffer's device; `t` must have the
    /// buffer's shape.
    pub fn set(&self, t: &Tensor) -> Result<()> {
        let mut slot = self.inner.write().expect("buffer lock");
        if t.shape() != slot.shape() {
            return Err(camel_core::Error::ShapeMismatch {
                op: "Buffer::set",
                lhs: slot.shape().to_vec(),
                rhs: t.shape().to_vec(),
                expected: "the new value must have the buffer's shape".into(),
            });
        }
        let device = slot.device();
        *slot = Tensor::from_vec(t.to_vec()?, t.shape(), device)?;
        Ok(())
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.tensor().numel()
    }
}
