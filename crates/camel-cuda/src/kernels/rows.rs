//! What the memory-bound ladders share (reductions, softmax, cross-entropy, LayerNorm,
//! elementwise, embedding, optimizer updates): the [`Step`] selector and the choice between a
//! warp and a block per row (`kernels/common/rows.cuh`).

use super::rows_grid;
use crate::{DevPtr, Dim3, LaunchConfig, Result};

/// A kernel name built on the stack: step-3 launchers pick one of many instantiations by shape
/// (`softmax3_g32_v4_n8_f32`) on every launch, and formatting it into a `String` would allocate
/// in each training step. Names longer than the buffer are cut (and then not found by
/// `CudaDevice::function`, which reports the name).
pub struct KernelName {
    buf: [u8; 64],
    len: usize,
}

impl KernelName {
    /// Formats `args` (e.g. `format_args!("softmax3_g{g}_v{v}_n{n}_f32")`).
    pub fn new(args: std::fmt::Arguments<'_>) -> KernelName {
        let mut n = KernelName {
            buf: [0; 64],
            len: 0,
        };
        let _ = std::fmt::Write::write_fmt(&mut n, args);
        n
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // only whole `&str`s are copied in, so the bytes are valid UTF-8
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for KernelName {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A step of a memory-bound ladder (what each step is in each family: [`super::ladder`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Step 1.
    One,
    /// Step 2.
    Two,
    /// Step 3.
    Three,
    /// Step 4.
    Four,
    /// Step 5 (the image-filter and attention ladders).
    Five,
    /// Step 6 (the image-filter and attention ladders).
    Six,
    /// Step 7 (the attention ladder).
    Seven,
    /// Step 8 (the attention ladder).
    Eight,
}

impl Step {
    /// Every step, in ladder order.
    pub const ALL: [Step; 8] = [
        Step::One,
        Step::Two,
        Step::Three,
        Step::Four,
        Step::Five,
        Step::Six,
        Step::Seven,
        Step::Eight,
    ];
    /// The step's number (1 … 8).
    pub fn number(&self) -> u32 {
        match self {
            Step::One => 1,
            Step::Two => 2,
            Step::Three => 3,
            Step::Four => 4,
            Step::Five => 5,
            Step::Six => 6,
            Step::Seven => 7,
            Step::Eight => 8,
        }
    }
}

/// True when every pointer is 16-byte aligned (float4 access).
pub fn aligned16(ptrs: &[DevPtr]) -> bool {
    aligned(ptrs, 16)
}

/// True when every pointer is a multiple of `bytes` (a power of two).
pub fn aligned(ptrs: &[DevPtr], bytes: usize) -> bool {
    ptrs.iter().all(|p| p.0 % bytes as u64 == 0)
}

/// Rows up to this length get a warp each; longer rows get a block.
pub const WARP_ROW_MAX: usize = 1024;

/// Threads per block of the row kernels.
pub const ROW_THREADS: u32 = 256;

/// The `(warp, vec)` variant for rows of `cols` and the launch configuration: a warp per row
/// (8 rows per block of 256) when `cols ≤ WARP_ROW_MAX`, else a block per row (512 threads
/// from 16384 columns on). `vec` when `cols % 4 == 0` and the pointers are aligned.
pub(crate) fn row_launch(
    name: &str,
    rows: usize,
    cols: usize,
    ptrs: &[DevPtr],
) -> Result<(bool, bool, LaunchConfig)> {
    let warp = cols <= WARP_ROW_MAX;
    let vec = cols % 4 == 0 && aligned16(ptrs);
    let per_block = (ROW_THREADS / 32) as usize;
    let cfg = if warp {
        LaunchConfig::new(
            rows_grid(name, rows.div_ceil(per_block))?,
            Dim3::x(ROW_THREADS),
        )
    } else {
        let threads = if cols >= 16384 { 512 } else { ROW_THREADS };
        LaunchConfig::new(rows_grid(name, rows)?, Dim3::x(threads))
    };
    Ok((warp, vec, cfg))
}

/// Kernel name of a row variant: `{base}_{warp|block}{_vec}_f32`.
pub(crate) fn variant_name(base: &str, warp: bool, vec: bool) -> String {
    format!(
        "{base}_{}{}_f32",
        if warp { "warp" } else { "block" },
        if vec { "_vec" } else { "" }
    )
}

#[cfg(test)]
mod kernel_name_tests {
    #[test]
    fn kernel_name_formats_like_format() {
        let (g, v, n) = (32, 4, 8);
        let k = super::KernelName::new(format_args!("softmax3_bwd_g{g}_v{v}_n{n}_f32"));
        assert_eq!(k.as_str(), format!("softmax3_bwd_g{g}_v{v}_n{n}_f32"));
    }
}
