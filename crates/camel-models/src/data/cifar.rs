//! CIFAR-10 in its binary format: `data_batch_1.bin` … `data_batch_5.bin` (50,000 training
//! images) and `test_batch.bin` (10,000), each a run of 3073-byte records: one label byte
//! (0 … 9), then the 32 × 32 image as 1024 red, 1024 green and 1024 blue bytes, rows top to
//! bottom. Images come out as `[N, 3, 32, 32]` f32, each channel normalised with the training
//! set's mean and standard deviation.

use std::path::{Path, PathBuf};

use camel_nn::{Device, Result as TensorResult, Tensor};

use super::{DataError, Split};

/// How to get CIFAR-10, attached to [`DataError::Missing`].
const CIFAR10_HINT: &str = "fetch it with `camel data fetch cifar-10` (which unpacks the binary \
     batches into <data dir>/cifar-10/cifar-10-batches-bin/), or set CAMEL_DATA_DIR to the \
     folder that holds the data sets; see datasets/README.md";

/// Bytes of one record: the label, then 3 × 32 × 32 pixels.
pub const CIFAR10_RECORD_BYTES: usize = 1 + CIFAR10_IMAGE_LEN;
/// Pixels of one image: 3 channels of 32 × 32.
pub const CIFAR10_IMAGE_LEN: usize = 3 * 32 * 32;
/// The files of the training split, in order.
pub const CIFAR10_TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
/// The file of the test split.
pub const CIFAR10_TEST_FILE: &str = "test_batch.bin";
/// Per-channel (R, G, B) mean of the training pixels scaled to `[0, 1]`.
pub const CIFAR10_MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
/// Per-channel (R, G, B) standard deviation of the training pixels scaled to `[0, 1]`.
pub const CIFAR10_STD: [f32; 3] = [0.2470, 0.2435, 0.2616];
/// The classes, by label.
pub const CIFAR10_CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

/// Images and labels of one CIFAR-10 split (or of one batch file).
#[derive(Debug, Clone, PartialEq)]
pub struct CifarSplit {
    /// `n × 3 × 32 × 32` pixels (NCHW), each `(x / 255 − mean[c]) / std[c]`.
    pub images: Vec<f32>,
    /// One label per image, `0..10`.
    pub labels: Vec<u8>,
    /// Number of images.
    pub n: usize,
}

impl CifarSplit {
    /// The images' shape, `[n, 3, 32, 32]`.
    pub fn shape(&self) -> [usize; 4] {
        [self.n, 3, 32, 32]
    }

    /// The images `idx` as a flat `[idx.len(), 3, 32, 32]` batch and their labels as `i64`.
    /// Indices past the end are skipped.
    pub fn gather(&self, idx: &[usize]) -> (Vec<f32>, Vec<i64>) {
        let mut x = Vec::with_capacity(idx.len() * CIFAR10_IMAGE_LEN);
        let mut y = Vec::with_capacity(idx.len());
        for &i in idx.iter().filter(|&&i| i < self.n) {
            x.extend_from_slice(&self.images[i * CIFAR10_IMAGE_LEN..(i + 1) * CIFAR10_IMAGE_LEN]);
            y.push(self.labels[i] as i64);
        }
        (x, y)
    }

    /// All images as one `[n, 3, 32, 32]` tensor on `device`.
    pub fn images_tensor(&self, device: Device) -> TensorResult<Tensor> {
        Tensor::from_vec(self.images.clone(), &self.shape(), device)
    }

    /// The first `n` images (all when there are fewer).
    pub fn subset(&self, n: usize) -> CifarSplit {
        let n = n.min(self.n);
        CifarSplit {
            images: self.images[..n * CIFAR10_IMAGE_LEN].to_vec(),
            labels: self.labels[..n].to_vec(),
            n,
        }
    }
}

impl From<CifarSplit> for Split {
    /// The same images as a [`Split`] of 3 × 32 × 32 images, without copying them.
    fn from(s: CifarSplit) -> Split {
        Split {
            images: s.images,
            labels: s.labels,
            n: s.n,
            channels: 3,
            rows: 32,
            cols: 32,
        }
    }
}

/// CIFAR-10: its training and test splits.
#[derive(Debug, Clone, PartialEq)]
pub struct Cifar10 {
    /// The five training batches, 50,000 images.
    pub train: CifarSplit,
    /// The test batch, 10,000 images.
    pub test: CifarSplit,
}

impl Cifar10 {
    /// The data set's folder name under the data directory.
    pub const NAME: &'static str = "cifar-10";

    /// Loads the binary batches from `dir/cifar-10/cifar-10-batches-bin/` (where
    /// `camel data fetch cifar-10` unpacks them) or, when that folder does not exist and
    /// `dir/cifar-10/` holds `test_batch.bin`, from `dir/cifar-10/`; `dir` is usually
    /// [`super::data_dir`]. A missing folder or file is [`DataError::Missing`], naming where it
    /// looked and how to fetch the set; a damaged file is an error naming the file.
    pub fn load(dir: &Path) -> Result<Cifar10, DataError> {
        let root = dir.join(Self::NAME);
        let nested = root.join("cifar-10-batches-bin");
        let folder = if !nested.is_dir() && root.join(CIFAR10_TEST_FILE).is_file() {
            root
        } else {
            nested
        };
        if !folder.is_dir() {
            return Err(DataError::Missing {
                path: folder,
                hint: CIFAR10_HINT.to_string(),
            });
        }
        let files: Vec<PathBuf> = CIFAR10_TRAIN_FILES.iter().map(|f| folder.join(f)).collect();
        let train = read_cifar_batches(&files)?;
        let test = read_cifar_batch(folder.join(CIFAR10_TEST_FILE))?;
        Ok(Cifar10 { train, test })
    }
}

/// The records of several batch files, in order, as one split.
pub fn read_cifar_batches(paths: &[PathBuf]) -> Result<CifarSplit, DataError> {
    let mut all = CifarSplit {
        images: Vec::new(),
        labels: Vec::new(),
        n: 0,
    };
    for p in paths {
        let s = read_cifar_batch(p)?;
        all.images.extend(s.images);
        all.labels.extend(s.labels);
        all.n += s.n;
    }
    Ok(all)
}

/// Reads one batch file: its size must be a whole, non-zero number of 3073-byte records and
/// every label 0 … 9; an error names the file and, where one is at fault, the record.
pub fn read_cifar_batch(path: impl AsRef<Path>) -> Result<CifarSplit, DataError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            DataError::Missing {
                path: path.to_path_buf(),
                hint: CIFAR10_HINT.to_string(),
            }
        } else {
            DataError::Io {
                path: path.to_path_buf(),
                source: e,
            }
        }
    })?;
    parse_cifar_batch(path, &bytes)
}

/// [`read_cifar_batch`] of bytes already read from `path` (named in errors).
pub fn parse_cifar_batch(path: &Path, bytes: &[u8]) -> Result<CifarSplit, DataError> {
    let n = bytes.len() / CIFAR10_RECORD_BYTES;
    let rest = bytes.len() % CIFAR10_RECORD_BYTES;
    if rest != 0 {
        return Err(DataError::Mismatch {
            path: path.to_path_buf(),
            detail: format!(
                "{} bytes is not a whole number of {CIFAR10_RECORD_BYTES}-byte records: record \
                 {n} (0-based) is cut after {rest} bytes (truncated or not a CIFAR-10 binary batch)",
                bytes.len()
            ),
        });
    }
    if n == 0 {
        return Err(DataError::Mismatch {
            path: path.to_path_buf(),
            detail: "empty: a CIFAR-10 batch holds at least one 3073-byte record".into(),
        });
    }
    let mut images = Vec::new();
    images
        .try_reserve_exact(n * CIFAR10_IMAGE_LEN)
        .map_err(|_| DataError::Mismatch {
            path: path.to_path_buf(),
            detail: format!("out of memory for {n} images"),
        })?;
    let mut labels = Vec::with_capacity(n);
    for (i, rec) in bytes.chunks_exact(CIFAR10_RECORD_BYTES).enumerate() {
        let label = rec[0];
        if label > 9 {
            return Err(DataError::Mismatch {
                path: path.to_path_buf(),
                detail: format!(
                    "record {i} (0-based, at byte {}): label {label} is not a class 0 … 9",
                    i * CIFAR10_RECORD_BYTES
                ),
            });
        }
        labels.push(label);
        for (c, plane) in rec[1..].chunks_exact(32 * 32).enumerate() {
            let (m, s) = (CIFAR10_MEAN[c], CIFAR10_STD[c]);
            images.extend(plane.iter().map(|&p| (p as f32 / 255.0 - m) / s));
        }
    }
    Ok(CifarSplit { images, labels, n })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` records: label `i % 10`, pixel `(i + c + k) % 256` at channel `c`, offset `k`.
    fn records(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            v.push((i % 10) as u8);
            for c in 0..3 {
                for k in 0..1024 {
                    v.push(((i + c + k) % 256) as u8);
                }
            }
        }
        v
    }

    #[test]
    fn reads_a_generated_batch_in_nchw_normalised() {
        let dir = std::env::temp_dir().join(format!("camel-cifar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("data_batch_1.bin");
        std::fs::write(&p, records(12)).unwrap();
        let s = read_cifar_batch(&p).unwrap();
        assert_eq!((s.n, s.shape()), (12, [12, 3, 32, 32]));
        assert_eq!(
            s.labels,
            (0..12).map(|i| (i % 10) as u8).collect::<Vec<_>>()
        );
        for (i, c, k) in [(0, 0, 0), (3, 1, 77), (11, 2, 1023)] {
            let want = (((i + c + k) % 256) as f32 / 255.0 - CIFAR10_MEAN[c]) / CIFAR10_STD[c];
            assert_eq!(s.images[i * 3072 + c * 1024 + k], want, "({i}, {c}, {k})");
        }
        let (x, y) = s.gather(&[11, 2, 99]);
        assert_eq!((x.len(), y), (2 * 3072, vec![1, 2]));
        assert_eq!(&x[..3072], &s.images[11 * 3072..12 * 3072]);
        let t = s.images_tensor(Device::Cpu).unwrap();
        assert_eq!(t.shape(), &[12, 3, 32, 32]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_file_names_the_file_and_the_record() {
        let mut bytes = records(3);
        bytes.truncate(2 * CIFAR10_RECORD_BYTES + 100);
        let p = Path::new("/data/cifar10/data_batch_3.bin");
        let e = parse_cifar_batch(p, &bytes).unwrap_err().to_string();
        assert!(
            e.contains("data_batch_3.bin") && e.contains("record 2") && e.contains("100 bytes"),
            "{e}"
        );
        let e = parse_cifar_batch(p, &[]).unwrap_err().to_string();
        assert!(e.contains("data_batch_3.bin") && e.contains("empty"), "{e}");
    }

    #[test]
    fn a_label_past_9_names_the_file_and_the_record() {
        let mut bytes = records(4);
        bytes[2 * CIFAR10_RECORD_BYTES] = 10;
        let p = Path::new("test_batch.bin");
        let e = parse_cifar_batch(p, &bytes).unwrap_err().to_string();
        assert!(
            e.contains("test_batch.bin") && e.contains("record 2") && e.contains("label 10"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_set_says_how_to_get_it() {
        let e = Cifar10::load(Path::new("/nonexistent-camel-dir")).unwrap_err();
        assert!(matches!(e, DataError::Missing { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("/nonexistent-camel-dir/cifar-10/cifar-10-batches-bin")
                && msg.contains("camel data fetch cifar-10"),
            "{msg}"
        );
    }
}
