//! CPU matmul throughput: square `n × n · n × n` products at n = 256, 512, 1024, and the Linear
//! layout `x · Wᵀ` (`matmul_t(.., false, true)`) at 1024.
//!
//! Throughput is set to `2·n³` elements, so criterion's "elem/s" reads as FLOP/s.
//!
//! Run: `cargo bench -p camel-core --bench matmul`

use camel_core::{Device, Tensor};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

fn flops(n: usize) -> u64 {
    2 * (n as u64).pow(3)
}

fn bench_matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_cpu");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for n in [256usize, 512, 1024] {
        let a = Tensor::randn_seeded(&[n, n], 1, Device::Cpu).unwrap();
        let b = Tensor::randn_seeded(&[n, n], 2, Device::Cpu).unwrap();
        g.throughput(Throughput::Elements(flops(n)));
        g.bench_with_input(BenchmarkId::new("nn", n), &n, |bch, _| {
            bch.iter(|| black_box(a.matmul(black_box(&b)).unwrap()))
        });
    }
    let n = 1024;
    let a = Tensor::randn_seeded(&[n, n], 3, Device::Cpu).unwrap();
    let w = Tensor::randn_seeded(&[n, n], 4, Device::Cpu).unwrap();
    g.throughput(Throughput::Elements(flops(n)));
    g.bench_with_input(BenchmarkId::new("nt", n), &n, |bch, _| {
        bch.iter(|| black_box(a.matmul_t(black_box(&w), false, true).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench_matmul);
criterion_main!(benches);
