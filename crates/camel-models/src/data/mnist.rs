//! MNIST and Fashion-MNIST: loading, normalization and batch gathering.

use std::path::Path;

use super::{read_idx_images, read_idx_labels, DataError, MISSING_HINT};

/// Mean of MNIST training pixels scaled to `[0, 1]`.
pub const MNIST_MEAN: f32 = 0.1307;
/// Standard deviation of MNIST training pixels scaled to `[0, 1]`.
pub const MNIST_STD: f32 = 0.3081;

/// Number of classes in MNIST and Fashion-MNIST.
const NUM_CLASSES: u8 = 10;

/// One split (train or test) of an image data set, already normalized: MNIST-style grey images
/// (`channels` 1) or CIFAR-10's colour ones (`channels` 3, from a [`super::CifarSplit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// `n * channels * rows * cols` pixels, each image `[channels, rows, cols]` (NCHW) and
    /// row-major; MNIST-style pixels as `(x/255 - MNIST_MEAN) / MNIST_STD`, CIFAR-10's per
    /// channel with its own mean and standard deviation.
    pub images: Vec<f32>,
    /// One label per image, `0..10`.
    pub labels: Vec<u8>,
    /// Number of images.
    pub n: usize,
    /// Channels per image: 1 for MNIST-style sets, 3 for CIFAR-10.
    pub channels: usize,
    /// Image height.
    pub rows: usize,
    /// Image width.
    pub cols: usize,
}

/// MNIST-style data set with its train and test splits.
#[derive(Debug, Clone, PartialEq)]
pub struct Mnist {
    /// Training split (60,000 images for MNIST and Fashion-MNIST).
    pub train: Split,
    /// Test split (10,000 images for MNIST and Fashion-MNIST).
    pub test: Split,
}

impl Mnist {
    /// Data set names [`Mnist::load`] accepts.
    pub const NAMES: [&'static str; 2] = ["mnist", "fashion-mnist"];

    /// Loads `dir/name/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`, where
    /// `name` is `"mnist"` or `"fashion-mnist"` and `dir` is usually [`super::data_dir`].
    pub fn load(dir: &Path, name: &str) -> Result<Self, DataError> {
        let root = dir.join(name);
        if !Self::NAMES.contains(&name) {
            return Err(DataError::Mismatch {
                path: root,
                detail: format!(
                    "unknown data set {name:?}; expected one of {:?}",
                    Self::NAMES
                ),
            });
        }
        if !root.is_dir() {
            return Err(DataError::Missing {
                path: root,
                hint: MISSING_HINT.to_string(),
            });
        }
        let train = Split::load(&root, "train")?;
        let test = Split::load(&root, "t10k")?;
        // A model sized for the training images cannot read test images of another size, so the
        // mismatch is reported here, naming both files, rather than as a layer's shape error
        // after a whole epoch.
        if (train.rows, train.cols) != (test.rows, test.cols) {
            return Err(DataError::Mismatch {
                path: root.join("t10k-images-idx3-ubyte.gz"),
                detail: format!(
                    "test images are {}×{}, but {} holds {}×{} training images",
                    test.rows,
                    test.cols,
                    root.join("train-images-idx3-ubyte.gz").display(),
                    train.rows,
                    train.cols
                ),
            });
        }
        Ok(Mnist { train, test })
    }
}

impl Split {
    /// Loads `<prefix>-images-idx3-ubyte.gz` and `<prefix>-labels-idx1-ubyte.gz` from `dir`
    /// and checks they agree (same count, labels below 10).
    fn load(dir: &Path, prefix: &str) -> Result<Self, DataError> {
        let images_path = dir.join(format!("{prefix}-images-idx3-ubyte.gz"));
        let labels_path = dir.join(format!("{prefix}-labels-idx1-ubyte.gz"));
        let (pixels, n, rows, cols) = read_idx_images(&images_path)?;
        let labels = read_idx_labels(&labels_path)?;
        if n == 0 {
            // Training or evaluating on no examples gives a NaN loss and accuracy.
            return Err(DataError::Mismatch {
                path: images_path,
                detail: "holds 0 images; a split needs at least one example".into(),
            });
        }
        if labels.len() != n {
            return Err(DataError::Mismatch {
                path: labels_path,
                detail: format!(
                    "{} labels, but {} holds {n} images",
                    labels.len(),
                    images_path.display()
                ),
            });
        }
        if let Some((i, &l)) = labels.iter().enumerate().find(|(_, &l)| l >= NUM_CLASSES) {
            return Err(DataError::Mismatch {
                path: labels_path,
                detail: format!("label {l} at index {i} is out of range 0..{NUM_CLASSES}"),
            });
        }
        Ok(Split {
            images: normalize(&pixels),
            labels,
            n,
            channels: 1,
            rows,
            cols,
        })
    }

    /// Values per image (`channels * rows * cols`: 784 for MNIST, 3072 for CIFAR-10).
    pub fn image_len(&self) -> usize {
        self.channels * self.rows * self.cols
    }

    /// The shape of one image, `[channels, rows, cols]`.
    pub fn image_shape(&self) -> [usize; 3] {
        [self.channels, self.rows, self.cols]
    }

    /// The first `n` examples (all of them if `n >= self.n`).
    pub fn subset(&self, n: usize) -> Split {
        let n = n.min(self.n);
        Split {
            images: self.images[..n * self.image_len()].to_vec(),
            labels: self.labels[..n].to_vec(),
            n,
            channels: self.channels,
            rows: self.rows,
            cols: self.cols,
        }
    }

    /// Features (`idx.len() * image_len()` values, in `idx` order) and labels as `i64`
    /// for one batch.
    ///
    /// # Panics
    /// If an index is `>= self.n`.
    pub fn gather(&self, idx: &[usize]) -> (Vec<f32>, Vec<i64>) {
        let len = self.image_len();
        let mut x = Vec::with_capacity(idx.len() * len);
        let mut y = Vec::with_capacity(idx.len());
        for &i in idx {
            assert!(
                i < self.n,
                "index {i} out of range for split of {} examples",
                self.n
            );
            x.extend_from_slice(&self.images[i * len..(i + 1) * len]);
            y.push(i64::from(self.labels[i]));
        }
        (x, y)
    }
}

/// `(p/255 - MNIST_MEAN) / MNIST_STD` for every byte, through a 256-entry table.
fn normalize(pixels: &[u8]) -> Vec<f32> {
    let table: [f32; 256] = std::array::from_fn(|p| (p as f32 / 255.0 - MNIST_MEAN) / MNIST_STD);
    pixels.iter().map(|&p| table[p as usize]).collect()
}
