//! Caching allocator. Its own test binary with one test, so no other test allocates on the
//! device meanwhile and the statistics are exact.

use camel_cuda::{test_device, MemoryStats};

#[test]
fn allocator_reuses_cached_blocks() {
    let Some(dev) = test_device() else { return };
    let before: MemoryStats = dev.memory_stats();

    // First round: fresh blocks from the driver.
    let sizes = [1usize, 513, 4096, 10_000, 1 << 20, (3 << 20) + 7];
    let bufs: Vec<_> = sizes.iter().map(|&n| dev.alloc(n).unwrap()).collect();
    let during = dev.memory_stats();
    let held: usize = bufs.iter().map(|b| b.capacity()).sum();
    assert_eq!(during.in_use, before.in_use + held);
    assert!(during.peak >= during.in_use);
    let ptrs: Vec<_> = bufs.iter().map(|b| b.ptr()).collect();
    drop(bufs);
    let after = dev.memory_stats();
    assert_eq!(
        after.in_use, before.in_use,
        "in_use returns to where it was"
    );
    assert_eq!(
        after.cached,
        before.cached + held,
        "dropped blocks are cached"
    );

    // Steady state: the same sizes again come from the cache, with no cuMemAlloc.
    for _ in 0..10 {
        let bufs: Vec<_> = sizes.iter().map(|&n| dev.alloc(n).unwrap()).collect();
        for b in &bufs {
            assert!(ptrs.contains(&b.ptr()), "{b:?} should be a cached block");
        }
    }
    let steady = dev.memory_stats();
    assert_eq!(
        steady.driver_allocs, after.driver_allocs,
        "no driver allocation in steady state"
    );
    assert_eq!(
        steady.cache_hits,
        after.cache_hits + 10 * sizes.len() as u64
    );
    assert_eq!(steady.in_use, before.in_use);

    // A size of the same class reuses the block too.
    let a = dev.alloc(1 << 20).unwrap();
    let p = a.ptr();
    drop(a);
    let b = dev.alloc((1 << 20) - 100).unwrap();
    assert_eq!(b.ptr(), p);
    assert_eq!(b.bytes(), (1 << 20) - 100);
    drop(b);

    // Zero-byte buffers touch nothing.
    let z = dev.alloc(0).unwrap();
    assert!(z.is_empty() && z.ptr().raw() == 0);
    drop(z);

    dev.empty_cache().unwrap();
    let emptied = dev.memory_stats();
    assert_eq!(emptied.cached, 0);
    assert_eq!(emptied.in_use, before.in_use);
}
