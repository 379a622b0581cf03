//! camel-nn: modules, parameters and layers, written once against [`Tensor`] so they run on
//! every device. It re-exports what model code needs from camel-core.
//!
//! Layers take their required sizes positionally and everything else through one options
//! struct: `Linear::new(in, out)` or `Linear::with_options(in, out, LinearOptions { .. })`, and
//! the same for [`Embedding`] and [`LayerNorm`]. Initial weights come from the process-wide
//! generator ([`manual_seed`]) unless the options name a seed. `examples/crate-user/` in the
//! repository is a crate of its own that depends on camel-nn and trains a model.
//!
//! ```
//! use camel_nn::{Device, Linear, Module, ReLU, Sequential, Tensor};
//! camel_nn::manual_seed(0); // makes the initial weights the same on every run
//! // a 4-8-3 MLP
//! let model = Sequential::new()
//!     .add(Linear::new(4, 8)?)
//!     .add(ReLU)
//!     .add(Linear::new(8, 3)?);
//! let x = Tensor::randn_seeded(&[5, 4], 42, Device::Cpu)?;
//! let y = Tensor::from_vec_i64(vec![0, 1, 2, 1, 0], &[5], Device::Cpu)?;
//! let loss = model.forward(&x)?.cross_entropy(&y)?;
//! loss.backward()?;
//! for (name, p) in model.named_parameters() {
//!     assert_eq!(p.grad().unwrap().shape(), p.tensor().shape(), "{name}");
//! }
//! # Ok::<(), camel_nn::Error>(())
//! ```

#![warn(missing_docs)]

mod activation;
mod attention;
mod batchnorm;
mod block;
mod buffer;
mod conv;
mod dropout;
mod embedding;
pub mod init;
mod linear;
mod module;
mod norm;
mod parameter;
mod pool;
mod positional;
mod sequential;
pub mod state;

pub use activation::{ReLU, Sigmoid, Tanh, GELU};
pub use attention::{AttentionOptions, AttentionPath, KvCache, MultiHeadAttention};
pub use batchnorm::{BatchNorm1d, BatchNorm2d, BatchNormOptions};
pub use block::{Block, BlockOptions, Mlp};
pub use buffer::Buffer;
pub use conv::{Conv2d, Conv2dLayerOptions, Size2d};
pub use dropout::Dropout;
pub use embedding::{Embedding, EmbeddingOptions};
pub use linear::{Linear, LinearOptions};
pub use module::{Module, TrainingFlag};
pub use norm::{LayerNorm, LayerNormOptions};
pub use parameter::Parameter;
pub use pool::{AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d};
pub use positional::PositionalEncoding;
pub use sequential::{ModuleList, Sequential};
pub use state::{load_safetensors, save_safetensors, StateDict, StateError};

pub use camel_core::{
    self as core, autocast, autocast_guard, cuda_available, gradcheck, manual_seed, no_grad,
    no_grad_guard, testing, Activation, Conv2dOptions, DType, Device, Error, Generator,
    GradcheckOptions, NoGradGuard, Result, StepGuard, Tensor, UpdateRule,
};
