//! `Layout`: where a tensor's elements sit in its storage — a shape, a stride per dimension (in
//! elements) and an offset. Element `[i0, i1, …]` lives at `offset + Σ i_d · strides[d]`.
//!
//! View ops (`transpose`, `permute`, `narrow`, `expand`, `unsqueeze`, …) build a new `Layout` over
//! the same storage and copy nothing. A layout is *dense* when it covers its whole storage in
//! row-major order from element 0; kernels read dense data, and [`crate::Tensor`] makes a view
//! dense (one strided copy) at the one place an op asks for its data.

use crate::shape::{contiguous_strides, numel};
use crate::{Error, Result};

/// Shape, strides (in elements) and offset of a tensor in its storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

impl Layout {
    /// The row-major layout of `shape` from element 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// A layout from its parts (no check that it fits a storage).
    pub fn new(shape: Vec<usize>, strides: Vec<usize>, offset: usize) -> Layout {
        Layout {
            shape,
            strides,
            offset,
        }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Elements to step over to move one along each dimension.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index of the first element in the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// Row-major order with no gaps (dims of size 1 may have any stride); the offset may be
    /// anything.
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n != 1 && s != expect {
                return false;
            }
            // saturating: an empty tensor may have dims whose product overflows
            expect = expect.saturating_mul(n);
        }
        true
    }

    /// Contiguous, from element 0, and covering all `storage_len` elements: the data is the
    /// storage itself, as every kernel expects it.
    pub fn is_dense(&self, storage_len: usize) -> bool {
        self.offset == 0 && self.numel() == storage_len && self.is_contiguous()
    }

    /// The layout with dims `a` and `b` swapped.
    pub fn transpose(&self, a: usize, b: usize) -> Layout {
        let mut l = self.clone();
        l.shape.swap(a, b);
        l.strides.swap(a, b);
        l
    }

    /// Output dim `i` is dim `perm[i]` of this layout (`perm` checked by the caller).
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// The slice `start..start + len` of `dim` (bounds checked by the caller).
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Layout {
        let mut l = self.clone();
        // saturating: only an empty tensor's (unread) offset can overflow
        l.offset = l
            .offset
            .saturating_add(start.saturating_mul(self.strides[dim]));
        l.shape[dim] = len;
        l
    }

    /// A new dim of size 1 at `dim` (`0..=rank`).
    pub fn unsqueeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        let stride = if dim < self.rank() {
            self.strides[dim].saturating_mul(self.shape[dim])
        } else {
            1
        };
        l.shape.insert(dim, 1);
        l.strides.insert(dim, stride);
        l
    }

    /// Dim `dim` (of size 1) removed.
    pub fn squeeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        l.shape.remove(dim);
        l.strides.remove(dim);
        l
    }

    /// This layout read as if broadcast to `shape` (NumPy rules, checked by the caller):
    /// stretched and new leading dims get stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Layout {
        let off = shape.len() - self.rank();
        let strides = (0..shape.len())
            .map(|i| {
                if i < off || (self.shape[i - off] == 1 && shape[i] != 1) {
                    0
                } else {
                    self.strides[i - off]
                }
            })
            .collect();
        Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        }
    }

    /// The same elements under a new shape, when that needs no copy (this layout contiguous).
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if !self.is_contiguous() {
            return None;
        }
        Some(Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: self.offset,
        })
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// One past the largest storage index this layout reads (its offset when it is empty).
    pub fn extent(&self) -> usize {
        if self.numel() == 0 {
            return self.offset;
        }
        self.offset
            + 1
            + self
                .shape
                .iter()
                .zip(&self.strides)
                .map(|(&n, &s)| (n - 1) * s)
                .sum::<usize>()
    }
}

/// The size of `shape` (0 when a dim is 0), or an error naming `op` when the product overflows
/// `usize`.
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::BadShape {
            op,
            shape: shape.to_vec(),
            expected: "an element count that fits in usize".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_move_strides_not_data() {
        let l = Layout::contiguous(&[2, 3, 4]);
        assert!(l.is_dense(24));
        let t = l.transpose(0, 2);
        assert_eq!((t.shape(), t.strides()), (&[4, 3, 2][..], &[1, 4, 12][..]));
        assert!(!t.is_contiguous());
        let n = l.narrow(1, 1, 2);
        assert_eq!((n.offset(), n.shape()), (4, &[2, 2, 4][..]));
        assert!(!n.is_contiguous());
        assert!(l.narrow(0, 1, 1).is_contiguous());
        assert!(!l.narrow(0, 1, 1).is_dense(24));
        let b = Layout::contiguous(&[3, 1]).broadcast_to(&[2, 3, 5]);
        assert_eq!(b.strides(), &[0, 1, 0]);
        assert_eq!(l.unsqueeze(3).strides(), &[12, 4, 1, 1]);
        assert_eq!(l.unsqueeze(0).strides(), &[24, 12, 4, 1]);
        assert_eq!(l.unsqueeze(1).squeeze(1), l);
        assert_eq!(l.extent(), 24);
        assert_eq!(n.extent(), 4 + 1 + 12 + 4 + 3);
        assert!(t.reshape(&[24]).is_none());
    }

    #[test]
    fn element_counts_that_overflow_are_errors() {
        assert_eq!(checked_numel("t", &[3, 4]).unwrap(), 12);
        assert!(checked_numel("t", &[usize::MAX, 2]).is_err());
    }
}
