//! `Display` for [`Tensor`]: its values, laid out as PyTorch prints them, and summarised with
//! `...` (the first and last [`EDGE`] entries of each dim) when it holds more than
//! [`THRESHOLD`] elements. The data is read from the device once.
//!
//! ```
//! use camel_core::{Device, Tensor};
//! let x = Tensor::from_vec(vec![1.5, -2.0, 3.25, 4.0], &[2, 2], Device::Cpu)?;
//! assert_eq!(x.to_string(), "tensor([[ 1.5000, -2.0000],\n        [ 3.2500,  4.0000]])");
//! let big = Tensor::zeros(&[2000], Device::Cpu)?;
//! assert_eq!(big.to_string(), "tensor([0., 0., 0.,  ..., 0., 0., 0.])");
//! # Ok::<(), camel_core::Error>(())
//! ```

use crate::{DType, Device, Tensor};
use std::fmt;

/// Tensors with more elements than this are summarised (PyTorch's default).
pub const THRESHOLD: usize = 1000;
/// Entries shown at each end of a summarised dim.
pub const EDGE: usize = 3;

/// Formats every element alike: fixed point with 4 decimals, integers as `1.`, or scientific
/// notation when the magnitudes span a wide range.
fn f32_formatter(values: &[f32]) -> impl Fn(f32) -> String {
    let finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let ints = finite.iter().all(|v| v.fract() == 0.0);
    let max = finite.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let min = finite
        .iter()
        .filter(|v| **v != 0.0)
        .fold(f32::INFINITY, |m, v| m.min(v.abs()));
    let sci = max >= 1e8 || (min.is_finite() && (min < 1e-4 || max / min > 1e3) && !ints);
    move |v: f32| {
        if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v > 0.0 { "inf" } else { "-inf" }.into()
        } else if sci {
            format!("{v:.4e}")
        } else if ints {
            format!("{v:.0}.")
        } else {
            format!("{v:.4}")
        }
    }
}

/// Writes the nested lists of `cells` (row-major, one string per element, already padded) for
/// `shape`, with `indent` spaces before the rows after the first.
fn write_nested(
    f: &mut fmt::Formatter<'_>,
    cells: &[String],
    shape: &[usize],
    indent: usize,
    summarise: bool,
) -> fmt::Result {
    let Some((&n, inner)) = shape.split_first() else {
        return f.write_str(&cells[0]);
    };
    let stride: usize = inner.iter().product();
    let shown: Vec<Option<usize>> = if summarise && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    f.write_str("[")?;
    for (k, i) in shown.iter().enumerate() {
        if k > 0 {
            if inner.is_empty() {
                f.write_str(", ")?;
            } else {
                f.write_str(",")?;
                f.write_str(&"\n".repeat(inner.len()))?;
                f.write_str(&" ".repeat(indent + 1))?;
            }
        }
        match i {
            Some(i) => write_nested(
                f,
                &cells[i * stride..(i + 1) * stride],
                inner,
                indent + 1,
                summarise,
            )?,
            None => f.write_str(if inner.is_empty() { " ..." } else { "..." })?,
        }
    }
    f.write_str("]")
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cells: Vec<String> = match self.dtype() {
            DType::F32 | DType::F16 | DType::BF16 => match self.to_vec() {
                Ok(v) => {
                    let fmt = f32_formatter(&v);
                    v.into_iter().map(fmt).collect()
                }
                Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
            },
            DType::I64 => match self.to_vec_i64() {
                Ok(v) => v.into_iter().map(|x| x.to_string()).collect(),
                Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
            },
        };
        let width = cells.iter().map(|c| c.chars().count()).max().unwrap_or(0);
        let cells: Vec<String> = cells.into_iter().map(|c| format!("{c:>width$}")).collect();
        f.write_str("tensor(")?;
        if cells.is_empty() {
            write!(f, "[], size={:?}", self.shape())?;
        } else {
            let summarise = cells.len() > THRESHOLD;
            write_nested(f, &cells, self.shape(), "tensor(".len(), summarise)?;
        }
        if self.device() != Device::Cpu {
            write!(f, ", device='{}'", self.device())?;
        }
        if self.dtype() != DType::F32 {
            write!(f, ", dtype={}", self.dtype().name())?;
        }
        if self.requires_grad() {
            f.write_str(", requires_grad=True")?;
        }
        f.write_str(")")
    }
}
