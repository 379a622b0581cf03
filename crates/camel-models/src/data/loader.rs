//! Index batching with an optional seeded shuffle per epoch.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Invalid [`DataLoader`] configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoaderError {
    /// `batch_size` was 0.
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
}

/// Splits `0..len` into batches of indices, optionally shuffled per epoch.
///
/// ```
/// # use camel_models::data::DataLoader;
/// let loader = DataLoader::new(10, 4).unwrap().shuffle(Some(7)).drop_last(false);
/// assert_eq!(loader.num_batches(), 3);
/// for batch in loader.epoch(0) {
///     assert!(batch.len() <= 4);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLoader {
    len: usize,
    batch_size: usize,
    seed: Option<u64>,
    drop_last: bool,
}

impl DataLoader {
    /// Loader over `len` examples in batches of `batch_size`: in order, last
    /// partial batch kept. Fails if `batch_size` is 0.
    pub fn new(len: usize, batch_size: usize) -> Result<Self, LoaderError> {
        if batch_size == 0 {
            return Err(LoaderError::ZeroBatchSize);
        }
        Ok(DataLoader {
            len,
            batch_size,
            seed: None,
            drop_last: false,
        })
    }

    /// Shuffles each epoch with `StdRng` seeded by `seed + epoch` (wrapping);
    /// `None` keeps the natural order.
    pub fn shuffle(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Drops the last batch if it is smaller than `batch_size`.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no examples.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Batches per epoch.
    pub fn num_batches(&self) -> usize {
        if self.drop_last {
            self.len / self.batch_size
        } else {
            self.len.div_ceil(self.batch_size)
        }
    }

    /// The batches of epoch `epoch`; the same seed and epoch give the same batches.
    pub fn epoch(&self, epoch: u64) -> Batches {
        let mut order: Vec<usize> = (0..self.len).collect();
        if let Some(seed) = self.seed {
            order.shuffle(&mut StdRng::seed_from_u64(seed.wrapping_add(epoch)));
        }
        Batches {
            order,
            pos: 0,
            batch_size: self.batch_size,
            remaining: self.num_batches(),
        }
    }
}

/// Iterator over one epoch's index batches, from [`DataLoader::epoch`].
#[derive(Debug, Clone)]
pub struct Batches {
    order: Vec<usize>,
    pos: usize,
    batch_size: usize,
    remaining: usize,
}

impl Iterator for Batches {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let end = (self.pos + self.batch_size).min(self.order.len());
        let batch = self.order[self.pos..end].to_vec();
        self.pos = end;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Batches {}
