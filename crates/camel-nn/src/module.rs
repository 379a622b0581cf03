use crate::Parameter;
use camel_core::{Device, Result, Tensor};

/// A layer or model: a forward pass plus named parameters.
pub trait Module: Send + Sync {
    /// Run the module on `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// Parameters with dotted names (`"0.weight"`), in a stable order.
    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        Vec::new()
    }

    /// The parameters alone.
    fn parameters(&self) -> Vec<Parameter> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    /// Switch training mode on (`true`) or evaluation mode (`false`).
    fn set_training(&mut self, _on: bool) {}

    /// Whether the module is in training mode.
    fn is_training(&self) -> bool {
        true
    }

    /// Move every parameter to `device`.
    fn to(&self, device: Device) -> Result<()> {
        for p in self.parameters() {
            p.to(device)?;
        }
        Ok(())
    }

    /// Clear every parameter's gradient.
    fn zero_grad(&self) {
        self.parameters().iter().for_each(|p| p.zero_grad());
    }

    /// Total number of trainable scalars.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.numel()).sum()
    }
}
