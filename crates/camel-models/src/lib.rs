//! camel-models: the models camel trains (an MLP, LeNet-5, a small CNN with BatchNorm and the
//! character-level GPT-mini), their data loaders and training loops, and the `camel`
//! command-line program.

#![warn(missing_docs)]

pub mod block;
pub mod cnn;
pub mod data;
pub mod gpt;
pub mod mlp;
pub mod plot;
pub mod regression;
pub mod run;
pub mod train;
pub mod xor;

pub use cnn::{LeNet5, SimpleCnn, SimpleCnnConfig};
pub use data::CharTokenizer;
pub use gpt::{GptConfig, GptMini};
pub use mlp::Mlp;

/// Errors of model code: a tensor error or a data error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From camel-core / camel-nn.
    #[error(transparent)]
    Core(#[from] camel_nn::Error),
    /// From a data loader.
    #[error(transparent)]
    Data(#[from] data::DataError),
    /// From the batch loader.
    #[error(transparent)]
    Loader(#[from] data::LoaderError),
    /// From encoding or decoding text.
    #[error(transparent)]
    Tokenizer(#[from] data::TokenizerError),
    /// From fetching or verifying a data set.
    #[error(transparent)]
    Fetch(#[from] data::fetch::FetchError),
    /// From saving or loading a state dict.
    #[error(transparent)]
    State(#[from] camel_nn::StateError),
    /// A file of a run folder could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// File involved.
        path: std::path::PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// An invalid setting or input, with what was expected.
    #[error("{0}")]
    Invalid(String),
    /// Training diverged: the loss became NaN or infinite.
    #[error(
        "training diverged: the loss is {loss} at {at}; the learning rate ({lr:e}) is likely too \
         high, or the inputs hold NaN or infinite values"
    )]
    Diverged {
        /// The non-finite loss read.
        loss: f32,
        /// Where it was read: epoch and step.
        at: String,
        /// The learning rate in use.
        lr: f32,
    },
}

/// Result alias of camel-models.
pub type Result<T> = std::result::Result<T, Error>;
