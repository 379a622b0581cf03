//! Launchers for `kernels/optim/` (one PTX module per ladder step): in-place parameter updates.

use super::launch_elems;
use crate::{CudaDevice, DevPtr, KernelArg, Result};

/// PTX module of step 1: `kernels/optim/01_per_tensor.cu`.
const STEP1: &str = "optim/01_per_tensor";
/// PTX module of step 2: `kernels/optim/02_multi_tensor.cu`.
const STEP2: &str = "optim/02_multi_tensor";
/// PTX module of step 3 (SGD loads first): `kernels/optim/03_loads_first_sgd.cu`.
const STEP3: &str = "optim/03_loads_first_sgd";
/// PTX module of step 4 (Adam loads first): `kernels/optim/04_loads_first.cu`.
const STEP4: &str = "optim/04_loads_first";

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
    let ni = n as i64;
    // SAFETY: matches `sgd_f32(float*, const float*, float*, long long, float, float, float)`.
    unsafe {
        let args: [&dyn KernelArg; 7] = [&p, &g, &buf, &ni, &lr, &momentum, &wd];
        launch_elems(dev, STEP1, "sgd_f32", n, &args)
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
    let (ni, dec) = (n as i64, decoupled as i32);
    let args: [&dyn KernelArg; 13] = [
        &p, &g, &m, &v, &ni, &lr, &beta1, &beta2, &eps, &wd, &dec, &bc1, &bc2,
    ];
    // SAFETY: matches `adam_f32(float*, const float*, float*, float*, long long, float ×5, int, float, float)`.
    unsafe { launch_elems(dev, STEP1, "adam_f32", n, &args) }
}

/// One tensor of a multi-tensor update: parameter, gradient, state buffers (SGD: `s1` =
/// momentum, may be null when momentum is 0; Adam: `s1` = m, `s2` = v) and Adam's bias
/// corrections for this tensor's own step count.
#[derive(Clone, Copy, Debug)]
pub struct MultiTensor {
    /// Parameter (updated in place).
    pub p: DevPtr,
    /// Gradient.
    pub g: DevPtr,
    /// First state buffer.
    pub s1: DevPtr,
    /// Second state buffer (Adam).
    pub s2: DevPtr,
    /// Elements.
    pub n: usize,
    /// 1 − β₁ᵗ (Adam).
    pub bc1: f32,
    /// 1 − β₂ᵗ (Adam).
    pub bc2: f32,
}

/// Layout of `MultiTensor` in kernels/optim/optim.cuh.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct MultiTensorC {
    p: u64,
    g: u64,
    s1: u64,
    s2: u64,
    n: i64,
    first_block: i64,
    bc1: f32,
    bc2: f32,
}

/// Elements per block (`MT_CHUNK` in kernels/optim/optim.cuh).
const MT_CHUNK: usize = 4096;

/// Tensors per launch (`MT_PARAM_MAX` in kernels/optim/optim.cuh): the table is a kernel parameter.
const MT_PARAM_MAX: usize = 64;

/// Layout of `MultiTable` in kernels/optim/optim.cuh: the table passed by value in the launch parameters.
#[repr(C)]
#[derive(Clone, Copy, cust_core::DeviceCopy)]
struct MultiTable {
    t: [MultiTensorC; MT_PARAM_MAX],
}

/// The tables of the non-empty tensors of `ts`, at most [`MT_PARAM_MAX`] a launch, each with
/// its tensor count and launch configuration (block numbers restart in every table).
fn multi_tables(
    name: &str,
    ts: &[MultiTensor],
) -> Result<Vec<(MultiTable, i32, crate::LaunchConfig)>> {
    let live: Vec<&MultiTensor> = ts.iter().filter(|t| t.n > 0).collect();
    let zero = MultiTensorC {
        p: 0,
        g: 0,
        s1: 0,
        s2: 0,
        n: 0,
        first_block: i64::MAX,
        bc1: 1.0,
        bc2: 1.0,
    };
    live.chunks(MT_PARAM_MAX)
        .map(|chunk| {
            let mut table = MultiTable {
                t: [zero; MT_PARAM_MAX],
            };
            let mut blocks = 0usize;
            for (e, t) in table.t.iter_mut().zip(chunk) {
                *e = MultiTensorC {
                    p: t.p.0,
                    g: t.g.0,
                    s1: t.s1.0,
                    s2: t.s2.0,
                    n: t.n as i64,
                    first_block: blocks as i64,
                    bc1: t.bc1,
                    bc2: t.bc2,
                };
                blocks += t.n.div_ceil(MT_CHUNK);
            }
            let cfg =
                crate::LaunchConfig::new(super::rows_grid(name, blocks)?, crate::Dim3::x(256));
            Ok((table, chunk.len() as i32, cfg))
        })
        .collect()
}

launchers! {
    // Adam over many tensors (the AdamMulti type)
    (
        dev: &CudaDevice, ts: &[MultiTensor], lr: f32, beta1: f32, beta2: f32, eps: f32, wd: f32,
        decoupled: bool,
    );

    /// Adam / AdamW over every tensor of `ts` in one launch (step 2 of [`adam_f32`]).
    pub fn adam_multi_f32(..) {
        let hyper = [lr, beta1, beta2, eps, wd];
        adam_multi(dev, STEP2, "adam_multi_f32", ts, hyper, decoupled)
    }

    /// Step 3 of [`adam_multi_f32`] (same table, arguments and formula; nvcc may contract a
    /// multiply-add differently, so results agree to a few ulp): each thread loads all 16 float4
    /// of its chunk (4 each of p, g, m, v) before any arithmetic or store. The tensors' buffers
    /// must not overlap one another.
    pub fn adam_multi_loads_first(..) {
        let hyper = [lr, beta1, beta2, eps, wd];
        adam_multi(dev, STEP4, "adam_multi3_f32", ts, hyper, decoupled)
    }
}

launchers! {
    // SGD over many tensors (the SgdMulti type)
    (dev: &CudaDevice, ts: &[MultiTensor], lr: f32, momentum: f32, wd: f32);

    /// SGD (momentum, weight decay) over every tensor of `ts` in one launch (step 2 of [`sgd_f32`]).
    pub fn sgd_multi_f32(..) {
        sgd_multi(dev, STEP2, "sgd_multi_f32", ts, lr, momentum, wd)
    }

    /// Step 3 of [`sgd_multi_f32`] (same table, arguments and formula; results agree to a few
    /// ulp): each thread loads all its float4 of p, g and (with momentum) the momentum buffer
    /// before any arithmetic or store. With `momentum == 0` the buffers `s1` are never touched and
    /// may be null. The tensors' buffers must not overlap one another.
    pub fn sgd_multi_loads_first(..) {
        sgd_multi(dev, STEP3, "sgd_multi3_f32", ts, lr, momentum, wd)
    }
}

/// Launches the multi-tensor Adam kernel `name` of PTX module `module` (steps 2 and 4 share
/// the signature `(MultiTable, int, float lr, β₁, β₂, eps, wd, int decoupled)` and 256-thread
/// blocks).
fn adam_multi(
    dev: &CudaDevice,
    module: &str,
    name: &'static str,
    ts: &[MultiTensor],
    [lr, beta1, beta2, eps, wd]: [f32; 5],
    decoupled: bool,
) -> Result<()> {
    let k = dev.function(module, name)?;
    let dec = decoupled as i32;
    for (table, count, cfg) in multi_tables(name, ts)? {
        let args: [&dyn KernelArg; 8] = [&table, &count, &lr, &beta1, &beta2, &eps, &wd, &dec];
        // SAFETY: matches the signature above; the table lists buffers of n floats each.
        unsafe { dev.launch(&k, cfg, &args)? };
    }
    Ok(())
}

/// Launches the multi-tensor SGD kernel `name` of PTX module `module` (steps 2 and 3 share
/// the signature `(MultiTable, int, float lr, float momentum, float wd)` and 256-thread blocks).
fn sgd_multi(
    dev: &CudaDevice,
    module: &str,
    name: &'static str,
    ts: &[MultiTensor],
    lr: f32,
    momentum: f32,
    wd: f32,
) -> Result<()> {
    let k = dev.function(module, name)?;
    for (table, count, cfg) in multi_tables(name, ts)? {
        // SAFETY: matches the signature above.
        unsafe { dev.launch(&k, cfg, &[&table, &count, &lr, &momentum, &wd])? };
    }
    Ok(())
}

// ------------------------------------------------------------------ the ladder's table

/// An SGD launcher over many tensors: `(dev, tensors, lr, momentum, weight_decay)`.
pub type SgdMulti = fn(&CudaDevice, &[MultiTensor], f32, f32, f32) -> Result<()>;
/// An Adam launcher over many tensors: `(dev, tensors, lr, beta1, beta2, eps, weight_decay,
/// decoupled)`.
pub type AdamMulti = fn(&CudaDevice, &[MultiTensor], f32, f32, f32, f32, f32, bool) -> Result<()>;

/// The launchers of one step of the optimizer ladder.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The step (described in [`super::ladder::Family::Optim`]'s table).
    pub step: super::rows::Step,
    /// One launch for a group of tensors; `None`: [`sgd_f32`] / [`adam_f32`] once per tensor.
    pub multi: Option<(SgdMulti, AdamMulti)>,
}

/// The optimizer ladder: the one table the backend, the benchmarks and the tests run.
pub const STEPS: [Kernels; 4] = {
    use super::rows::Step;
    [
        Kernels {
            step: Step::One,
            multi: None,
        },
        Kernels {
            step: Step::Two,
            multi: Some((sgd_multi_f32, adam_multi_f32)),
        },
        Kernels {
            step: Step::Three,
            multi: Some((sgd_multi_loads_first, adam_multi_f32)),
        },
        Kernels {
            step: Step::Four,
            multi: Some((sgd_multi_loads_first, adam_multi_loads_first)),
        },
    ]
};

/// The launchers of `step` (the highest step at or below it).
pub fn at(step: super::rows::Step) -> &'static Kernels {
    super::ladder::pick(&STEPS, step, |k| k.step)
}

#[cfg(test)]
mod tests {
    /// The chunk and block sizes of the launchers are the kernels'.
    #[test]
    fn chunk_and_block_match_optim_cu() {
        let src = concat!(
            include_str!("../../../../kernels/optim/optim.cuh"),
            include_str!("../../../../kernels/optim/02_multi_tensor.cu"),
            include_str!("../../../../kernels/optim/03_loads_first_sgd.cu"),
            include_str!("../../../../kernels/optim/04_loads_first.cu"),
        );
        assert!(src.contains(&format!("#define MT_CHUNK {}", super::MT_CHUNK)));
        assert!(src.contains(&format!("#define MT_PARAM_MAX {}", super::MT_PARAM_MAX)));
        assert_eq!(std::mem::size_of::<super::MultiTable>(), 64 * 56); // within 4 KB of parameters
        assert!(src.contains("#define MT3_THREADS 256"));
        for k in [
            "sgd_multi_f32",
            "adam_multi_f32",
            "sgd_multi3_f32",
            "adam_multi3_f32",
        ] {
            assert!(src.contains(&format!(" {k}(")), "{k}");
        }
    }
}
