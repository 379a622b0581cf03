//! Reader for the IDX format used by MNIST and Fashion-MNIST (gzip or plain).

use std::fs::File;
use std::io::{self, BufReader, Cursor, ErrorKind, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use super::{DataError, MISSING_HINT};

/// IDX magic for unsigned-byte, 3-dimensional data (images).
const IMAGES_MAGIC: u32 = 0x0000_0803;
/// IDX magic for unsigned-byte, 1-dimensional data (labels).
const LABELS_MAGIC: u32 = 0x0000_0801;
/// Capacity reserved up front at most, so a lying header cannot force a huge allocation.
const MAX_PREALLOC: u64 = 64 << 20;

/// Reads an IDX image file (magic `0x00000803`), gzip-compressed or not.
///
/// Returns `(pixels, n, rows, cols)` with `pixels.len() == n * rows * cols`,
/// row-major, one byte per pixel.
pub fn read_idx_images(
    path: impl AsRef<Path>,
) -> Result<(Vec<u8>, usize, usize, usize), DataError> {
    let (dims, data) = read_idx(path.as_ref(), IMAGES_MAGIC, 3)?;
    Ok((data, dims[0], dims[1], dims[2]))
}

/// Reads an IDX label file (magic `0x00000801`), gzip-compressed or not.
pub fn read_idx_labels(path: impl AsRef<Path>) -> Result<Vec<u8>, DataError> {
    let (_, data) = read_idx(path.as_ref(), LABELS_MAGIC, 1)?;
    Ok(data)
}

/// Input stream plus whether it is being gunzipped.
struct Input {
    reader: Box<dyn Read>,
    gzip: bool,
}

fn open(path: &Path) -> Result<Input, DataError> {
    let mut file = File::open(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => DataError::Missing {
            path: path.to_path_buf(),
            hint: MISSING_HINT.to_string(),
        },
        _ => DataError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    let mut prefix = [0u8; 2];
    let got = read_full(&mut file, &mut prefix).map_err(|(_, e)| DataError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let gzip = got == 2 && prefix == [0x1f, 0x8b];
    let chained = Cursor::new(prefix[..got].to_vec()).chain(file);
    let reader: Box<dyn Read> = if gzip {
        Box::new(MultiGzDecoder::new(BufReader::new(chained)))
    } else {
        Box::new(BufReader::new(chained))
    };
    Ok(Input { reader, gzip })
}

/// Reads until `buf` is full or end of input; returns the count, or the count
/// read before the error together with the error.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, (usize, io::Error)> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err((n, e)),
        }
    }
    Ok(n)
}

/// Turns a read error into a [`DataError`]; `expected`/`found` count decompressed bytes.
fn stream_error(path: &Path, gzip: bool, e: io::Error, expected: u64, found: u64) -> DataError {
    let path = path.to_path_buf();
    if !gzip {
        return DataError::Io { path, source: e };
    }
    match e.kind() {
        ErrorKind::UnexpectedEof if found < expected => DataError::Truncated {
            path,
            expected_bytes: expected,
            found_bytes: found,
        },
        ErrorKind::UnexpectedEof => DataError::Corrupt {
            path,
            detail: format!("stream ends early (gzip trailer missing): {e}"),
        },
        ErrorKind::InvalidInput | ErrorKind::InvalidData => DataError::Corrupt {
            path,
            detail: format!("{e} (after {found} decompressed bytes)"),
        },
        _ => DataError::Io { path, source: e },
    }
}

/// Reads an IDX file with the given magic and number of dimensions.
fn read_idx(path: &Path, magic: u32, ndims: usize) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let Input { mut reader, gzip } = open(path)?;
    let header_len = 4 + 4 * ndims;
    let mut header = vec![0u8; header_len];
    let got = match read_full(&mut reader, &mut header) {
        Ok(n) => n,
        Err((n, e)) => {
            // Report a wrong magic number before a stream error if we have it.
            if n >= 4 {
                check_magic(path, &header, magic)?;
            }
            return Err(stream_error(path, gzip, e, header_len as u64, n as u64));
        }
    };
    if got >= 4 {
        check_magic(path, &header, magic)?;
    }
    if got < header_len {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            expected_bytes: header_len as u64,
            found_bytes: got as u64,
        });
    }

    let dims: Vec<u32> = header[4..]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let payload = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
        .filter(|&p| usize::try_from(p).is_ok())
        .ok_or_else(|| DataError::Mismatch {
            path: path.to_path_buf(),
            detail: format!("header dimensions {dims:?} are too large"),
        })?;
    let expected = header_len as u64 + payload;

    let mut data = Vec::with_capacity(payload.min(MAX_PREALLOC) as usize);
    match (&mut reader).take(payload).read_to_end(&mut data) {
        Ok(_) => {}
        Err(e) => {
            let found = header_len as u64 + data.len() as u64;
            return Err(stream_error(path, gzip, e, expected, found));
        }
    }
    if (data.len() as u64) < payload {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            expected_bytes: expected,
            found_bytes: header_len as u64 + data.len() as u64,
        });
    }

    // Drain the rest: this checks the gzip trailer (CRC, length) and rejects trailing bytes.
    match io::copy(&mut reader, &mut io::sink()) {
        Ok(0) => {}
        Ok(extra) => {
            return Err(DataError::Mismatch {
                path: path.to_path_buf(),
                detail: format!(
                    "{extra} unexpected bytes after the {expected} bytes the header describes"
                ),
            })
        }
        Err(e) => return Err(stream_error(path, gzip, e, expected, expected)),
    }

    let dims = dims.into_iter().map(|d| d as usize).collect();
    Ok((dims, data))
}

fn check_magic(path: &Path, header: &[u8], expected: u32) -> Result<(), DataError> {
    let found = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    if found != expected {
        return Err(DataError::BadMagic {
            path: path.to_path_buf(),
            expected,
            found,
        });
    }
    Ok(())
}
