//! One module per kernel family (one `kernels/<family>.cu` or `kernels/<family>/` folder), one
//! typed launcher per kernel. Launchers take device pointers and sizes, compute and check the
//! launch configuration, and queue the kernel on the device's stream through one of the helpers
//! here (`launch`, `launch_rows`, `launch_warp_rows`, `launch_elems`: look the kernel up,
//! lay out the grid, launch), each call under one `SAFETY` line naming the kernel's parameters.
//! The steps of a ladder that share a signature are written in one `launchers!` block.

/// Writes launchers that share one parameter list: the steps of a ladder take the same
/// arguments (the family's `Forward` / `Backward` type), so the list is written once, at the
/// head of the block, and each launcher of the block is `pub fn name(..) { body }` (or a private
/// `fn`) with those parameters.
macro_rules! launchers {
    ($params:tt; $($(#[$attr:meta])* $vis:vis fn $name:ident(..) $body:block)*) => {
        $(
            $(#[$attr])*
            #[allow(clippy::too_many_arguments)]
            $vis fn $name $params -> Result<()> $body
        )*
    };
}

pub mod attention;
pub mod batchnorm;
pub mod conv2d;
pub mod elementwise;
pub mod embedding;
pub mod filter;
pub mod hgemm;
pub mod ladder;
pub mod layernorm;
pub mod loss;
pub mod masked_softmax;
pub mod matmul;
pub mod optim;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod rows;
pub mod shape;
pub mod softmax;

use crate::{launch_1d, CudaDevice, Dim3, Error, KernelArg, LaunchConfig, Result};

/// Grid for "one block per row" kernels: every row on x (up to 2^31 − 1 blocks), spilling onto y
/// only past that, with x chosen so that at most y − 1 blocks are spare; the kernel recomputes
/// `row = blockIdx.x + blockIdx.y * gridDim.x` and skips rows past the end.
/// Filling x first, rather than capping it at 65535, keeps every launched block busy: a cap
/// would turn 65536 rows into a 65535 × 2 grid of which 65534 blocks only exit.
pub(crate) fn rows_grid(kernel: &str, rows: usize) -> Result<Dim3> {
    const X: usize = i32::MAX as usize;
    let y = rows.div_ceil(X).max(1);
    let x = rows.div_ceil(y).max(1);
    if y > 65_535 {
        return Err(Error::LaunchConfig {
            kernel: kernel.to_string(),
            msg: format!("{rows} rows exceed the grid of one block per row"),
        });
    }
    Ok(Dim3::xyz(x as u32, y as u32, 1))
}

/// Looks up kernel `name` of PTX module `module` and launches it with `cfg`: the step every
/// launcher ends in.
///
/// # Safety
/// [`CudaDevice::launch`]'s contract: `args` match the kernel's parameters in number, order and
/// size, and every device pointer among them addresses memory of `dev` that is valid for all
/// the kernel reads and writes under `cfg`.
pub(crate) unsafe fn launch(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    cfg: LaunchConfig,
    args: &[&dyn KernelArg],
) -> Result<()> {
    let k = dev.function(module, name)?;
    // SAFETY: the caller upholds `CudaDevice::launch`'s contract for `args` and `cfg`.
    unsafe { dev.launch(&k, cfg, args) }
}

/// [`launch`] on a grid of `blocks` blocks of `threads` threads laid out by [`rows_grid`]: one
/// block per row (`blocks` = the rows), or per group of rows (`blocks` = rows divided by the
/// rows a block takes, rounded up).
///
/// # Safety
/// As [`launch`].
pub(crate) unsafe fn launch_rows(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    blocks: usize,
    threads: u32,
    args: &[&dyn KernelArg],
) -> Result<()> {
    let k = dev.function(module, name)?;
    let cfg = LaunchConfig::new(rows_grid(name, blocks)?, Dim3::x(threads));
    // SAFETY: the caller upholds `CudaDevice::launch`'s contract for `args` and this grid.
    unsafe { dev.launch(&k, cfg, args) }
}

/// The configuration of a warp per row: blocks of [`rows::ROW_THREADS`], as many rows a block
/// as it has warps, `rows` rows (or warps' worth of work) in all.
pub(crate) fn warp_rows_config(name: &str, rows: usize) -> Result<LaunchConfig> {
    let per_block = (rows::ROW_THREADS / 32) as usize;
    Ok(LaunchConfig::new(
        rows_grid(name, rows.div_ceil(per_block))?,
        Dim3::x(rows::ROW_THREADS),
    ))
}

/// [`launch`] with a warp per row ([`warp_rows_config`]).
///
/// # Safety
/// As [`launch`].
pub(crate) unsafe fn launch_warp_rows(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    rows: usize,
    args: &[&dyn KernelArg],
) -> Result<()> {
    let k = dev.function(module, name)?;
    let cfg = warp_rows_config(name, rows)?;
    // SAFETY: the caller upholds `CudaDevice::launch`'s contract for `args` and this grid.
    unsafe { dev.launch(&k, cfg, args) }
}

/// [`launch`] with a thread per element of `n` ([`launch_1d`]; the kernel loops over the grid);
/// nothing when `n` is 0.
///
/// # Safety
/// As [`launch`].
pub(crate) unsafe fn launch_elems(
    dev: &CudaDevice,
    module: &str,
    name: &str,
    n: usize,
    args: &[&dyn KernelArg],
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    // SAFETY: the caller upholds `launch`'s contract.
    unsafe { launch(dev, module, name, launch_1d(n), args) }
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

#[cfg(test)]
mod rows_grid_tests {
    use super::*;

    #[test]
    fn one_block_per_row_and_no_spare_blocks() {
        for rows in [
            0usize,
            1,
            7,
            65_535,
            65_536,
            65_537,
            1 << 24,
            i32::MAX as usize,
        ] {
            let g = rows_grid("k", rows).unwrap();
            assert_eq!((g.x as usize, g.y), (rows.max(1), 1), "{rows} rows");
        }
        // past 2^31 − 1 rows: y > 1, and x·y covers the rows with fewer than y spare blocks
        for rows in [i32::MAX as usize + 1, 5_000_000_000usize] {
            let g = rows_grid("k", rows).unwrap();
            let total = g.x as usize * g.y as usize;
            assert!(g.y > 1 && g.x <= i32::MAX as u32, "{rows} rows: {g:?}");
            assert!(
                total >= rows && total - rows < g.y as usize,
                "{rows} rows: {g:?}"
            );
        }
        assert!(rows_grid("k", usize::MAX).is_err());
    }
}
