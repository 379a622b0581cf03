//! Embedding: a lookup table of learned vectors, one row per token id.

use crate::{Module, Parameter, TrainingFlag};
use camel_core::{Device, Error, Generator, Result, Tensor};
use std::fmt;

/// Options of [`Embedding::with_options`].
#[derive(Clone, Copy, Debug, Default)]
pub struct EmbeddingOptions {
    /// Seed of the initialization: `None` (the default) draws from the process-wide generator
    /// ([`camel_core::manual_seed`]); `Some(seed)` from a private one.
    pub seed: Option<u64>,
    /// Device of the table.
    pub device: Device,
}

/// A lookup table of `num_embeddings` vectors of `dim` (PyTorch's `nn.Embedding`, initialized
/// N(0, 1)). Its input is an i64 tensor of indices; the output appends a dim of `dim`.
#[derive(Clone)]
pub struct Embedding {
    /// `[num_embeddings, dim]`.
    pub weight: Parameter,
    training: TrainingFlag,
}

impl fmt::Debug for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.weight.tensor();
        write!(f, "Embedding({}, {})", s.shape()[0], s.shape()[1])
    }
}

impl Embedding {
    /// A table of `num_embeddings × dim` normal samples on the CPU, drawn from the
    /// process-wide generator (PyTorch's `nn.Embedding(num_embeddings, dim)`).
    ///
    /// ```
    /// use camel_nn::{Embedding, Module, Tensor, Device};
    /// let e = Embedding::new(10, 4)?;
    /// let ids = Tensor::from_vec_i64(vec![1, 7], &[2], Device::Cpu)?;
    /// assert_eq!(e.forward(&ids)?.shape(), &[2, 4]);
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn new(num_embeddings: usize, dim: usize) -> Result<Embedding> {
        Embedding::with_options(num_embeddings, dim, EmbeddingOptions::default())
    }

    /// A table with explicit options (seed, device).
    pub fn with_options(
        num_embeddings: usize,
        dim: usize,
        o: EmbeddingOptions,
    ) -> Result<Embedding> {
        if num_embeddings == 0 || dim == 0 {
            return Err(Error::InvalidArgument {
                op: "Embedding",
                msg: format!("sizes must be ≥ 1, got {num_embeddings} × {dim}"),
            });
        }
        let shape = [num_embeddings, dim];
        let table = match o.seed {
            Some(seed) => Tensor::randn_with(&shape, &mut Generator::new(seed), o.device)?,
            None => Tensor::randn(&shape, o.device)?,
        };
        Ok(Embedding {
            weight: Parameter::new(table)?,
            training: TrainingFlag::new(),
        })
    }
}

impl Module for Embedding {
    /// Rows of the table picked by the i64 indices `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.weight.tensor().embedding(x)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        vec![("weight".to_string(), self.weight.clone())]
    }

    fn set_training(&self, on: bool) {
        self.training.set(on)
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
