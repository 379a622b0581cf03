use crate::state::{StateDict, StateError};
use crate::{Buffer, Parameter};
use camel_core::{Device, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// A module's training-mode switch (PyTorch's `Module.training`), set through a shared
/// reference so that `model.eval()` works on a model held by `&` or `Arc`. On (training) when
/// made; a clone starts in the mode of the original.
#[derive(Debug)]
pub struct TrainingFlag(AtomicBool);

impl TrainingFlag {
    /// A flag in training mode.
    pub const fn new() -> TrainingFlag {
        TrainingFlag(AtomicBool::new(true))
    }

    /// Whether training mode is on.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Switch training mode on or off.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed)
    }
}

impl Default for TrainingFlag {
    fn default() -> Self {
        TrainingFlag::new()
    }
}

impl Clone for TrainingFlag {
    fn clone(&self) -> Self {
        TrainingFlag(AtomicBool::new(self.get()))
    }
}

/// A layer or model: a forward pass plus named parameters.
///
/// # Examples
///
/// `Debug` prints the structure, as PyTorch prints a model:
///
/// ```
/// use camel_nn::{Device, Linear, Module, ReLU, Sequential, Tensor};
/// let model = Sequential::new().add(Linear::new(4, 8)?).add(ReLU).add(Linear::new(8, 3)?);
/// let y = model.forward(&Tensor::zeros(&[5, 4], Device::Cpu)?)?;
/// assert_eq!(y.shape(), &[5, 3]);
/// assert_eq!(model.parameters().len(), 4);
/// assert_eq!(
///     format!("{model:?}"),
///     "Sequential(\n  (0): Linear(in_features=4, out_features=8, bias=true)\n  (1): ReLU()\n  \
///      (2): Linear(in_features=8, out_features=3, bias=true)\n)"
/// );
/// model.eval();
/// assert!(!model.is_training());
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub trait Module: Send + Sync + std::fmt::Debug {
    /// Run the module on `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// Parameters with dotted names (`"0.weight"`), in a stable order.
    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        Vec::new()
    }

    /// Buffers (non-trainable tensors such as a sinusoidal position table) with dotted names,
    /// in a stable order. Saved in [`Module::state_dict`] and moved by [`Module::to`] with the
    /// parameters, never trained.
    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        Vec::new()
    }

    /// The buffers alone.
    fn buffers(&self) -> Vec<Buffer> {
        self.named_buffers().into_iter().map(|(_, b)| b).collect()
    }

    /// The parameters alone.
    fn parameters(&self) -> Vec<Parameter> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    /// Switch training mode on (`true`) or evaluation mode (`false`), in this module and every
    /// module it holds. Leaf modules keep a [`TrainingFlag`]; containers also forward the call.
    fn set_training(&self, on: bool);

    /// Whether the module is in training mode.
    fn is_training(&self) -> bool;

    /// Training mode (PyTorch's `model.train()`).
    fn train(&self) {
        self.set_training(true)
    }

    /// Evaluation mode (PyTorch's `model.eval()`).
    fn eval(&self) {
        self.set_training(false)
    }

    /// Move every parameter and buffer to `device`.
    fn to(&self, device: Device) -> Result<()> {
        for p in self.parameters() {
            p.to(device)?;
        }
        for b in self.buffers() {
            b.to(device)?;
        }
        Ok(())
    }

    /// Clear every parameter's gradient.
    fn zero_grad(&self) {
        self.parameters().iter().for_each(|p| p.zero_grad());
    }

    /// Every parameter and buffer by its dotted name (`layers.0.weight`), detached: the
    /// checkpoint of the module. The tensors stay on their device and share storage with the
    /// parameters and buffers.
    fn state_dict(&self) -> StateDict {
        self.named_parameters()
            .into_iter()
            .map(|(n, p)| (n, p.tensor().detach()))
            .chain(
                self.named_buffers()
                    .into_iter()
                    .map(|(n, b)| (n, b.tensor().detach())),
            )
            .collect()
    }

    /// Copies `state` into the parameters and buffers (each on its own device). Missing,
    /// unexpected and wrongly shaped entries are errors naming the entries, and nothing changes
    /// unless every entry fits.
    fn load_state_dict(&self, state: &StateDict) -> std::result::Result<(), StateError> {
        crate::state::apply(self.named_parameters(), self.named_buffers(), state)
    }

    /// Total number of trainable scalars.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|p| p.numel()).sum()
    }
}

/// A boxed module is a module, so containers hold any mix of layers (`ModuleList<Box<dyn
/// Module>>`).
impl Module for Box<dyn Module> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        (**self).named_parameters()
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        (**self).named_buffers()
    }

    fn set_training(&self, on: bool) {
        (**self).set_training(on)
    }

    fn is_training(&self) -> bool {
        (**self).is_training()
    }

    fn to(&self, device: Device) -> Result<()> {
        (**self).to(device)
    }

    fn state_dict(&self) -> StateDict {
        (**self).state_dict()
    }

    fn load_state_dict(&self, state: &StateDict) -> std::result::Result<(), StateError> {
        (**self).load_state_dict(state)
    }
}
