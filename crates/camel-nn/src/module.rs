use crate::state::{StateDict, StateError};
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

    /// Every parameter by its dotted name (`layers.0.weight`), detached: the checkpoint of the
    /// module. The tensors stay on their device and share storage with the parameters.
    fn state_dict(&self) -> StateDict {
        self.named_parameters()
            .into_iter()
            .map(|(n, p)| (n, p.tensor().detach()))
            .collect()
    }

    /// Copies `state` into the parameters (each on its own device). Missing, unexpected and
    /// wrongly shaped entries are errors naming the entries, and nothing changes unless every
    /// entry fits.
    fn load_state_dict(&self, state: &StateDict) -> std::result::Result<(), StateError> {
        crate::state::apply(self.named_parameters(), state)
    }

    /// Total number of trainable scalars.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.numel()).sum()
    }
}
