//! Embedding: a lookup table of learned vectors, one row per token id.

use crate::{Module, Parameter};
use camel_core::{Device, Error, Result, Tensor};

/// A lookup table of `num_embeddings` vectors of `dim` (PyTorch's `nn.Embedding`, initialized
/// N(0, 1)). Its input is an i64 tensor of indices; the output appends a dim of `dim`.
#[derive(Clone, Debug)]
pub struct Embedding {
    /// `[num_embeddings, dim]`.
    pub weight: Parameter,
}

impl Embedding {
    /// A table of `num_embeddings × dim` normal samples (seeded) on `device`.
    pub fn new(num_embeddings: usize, dim: usize, seed: u64, device: Device) -> Result<Embedding> {
        if num_embeddings == 0 || dim == 0 {
            return Err(Error::InvalidArgument {
                op: "Embedding",
                msg: format!("sizes must be ≥ 1, got {num_embeddings} × {dim}"),
            });
        }
        Ok(Embedding {
            weight: Parameter::new(Tensor::randn_seeded(&[num_embeddings, dim], seed, device)?)?,
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
}
