//! One MLP training step on the CPU: 784-256-256-10 with ReLU, Adam (lr 1e-3), cross-entropy,
//! at batch 64 and 256, on random inputs and labels (no data set needed).
//!
//! A step is what `train_epoch` does per batch: `zero_grad`, forward, `cross_entropy`,
//! `backward`, `step`. Throughput is set to the batch size, so "elem/s" reads as samples/s.
//!
//! Run: `cargo bench -p camel-models --bench train_step`

use camel_models::Mlp;
use camel_nn::{Device, Module, Tensor};
use camel_optim::{Adam, Optimizer};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Duration;

fn bench_train_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("mlp_784_256_256_10_adam_cpu");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5));
    for batch in [64usize, 256] {
        let model = Mlp::new(&[784, 256, 256, 10], 0, Device::Cpu).unwrap();
        let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
        let x = Tensor::rand_seeded(&[batch, 784], 0.0, 1.0, 1, Device::Cpu).unwrap();
        let mut rng = StdRng::seed_from_u64(2);
        let labels: Vec<i64> = (0..batch).map(|_| rng.gen_range(0..10)).collect();
        let y = Tensor::from_vec_i64(labels, &[batch], Device::Cpu).unwrap();
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_with_input(BenchmarkId::new("batch", batch), &batch, |bch, _| {
            bch.iter(|| {
                opt.zero_grad();
                let loss = model.forward(&x).unwrap().cross_entropy(&y).unwrap();
                loss.backward().unwrap();
                opt.step().unwrap();
                loss
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_train_step);
criterion_main!(benches);
