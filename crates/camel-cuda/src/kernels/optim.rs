//! Launchers for `kernels/optim.cu`: in-place parameter updates.

use crate::{launch_1d, CudaDevice, DevPtr, Result};

const MODULE: &str = "optim";

/// SGD with momentum and weight decay; `buf` is ignored when `momentum == 0`.
#[allow(clippy::too_many_arguments)]
pub fn sgd_f32(
    dev: &CudaDevice,
    p: DevPtr,
    g: DevPtr,
    buf: DevPtr,
    n: usize,
    lr: f32,
    momentum: f32,
    wd: f32,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let k = dev.function(MODULE, "sgd_f32")?;
    // SAFETY: matches `sgd_f32(float*, const float*, float*, long long, float, float, float)`.
    unsafe {
        dev.launch(
            &k,
            launch_1d(n),
            &[&p, &g, &buf, &(n as i64), &lr, &momentum, &wd],
        )
    }
}

/// Adam / AdamW step with bias corrections `bc1 = 1 − β₁ᵗ`, `bc2 = 1 − β₂ᵗ`.
#[allow(clippy::too_many_arguments)]
pub fn adam_f32(
    dev: &CudaDevice,
    p: DevPtr,
    g: DevPtr,
    m: DevPtr,
    v: DevPtr,
    n: usize,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    wd: f32,
    decoupled: bool,
    bc1: f32,
    bc2: f32,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let k = dev.function(MODULE, "adam_f32")?;
    let dec = decoupled as i32;
    // SAFETY: matches `adam_f32(float*, const float*, float*, float*, long long, float ×5, int, float, float)`.
    unsafe {
        dev.launch(
            &k,
            launch_1d(n),
            &[
                &p,
                &g,
                &m,
                &v,
                &(n as i64),
                &lr,
                &beta1,
                &beta2,
                &eps,
                &wd,
                &dec,
                &bc1,
                &bc2,
            ],
        )
    }
}
