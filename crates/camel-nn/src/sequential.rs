use crate::{Buffer, Module, Parameter, TrainingFlag};
use camel_core::{Result, Tensor};
use std::fmt;

/// The `items` of `each` child, their names prefixed with the child's index (`"0.weight"`).
fn prefixed<'a, M: Module + 'a, T>(
    children: impl Iterator<Item = &'a M>,
    each: impl Fn(&M) -> Vec<(String, T)>,
) -> Vec<(String, T)> {
    children
        .enumerate()
        .flat_map(|(i, c)| {
            each(c)
                .into_iter()
                .map(move |(n, t)| (format!("{i}.{n}"), t))
        })
        .collect()
}

/// Modules applied in order; parameters and buffers are named `"<index>.<name>"`.
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
        prefixed(self.layers.iter(), |l| l.named_parameters())
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        prefixed(self.layers.iter(), |l| l.named_buffers())
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.layers.iter().for_each(|l| l.set_training(on));
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}

/// An indexed list of modules (PyTorch's `nn.ModuleList`): it holds layers that a model runs
/// itself, in whatever order it needs, and names their parameters and buffers `"<index>.<name>"`
/// (`"0.attn.c_attn.weight"`). `M` is one layer type (`ModuleList<Block>`, so each item keeps its
/// own methods) or `Box<dyn Module>` (the default) for a mix. It has no forward of its own.
///
/// ```
/// use camel_nn::{Linear, Module, ModuleList};
/// let list: ModuleList<Linear> = (0..3).map(|_| Linear::new(4, 4)).collect::<Result<_, _>>()?;
/// assert_eq!(list.len(), 3);
/// assert_eq!(list.named_parameters()[2].0, "1.weight");
/// # Ok::<(), camel_nn::Error>(())
/// ```
pub struct ModuleList<M: Module = Box<dyn Module>> {
    items: Vec<M>,
    training: TrainingFlag,
}

impl<M: Module> fmt::Debug for ModuleList<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ModuleList(")?;
        for (i, l) in self.items.iter().enumerate() {
            let child = format!("{l:?}").replace('\n', "\n  ");
            write!(f, "\n  ({i}): {child}")?;
        }
        if !self.items.is_empty() {
            f.write_str("\n")?;
        }
        f.write_str(")")
    }
}

impl<M: Module> Default for ModuleList<M> {
    fn default() -> Self {
        ModuleList::new()
    }
}

impl<M: Module> ModuleList<M> {
    /// An empty list.
    pub fn new() -> ModuleList<M> {
        ModuleList {
            items: Vec::new(),
            training: TrainingFlag::new(),
        }
    }

    /// Append a module.
    pub fn push(&mut self, m: M) {
        self.items.push(m);
    }

    /// The module at `index`, if any.
    pub fn get(&self, index: usize) -> Option<&M> {
        self.items.get(index)
    }

    /// The modules in order.
    pub fn iter(&self) -> std::slice::Iter<'_, M> {
        self.items.iter()
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there are no modules.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<M: Module> FromIterator<M> for ModuleList<M> {
    fn from_iter<I: IntoIterator<Item = M>>(iter: I) -> Self {
        ModuleList {
            items: iter.into_iter().collect(),
            training: TrainingFlag::new(),
        }
    }
}

impl<M: Module> std::ops::Index<usize> for ModuleList<M> {
    type Output = M;
    fn index(&self, index: usize) -> &M {
        &self.items[index]
    }
}

impl<'a, M: Module> IntoIterator for &'a ModuleList<M> {
    type Item = &'a M;
    type IntoIter = std::slice::Iter<'a, M>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<M: Module> Module for ModuleList<M> {
    /// A list has no forward (the model runs its items): always an error naming the list.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Err(camel_core::Error::InvalidArgument {
            op: "ModuleList",
            msg: format!(
                "a ModuleList of {} modules has no forward; run its items (input {:?})",
                self.items.len(),
                x.shape()
            ),
        })
    }

    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        prefixed(self.items.iter(), |l| l.named_parameters())
    }

    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        prefixed(self.items.iter(), |l| l.named_buffers())
    }

    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.items.iter().for_each(|l| l.set_training(on));
    }

    fn is_training(&self) -> bool {
        self.training.get()
    }
}
