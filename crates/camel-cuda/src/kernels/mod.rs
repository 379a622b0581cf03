//! One module per kernel family (one `kernels/<family>.cu` or `kernels/<family>/` folder), one
//! typed launcher per kernel. Launchers take device pointers and sizes, compute and check the
//! launch configuration, and queue the kernel on the device's stream.

pub mod elementwise;
pub mod embedding;
pub mod layernorm;
pub mod loss;
pub mod matmul;
pub mod optim;
pub mod reduce;
pub mod rows;
pub mod shape;
pub mod softmax;

use crate::{Dim3, Error, Result};

/// Grid for "one block per row" kernels: rows spread over x (≤ 65535) and y; the kernel
/// recomputes `row = blockIdx.x + blockIdx.y * gridDim.x` and skips rows past the end.
pub(crate) fn rows_grid(kernel: &str, rows: usize) -> Result<Dim3> {
    const X: usize = 65_535;
    let x = rows.clamp(1, X);
    let y = rows.div_ceil(X).max(1);
    if y > 65_535 {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("{rows} rows exceed the grid of one block per row"),
        });
    }
    Ok(Dim3::xyz(x as u32, y as u32, 1))
}

/// Maximum tensor rank the strided kernels accept (`MAX_DIMS` in the .cu files).
pub const MAX_DIMS: usize = 8;

/// Copy `v` into a fixed `[i64; MAX_DIMS]` array, erroring if the rank is too high.
pub(crate) fn dims_array(kernel: &str, v: &[usize]) -> Result<[i64; MAX_DIMS]> {
    if v.len() > MAX_DIMS {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("rank {} exceeds the maximum of {MAX_DIMS}", v.len()),
        });
    }
    let mut a = [0i64; MAX_DIMS];
    for (d, &x) in v.iter().enumerate() {
        a[d] = x as i64;
    }
    Ok(a)
}
