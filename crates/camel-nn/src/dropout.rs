//! Dropout as a module (PyTorch's `nn.Dropout`).

use crate::{Module, TrainingFlag};
use camel_core::{Error, Result, Tensor};
use std::fmt;

/// Zeroes each element with probability `p` in training mode and scales the rest by
/// `1 / (1 − p)`; the identity in evaluation mode and when `p == 0`. The mask comes from the
/// process-wide generator ([`camel_core::manual_seed`]) and is the same on every device for the
/// same seed.
///
/// ```
/// use camel_nn::{Device, Dropout, Module, Tensor};
/// let drop = Dropout::new(0.1)?;
/// assert_eq!(format!("{drop:?}"), "Dropout(p=0.1)");
/// let x = Tensor::ones(&[4, 8], Device::Cpu)?;
/// drop.eval();
/// assert_eq!(drop.forward(&x)?.to_vec()?, x.to_vec()?);
/// assert!(Dropout::new(1.5).is_err());
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub struct Dropout {
    p: f32,
    training: TrainingFlag,
}

impl Dropout {
    /// A dropout layer with drop probability `p` (in `[0, 1]`), in training mode.
    pub fn new(p: f32) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidArgument {
                op: "Dropout",
                msg: format!("the drop probability p must be in [0, 1], got {p}"),
            });
        }
        Ok(Dropout {
            p,
            training: TrainingFlag::new(),
        })
    }

    /// The drop probability.
    pub fn p(&self) -> f32 {
        self.p
    }
}

impl fmt::Debug for Dropout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dropout(p={})", self.p)
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.dropout(self.p, self.training.get())
    }

    fn set_training(&self, on: bool) {
        self.training.set(on)
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
