//! The device policy of camel's tests, in one place: one test body runs on every device present.
//! The CPU always; the first CUDA device when camel was built with `cuda` and a GPU answers.
//! Without one, the CUDA half is skipped with a printed reason, and `CAMEL_REQUIRE_GPU=1` turns
//! that skip into a failure (the GPU machine's run script sets it).
//!
//! A test runs every step of a ladder family in one process with [`for_each_step`] (or
//! [`crate::config::with_step`] directly).

use crate::{cuda_available, Device};
use std::sync::OnceLock;

fn gpu_present() -> bool {
    static HAS_GPU: OnceLock<bool> = OnceLock::new();
    let has = *HAS_GPU.get_or_init(|| {
        let errs = crate::config::check();
        if !errs.is_empty() {
            let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            panic!("bad camel configuration: {}", msgs.join("; "));
        }
        let ok = cuda_available();
        if !ok {
            eprintln!("skipped CUDA: no device");
        }
        ok
    });
    if !has && crate::config::require_gpu() {
        panic!("CAMEL_REQUIRE_GPU=1 but no CUDA device answers (or camel was built without the `cuda` feature)");
    }
    has
}

/// `Device::Cpu`, plus `Device::Cuda(0)` when a GPU answers (see the module docs).
pub fn devices() -> Vec<Device> {
    let mut v = vec![Device::Cpu];
    if gpu_present() {
        v.push(Device::Cuda(0));
    }
    v
}

/// `Some(Device::Cuda(0))` when a GPU answers, for tests that only make sense on one.
pub fn gpu() -> Option<Device> {
    gpu_present().then_some(Device::Cuda(0))
}

/// Kernels this thread has launched on `dev` so far (always 0 on the CPU), so a test can show
/// that an op launches nothing.
pub fn launch_count(dev: Device) -> u64 {
    match dev {
        Device::Cpu => 0,
        Device::Cuda(_) => camel_cuda::thread_launch_count(),
    }
}

/// Runs `body` once per step of `family`'s ladder, each with that step selected on this thread
/// ([`crate::config::with_step`]), passing the step's entry of the family's table (for messages).
/// Every step runs on every device; the CPU ignores the selection.
pub fn for_each_step(
    family: crate::backend::ladder::Family,
    mut body: impl FnMut(&crate::backend::ladder::StepInfo),
) {
    for info in family.steps() {
        crate::config::with_step(family, info.step, || body(info));
    }
}
