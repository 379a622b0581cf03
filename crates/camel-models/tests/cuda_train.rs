//! Training on the GPU: XOR converges, the MLP's GPU gradients match the CPU's, and the caching
//! allocator's bytes in use return to the same value after every step (no leak, no growth).

use camel_models::xor::train_xor;
use camel_models::Mlp;
use camel_nn::testing::gpu;
use camel_nn::{Device, Module, Tensor};
use camel_optim::{Adam, Optimizer};

/// The tests of this file share one GPU and read its device-wide allocator statistics: run them
/// one at a time.
static GPU_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn xor_trains_on_gpu() {
    let _one_at_a_time = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(g) = gpu() else { return };
    let losses = train_xor(500, 0, g).unwrap();
    assert!(
        *losses.last().unwrap() < 0.01,
        "final loss {}",
        losses.last().unwrap()
    );
    let cpu = train_xor(500, 0, Device::Cpu).unwrap();
    for (i, (a, b)) in losses.iter().zip(&cpu).enumerate().take(50) {
        assert!(
            (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
            "step {i}: gpu {a} vs cpu {b}"
        );
    }
}

#[test]
fn allocator_in_use_is_stable_over_100_steps() {
    let _one_at_a_time = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(g) = gpu() else { return };
    let dev = camel_cuda::device(0).unwrap();
    let model = Mlp::new(&[784, 256, 256, 10], 0, g).unwrap();
    let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
    let x = Tensor::randn_seeded(&[64, 784], 1, g).unwrap();
    let y = Tensor::from_vec_i64((0..64).map(|i| i % 10).collect(), &[64], g).unwrap();
    let mut in_use = Vec::new();
    for _ in 0..100 {
        opt.zero_grad();
        let loss = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        drop(loss);
        in_use.push(dev.memory_stats().in_use);
    }
    // step 1 creates Adam's state; from step 2 on nothing may grow.
    let steady = in_use[1];
    for (i, &b) in in_use.iter().enumerate().skip(1) {
        assert_eq!(
            b,
            steady,
            "bytes in use after step {} = {b}, after step 2 = {steady}",
            i + 1
        );
    }
    let stats = dev.memory_stats();
    eprintln!(
        "allocator: in_use {} B, peak {} B, cached {} B, driver allocs {}, cache hits {}",
        stats.in_use, stats.peak, stats.cached, stats.driver_allocs, stats.cache_hits
    );
}
