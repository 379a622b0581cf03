//! Data sets and batching: IDX (MNIST-style) readers, [`Mnist`] and [`Cifar10`] loading, the
//! image sets by name ([`ImageSet`]), image augmentation ([`Augment`]) and a seeded
//! [`DataLoader`] that yields index batches.
//!
//! Data files live under `<data dir>/<name>/<file>` (see [`data_dir`]): MNIST and Tiny
//! Shakespeare are committed in the repository's `datasets/`, larger sets are fetched by
//! `camel data fetch`; see `datasets/README.md` at the workspace root.

mod augment;
mod cifar;
pub mod fetch;
mod idx;
mod images;
mod loader;
mod mnist;
mod table;
mod text;

use std::path::{Path, PathBuf};

pub use augment::{hflip, Augment};
pub use cifar::{
    parse_cifar_batch, read_cifar_batch, read_cifar_batches, Cifar10, CifarSplit, CIFAR10_CLASSES,
    CIFAR10_IMAGE_LEN, CIFAR10_MEAN, CIFAR10_RECORD_BYTES, CIFAR10_STD, CIFAR10_TEST_FILE,
    CIFAR10_TRAIN_FILES,
};
pub use idx::{read_idx_images, read_idx_labels};
pub use images::{ImageSet, IMAGE_SETS};
pub use loader::{Batches, DataLoader, LoaderError};
pub use mnist::{Mnist, Split, MNIST_MEAN, MNIST_STD};
pub use table::{
    sales_example_tsv, train_test_split, SalesFormula, Selection, Standardizer, Table,
    SALES_COLUMNS, SALES_FORMULA,
};
pub use text::{uniform_index, CharTokenizer, TextData, TextSplit, TokenizerError};

/// Environment variable that names the folder holding the data sets (read by
/// `camel_core::config::data_dir`).
pub const DATA_DIR_ENV: &str = "CAMEL_DATA_DIR";

/// Hint attached to [`DataError::Missing`].
pub(crate) const MISSING_HINT: &str = "fetch it with `camel data fetch NAME`, or set CAMEL_DATA_DIR \
     to the folder that holds the data sets (layout <CAMEL_DATA_DIR>/<name>/<file>); see datasets/README.md";

/// Errors from reading data files. Every variant names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be opened or read.
    #[error("{}: I/O error: {source}", .path.display())]
    Io {
        /// File being read.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file does not start with the expected IDX magic number.
    #[error("{}: bad magic number: expected {expected:#010x}, found {found:#010x}", .path.display())]
    BadMagic {
        /// File being read.
        path: PathBuf,
        /// Magic number the reader expected.
        expected: u32,
        /// Magic number found in the file.
        found: u32,
    },
    /// The (decompressed) file is shorter than its header says.
    #[error(
        "{}: truncated: expected {expected_bytes} bytes (after decompression), found {found_bytes}",
        .path.display()
    )]
    Truncated {
        /// File being read.
        path: PathBuf,
        /// Bytes the header (or format) requires.
        expected_bytes: u64,
        /// Bytes actually present.
        found_bytes: u64,
    },
    /// The contents are inconsistent (count mismatch, label out of range,
    /// trailing bytes, impossible sizes).
    #[error("{}: {detail}", .path.display())]
    Mismatch {
        /// File being read.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The gzip stream is corrupt (bad deflate data, checksum or trailer).
    #[error("{}: corrupt gzip stream: {detail}", .path.display())]
    Corrupt {
        /// File being read.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A table cell is not a finite number, or is missing.
    #[error("{}: line {line}, column {column:?}: {}", .path.display(), match .value { Some(v) => format!("not a number: {v:?}"), None => "missing value".to_string() })]
    BadCell {
        /// File being read.
        path: PathBuf,
        /// 1-based line of the file (the header is line 1).
        line: usize,
        /// Column name from the header.
        column: String,
        /// The cell's text; `None` when the cell is empty or absent.
        value: Option<String>,
    },
    /// A named column is not in the table's header.
    #[error("{}: no column {column:?}; the header has {available:?}", .path.display())]
    MissingColumn {
        /// File being read.
        path: PathBuf,
        /// Column asked for.
        column: String,
        /// Columns the header names.
        available: Vec<String>,
    },
    /// The data set or file is absent.
    #[error("{}: not found; {hint}", .path.display())]
    Missing {
        /// Path that was looked for.
        path: PathBuf,
        /// How to make it available.
        hint: String,
    },
}

/// Folder that holds the data sets.
///
/// Order: the `CAMEL_DATA_DIR` environment variable (if set and non-empty); else the first
/// `datasets/` folder found walking up from the current directory, so any working directory
/// inside the checkout finds the committed sets; else the workspace's `datasets/` (found at
/// compile time from `CARGO_MANIFEST_DIR`) if it exists; else `datasets/`.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = data_dir_override() {
        return dir;
    }
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(found) = find_datasets_upwards(&cwd) {
            return found;
        }
    }
    if let Some(root) = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2) {
        let ws = root.join("datasets");
        if ws.is_dir() {
            return ws;
        }
    }
    PathBuf::from("datasets")
}

/// The data folder named by the environment (`CAMEL_DATA_DIR`, read by the configuration
/// module, `camel_core::config`), if set.
pub fn data_dir_override() -> Option<PathBuf> {
    camel_nn::core::config::data_dir()
}

/// The first `<ancestor>/datasets` folder of `start` (itself included), walking up.
pub fn find_datasets_upwards(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|a| a.join("datasets"))
        .find(|d| d.is_dir())
}
