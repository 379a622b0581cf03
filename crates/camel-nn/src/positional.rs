//! Positional encodings: a learned table of position vectors (GPT's `wpe`) or the fixed
//! sinusoidal table of "Attention Is All You Need", added to a `[B, T, C]` input.

use crate::{Buffer, EmbeddingOptions, Module, Parameter, TrainingFlag};
use camel_core::{Device, Error, Generator, Result, Tensor};
use std::fmt;

/// Where the position vectors come from.
#[derive(Clone, Debug)]
enum Table {
    /// A trainable `[block_size, n_embd]` parameter, named `weight`.
    Learned(Parameter),
    /// A fixed `[block_size, n_embd]` buffer, named `pe`.
    Sinusoidal(Buffer),
}

/// Adds a position vector to each of the `T` positions of `x: [.., T, C]` (PyTorch users write
/// `x + wpe(arange(T))`): a learned table ([`PositionalEncoding::learned`], parameter `weight`)
/// or the sinusoidal one ([`PositionalEncoding::sinusoidal`], buffer `pe`). Positions run up to
/// `block_size`; more is an error naming it.
#[derive(Clone)]
pub struct PositionalEncoding {
    table: Table,
    block_size: usize,
    n_embd: usize,
    training: TrainingFlag,
}

impl fmt::Debug for PositionalEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.table {
            Table::Learned(_) => "learned",
            Table::Sinusoidal(_) => "sinusoidal",
        };
        write!(
            f,
            "PositionalEncoding({kind}, block_size={}, n_embd={})",
            self.block_size, self.n_embd
        )
    }
}

fn check_sizes(block_size: usize, n_embd: usize) -> Result<()> {
    if block_size == 0 || n_embd == 0 {
        return Err(Error::InvalidArgument {
            op: "PositionalEncoding",
            msg: format!("block_size and n_embd must be ≥ 1, got {block_size} and {n_embd}"),
        });
    }
    Ok(())
}

impl PositionalEncoding {
    /// A learned `[block_size, n_embd]` table on the CPU, N(0, 1) as PyTorch's `nn.Embedding`,
    /// drawn from the process-wide generator.
    ///
    /// ```
    /// use camel_nn::{Device, Module, PositionalEncoding, Tensor};
    /// let pos = PositionalEncoding::learned(8, 4)?;
    /// let y = pos.forward(&Tensor::zeros(&[2, 5, 4], Device::Cpu)?)?;
    /// assert_eq!(y.shape(), &[2, 5, 4]);
    /// assert!(pos.forward(&Tensor::zeros(&[2, 9, 4], Device::Cpu)?).is_err()); // 9 > block_size
    /// # Ok::<(), camel_nn::Error>(())
    /// ```
    pub fn learned(block_size: usize, n_embd: usize) -> Result<PositionalEncoding> {
        PositionalEncoding::learned_with(block_size, n_embd, EmbeddingOptions::default())
    }

    /// A learned table with explicit options (seed, device).
    pub fn learned_with(
        block_size: usize,
        n_embd: usize,
        o: EmbeddingOptions,
    ) -> Result<PositionalEncoding> {
        check_sizes(block_size, n_embd)?;
        let shape = [block_size, n_embd];
        let table = match o.seed {
            Some(seed) => Tensor::randn_with(&shape, &mut Generator::new(seed), o.device)?,
            None => Tensor::randn(&shape, o.device)?,
        };
        Ok(PositionalEncoding {
            table: Table::Learned(Parameter::new(table)?),
            block_size,
            n_embd,
            training: TrainingFlag::new(),
        })
    }

    /// The fixed sinusoidal table on the CPU: `pe[p, 2i] = sin(p / 10000^(2i / n_embd))`,
    /// `pe[p, 2i + 1] = cos(p / 10000^(2i / n_embd))`, held as the buffer `pe`.
    pub fn sinusoidal(block_size: usize, n_embd: usize) -> Result<PositionalEncoding> {
        check_sizes(block_size, n_embd)?;
        let n = camel_core::layout::checked_numel("PositionalEncoding", &[block_size, n_embd])?;
        let mut pe = Vec::new();
        pe.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
            op: "PositionalEncoding",
            bytes: n as u128 * 4,
        })?;
        for p in 0..block_size {
            for c in 0..n_embd {
                let i = (c / 2) * 2;
                let angle = p as f64 / 10000f64.powf(i as f64 / n_embd as f64);
                pe.push(if c % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
            }
        }
        let table = Tensor::from_vec(pe, &[block_size, n_embd], Device::Cpu)?;
        Ok(PositionalEncoding {
            table: Table::Sinusoidal(Buffer::new(table)),
            block_size,
            n_embd,
            training: TrainingFlag::new(),
        })
    }

    /// The longest sequence it encodes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The table, `[block_size, n_embd]`.
    pub fn table(&self) -> Tensor {
        match &self.table {
            Table::Learned(p) => p.tensor(),
            Table::Sinusoidal(b) => b.tensor(),
        }
    }

    /// `x + table[start .. start + T]` for `x: [.., T, C]`: the positions of a chunk that
    /// starts at `start` (generation with a key/value cache feeds one position at a time).
    pub fn forward_at(&self, x: &Tensor, start: usize) -> Result<Tensor> {
        let shape = x.shape();
        if shape.len() < 2 || shape[shape.len() - 1] != self.n_embd {
            return Err(Error::BadShape {
                op: "PositionalEncoding",
                shape: shape.to_vec(),
                expected: format!("[.., T, {}] (n_embd = {})", self.n_embd, self.n_embd),
            });
        }
        let t = shape[shape.len() - 2];
        if start.checked_add(t).is_none_or(|end| end > self.block_size) {
            return Err(Error::InvalidArgument {
                op: "PositionalEncoding",
                msg: format!(
                    "positions {start}..{start}+{t} exceed block_size = {} (input {shape:?})",
                    self.block_size
                ),
            });
        }
        x.add(&self.table().narrow(0, start, t)?)
    }
}

impl Module for PositionalEncoding {
    /// `x + table[0 .. T]` for `x: [.., T, C]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_at(x, 0)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        match &self.table {
            Table::Learned(p) => vec![("weight".to_string(), p.clone())],
            Table::Sinusoidal(_) => Vec::new(),
        }
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        match &self.table {
            Table::Learned(_) => Vec::new(),
            Table::Sinusoidal(b) => vec![("pe".to_string(), b.clone())],
        }
    }

    fn set_training(&self, on: bool) {
        self.training.set(on)
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
