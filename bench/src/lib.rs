//! What the GPU benchmark programs that time one launcher call at a time share (`conv_bench`,
//! `attention_bench`): inputs filled with a fixed pattern, and the timing loop that
//! `bench/torch/event_timing.py` mirrors for PyTorch.

use camel_cuda::{Buffer, CudaDevice, Result};
use std::collections::HashMap;

/// `n` values of a fixed pattern in [-0.5, 0.5).
fn pattern(n: usize, seed: u32) -> impl Iterator<Item = f32> {
    (0..n as u32).map(move |i| {
        ((i.wrapping_mul(2_654_435_761).wrapping_add(seed)) >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    })
}

/// A device buffer of `n` floats holding a fixed pattern of values in [-0.5, 0.5).
pub fn pattern_buffer(dev: &CudaDevice, n: usize, seed: u32) -> Result<Buffer> {
    dev.htod(&pattern(n, seed).collect::<Vec<f32>>())
}

/// [`pattern_buffer`]'s values rounded to `n` f16 (`bf16` false) or bf16 elements.
pub fn pattern_buffer_16(dev: &CudaDevice, n: usize, seed: u32, bf16: bool) -> Result<Buffer> {
    if bf16 {
        dev.htod(
            &pattern(n, seed)
                .map(half::bf16::from_f32)
                .collect::<Vec<_>>(),
        )
    } else {
        dev.htod(
            &pattern(n, seed)
                .map(half::f16::from_f32)
                .collect::<Vec<_>>(),
        )
    }
}

/// Median milliseconds per call of `f`: `warmup` calls, then launches back to back between one
/// pair of CUDA events (as many as take about 2 ms, 3 to 100), the median over `reps` batches.
pub fn median_ms(
    dev: &CudaDevice,
    reps: usize,
    warmup: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    dev.synchronize()?;
    let a = dev.record_event()?;
    f()?;
    let b = dev.record_event()?;
    let one = a.elapsed_ms(&b)? as f64;
    let batch = ((2.0 / one.max(1e-3)).ceil() as usize).clamp(3, 100);
    let mut v = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        dev.synchronize()?;
        let a = dev.record_event()?;
        for _ in 0..batch {
            f()?;
        }
        let b = dev.record_event()?;
        v.push(a.elapsed_ms(&b)? as f64 / batch as f64);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

/// The value after the flag `name` in a program's arguments (`--reps 5` gives `"5"`).
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The timings of the PyTorch file named by `--torch` ([`read_timings`]), none without the flag.
/// An unreadable file is an error naming it.
pub fn torch_timings(args: &[String]) -> std::result::Result<HashMap<String, f64>, String> {
    match arg(args, "--torch") {
        Some(path) => std::fs::read_to_string(&path)
            .map(|t| read_timings(&t))
            .map_err(|e| format!("{path}: {e}")),
        None => Ok(HashMap::new()),
    }
}

/// The PyTorch scripts' timings: `"<key>\t<ms>"` lines (others, such as `#` comments, skipped).
pub fn read_timings(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter_map(|line| {
            let (k, v) = line.split_once('\t')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn timings_are_key_tab_ms_lines() {
        let t = super::read_timings(
            "# a comment\nlenet1 forward\t0.125\nbad\tx\nd64 T512 full forward flash_bf16\t1.5\n",
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t["lenet1 forward"], 0.125);
        assert_eq!(t["d64 T512 full forward flash_bf16"], 1.5);
    }

    #[test]
    fn a_flag_gives_the_argument_after_it() {
        let args: Vec<String> = ["prog", "--reps", "5", "--torch"]
            .map(String::from)
            .to_vec();
        assert_eq!(super::arg(&args, "--reps").as_deref(), Some("5"));
        assert_eq!(super::arg(&args, "--torch"), None);
        assert_eq!(super::arg(&args, "--max-t"), None);
        assert!(super::torch_timings(&args).unwrap().is_empty());
        let missing = ["prog", "--torch", "/no/such/file"]
            .map(String::from)
            .to_vec();
        assert!(super::torch_timings(&missing)
            .unwrap_err()
            .contains("/no/such/file"));
    }
}
