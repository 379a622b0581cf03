use crate::{Module, Parameter, TrainingFlag};
use camel_core::{Result, Tensor};
use std::fmt;

/// Modules applied in order; parameters are named `"<index>.<name>"`.
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
    training: TrainingFlag,
}

impl fmt::Debug for Sequential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sequential(")?;
        for (i, l) in self.layers.iter().enumerate() {
            // Nested modules are indented one more level.
            let child = format!("{l:?}").replace('\n', "\n  ");
            write!(f, "\n  ({i}): {child}")?;
        }
        if !self.layers.is_empty() {
            f.write_str("\n")?;
        }
        f.write_str(")")
    }
}

impl Default for Sequential {
    fn default() -> Self {
        Sequential::new()
    }
}

impl Sequential {
    /// An empty sequence.
    pub fn new() -> Sequential {
        Sequential {
            layers: Vec::new(),
            training: TrainingFlag::new(),
        }
    }

    /// Append a module (builder style).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }

    /// Append a module in place.
    pub fn push(&mut self, m: impl Module + 'static) {
        self.layers.push(Box::new(m));
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when there are no modules.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for l in &self.layers {
            h = l.forward(&h)?;
        }
        Ok(h)
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(i, l)| {
                l.named_parameters()
                    .into_iter()
                    .map(move |(n, p)| (format!("{i}.{n}"), p))
            })
            .collect()
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.layers.iter().for_each(|l| l.set_training(on));
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
