//! The GPU test policy shared by every crate's tests.

use crate::device::{device, stub_shadows_driver, CudaDevice};
use crate::error::Error;
use std::io::Write;
use std::sync::Arc;

/// Device 0 for a GPU test, or `None` to skip it. Implements the project's policy:
/// - a device answers: `Some(device)`;
/// - none answers: prints `skipped: no CUDA device (<reason>)` to stderr (not captured by the
///   test harness, so it shows in `cargo test` output) and returns `None`;
/// - `CAMEL_REQUIRE_GPU=1` is set and none answers: panics, so the test fails;
/// - a `CAMEL_*` variable is set to a value it does not accept, or is not one of camel's
///   ([`crate::config::check`]): panics, so a test run never ignores it;
/// - camel's no-driver stub was loaded on a machine that has an NVIDIA driver: panics, since a
///   GPU machine must never skip silently.
///
/// ```
/// # fn main() -> camel_cuda::Result<()> {
/// let Some(dev) = camel_cuda::test_device() else { return Ok(()) };
/// let buf = dev.htod(&[1.0f32, 2.0])?;
/// # let _ = buf; Ok(()) }
/// ```
pub fn test_device() -> Option<Arc<CudaDevice>> {
    let errs = crate::config::check();
    if !errs.is_empty() {
        let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        panic!("bad camel configuration: {}", msgs.join("; "));
    }
    let err = match device(0) {
        Ok(dev) => return Some(dev),
        Err(e) => e,
    };
    let reason = match err {
        Error::NoDevice { reason } => reason,
        other => other.to_string(),
    };
    if require_gpu() {
        panic!("CAMEL_REQUIRE_GPU=1 but no CUDA device answers: {reason}");
    }
    if stub_shadows_driver() {
        panic!("no CUDA device although this machine has an NVIDIA driver: {reason}");
    }
    let test = std::thread::current()
        .name()
        .map(|n| format!("{n}: "))
        .unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "{test}skipped: no CUDA device ({reason})"
    );
    None
}

/// `CAMEL_REQUIRE_GPU` ([`crate::config::require_gpu`]).
pub fn require_gpu() -> bool {
    crate::config::require_gpu()
}
