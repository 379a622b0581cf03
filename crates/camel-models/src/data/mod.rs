//! Data sets and batching: IDX (MNIST-style) readers, [`Mnist`] loading and a
//! seeded [`DataLoader`] that yields index batches.
//!
//! Data files are not part of the repository. They live under
//! `<CAMEL_DATA_DIR>/<name>/<file>`; see `datasets/README.md` at the workspace root.

mod idx;
mod loader;
mod mnist;

use std::path::{Path, PathBuf};

pub use idx::{read_idx_images, read_idx_labels};
pub use loader::{Batches, DataLoader, LoaderError};
pub use mnist::{Mnist, Split, MNIST_MEAN, MNIST_STD};

/// Environment variable that names the folder holding the data sets (read by
/// `camel_core::config::data_dir`).
pub const DATA_DIR_ENV: &str = "CAMEL_DATA_DIR";

/// Hint attached to [`DataError::Missing`].
pub(crate) const MISSING_HINT: &str = "set CAMEL_DATA_DIR to the folder that holds the data sets \
     (layout <CAMEL_DATA_DIR>/<name>/<file>); see datasets/README.md";

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
/// Order: the `CAMEL_DATA_DIR` environment variable (if set and non-empty);
/// else `datasets/` in the current directory if it exists; else the workspace's
/// `datasets/` (found at compile time from `CARGO_MANIFEST_DIR`) if it exists;
/// else `datasets/`.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = camel_nn::core::config::data_dir() {
        return dir;
    }
    let local = PathBuf::from("datasets");
    if local.is_dir() {
        return local;
    }
    if let Some(root) = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2) {
        let ws = root.join("datasets");
        if ws.is_dir() {
            return ws;
        }
    }
    local
}
