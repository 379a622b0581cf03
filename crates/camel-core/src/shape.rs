//! Shapes: dimension lists, element counts, row-major strides and broadcasting.

use crate::{Error, Result};

/// Number of elements of a shape (1 for a scalar `[]`, 0 when a dim is 0), saturating at
/// `usize::MAX` where the product overflows: no tensor that large exists, because every creation
/// and shape op checks the count with [`crate::layout::checked_numel`].
pub fn numel(dims: &[usize]) -> usize {
    if dims.contains(&0) {
        return 0;
    }
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
}

/// Row-major (C-order) strides of a contiguous tensor, in elements (saturating, so that a
/// 0-element shape with huge other dims has strides, which nothing reads).
pub fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1]);
    }
    s
}

/// The broadcast shape of two shapes (NumPy rules: align on the right, a dim of 1 stretches).
pub fn broadcast_shape(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return Err(Error::ShapeMismatch {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
                expected: "shapes that broadcast (equal dims, or 1, aligned on the right)".into(),
            });
        };
    }
    Ok(out)
}

/// Strides (in elements) to read a contiguous tensor of shape `dims` as if broadcast to `out`:
/// broadcast dimensions get stride 0. `dims` must broadcast to `out`.
pub fn broadcast_strides(dims: &[usize], out: &[usize]) -> Vec<usize> {
    let own = contiguous_strides(dims);
    let off = out.len() - dims.len();
    (0..out.len())
        .map(|i| {
            if i < off || dims[i - off] == 1 {
                0
            } else {
                own[i - off]
            }
        })
        .collect()
}

/// Resolve a possibly negative dimension index against a rank.
pub fn normalize_dim(op: &'static str, dim: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r.max(1) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("dim {dim} out of range for a tensor of rank {rank}"),
        });
    }
    Ok(d as usize)
}

/// Split a shape around `dim` into (outer, size of dim, inner) element counts.
pub fn split_at_dim(dims: &[usize], dim: usize) -> (usize, usize, usize) {
    if dims.is_empty() {
        return (1, 1, 1);
    }
    (numel(&dims[..dim]), dims[dim], numel(&dims[dim + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shape("t", &[4, 3], &[3]).unwrap(), vec![4, 3]);
        assert_eq!(
            broadcast_shape("t", &[2, 1, 3], &[5, 1]).unwrap(),
            vec![2, 5, 3]
        );
        assert!(broadcast_shape("t", &[4, 3], &[4]).is_err());
        assert_eq!(broadcast_strides(&[3], &[4, 3]), vec![0, 1]);
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
