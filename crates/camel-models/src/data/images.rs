//! The image classification sets the `camel` program trains on, by name: MNIST and
//! Fashion-MNIST (1 × 28 × 28) and CIFAR-10 (3 × 32 × 32), each loaded into [`Split`]s of one
//! type so that the training loop, evaluation and checkpoints treat them alike.

use std::path::Path;

use super::{Cifar10, DataError, Mnist, Split};

/// The canonical names of the image sets [`ImageSet::load`] reads, as `camel data list` and
/// `camel data fetch` spell them.
pub const IMAGE_SETS: [&str; 3] = ["mnist", "fashion-mnist", "cifar-10"];

/// The train and test splits of an image classification set, of the same image shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    /// Canonical name (one of [`IMAGE_SETS`]).
    pub name: &'static str,
    /// Training split.
    pub train: Split,
    /// Test split.
    pub test: Split,
}

impl ImageSet {
    /// The canonical name of `name`: one of [`IMAGE_SETS`], or `cifar10` for `cifar-10`.
    pub fn canonical(name: &str) -> Option<&'static str> {
        match name {
            "cifar10" => Some("cifar-10"),
            _ => IMAGE_SETS.iter().copied().find(|&n| n == name),
        }
    }

    /// The shape of one image of the set `name`, `[channels, rows, cols]`, known before any file
    /// is read (MNIST-style files state their size, which [`Mnist::load`] checks on reading).
    pub fn image_shape(name: &str) -> Option<[usize; 3]> {
        match Self::canonical(name)? {
            "cifar-10" => Some([3, 32, 32]),
            _ => Some([1, 28, 28]),
        }
    }

    /// Loads the set `name` (see [`ImageSet::canonical`]) from `dir`, usually
    /// [`super::data_dir`]: MNIST-style sets through [`Mnist::load`], CIFAR-10 through
    /// [`Cifar10::load`].
    pub fn load(dir: &Path, name: &str) -> Result<ImageSet, DataError> {
        match Self::canonical(name) {
            Some(name @ "cifar-10") => {
                let ds = Cifar10::load(dir)?;
                Ok(ImageSet {
                    name,
                    train: ds.train.into(),
                    test: ds.test.into(),
                })
            }
            Some(name) => {
                let ds = Mnist::load(dir, name)?;
                Ok(ImageSet {
                    name,
                    train: ds.train,
                    test: ds.test,
                })
            }
            None => Err(DataError::Mismatch {
                path: dir.join(name),
                detail: format!("unknown image set {name:?}; expected one of {IMAGE_SETS:?}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_shapes() {
        assert_eq!(ImageSet::canonical("cifar10"), Some("cifar-10"));
        assert_eq!(ImageSet::canonical("fashion-mnist"), Some("fashion-mnist"));
        assert_eq!(ImageSet::canonical("cifar"), None);
        assert_eq!(ImageSet::image_shape("cifar10"), Some([3, 32, 32]));
        assert_eq!(ImageSet::image_shape("mnist"), Some([1, 28, 28]));
        assert!(ImageSet::load(Path::new("/nonexistent"), "imagenet").is_err());
    }
}
