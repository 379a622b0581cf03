//! Book-keeping of the caching allocator: size classes and free lists. Pure Rust; the driver
//! calls (`cuMemAlloc`/`cuMemFree`) are made by [`crate::CudaDevice`].
//!
//! A request is rounded up to its size class; a dropped [`crate::Buffer`] returns its block to
//! the free list of that class, and the next request of the same class takes it back without a
//! driver call. Reuse is safe without synchronizing because all work of a device runs on its one
//! stream: whatever used the block before is ordered before whatever uses it next.

use std::collections::BTreeMap;

/// Smallest block, and the granularity of blocks up to 4 KiB.
const SMALL: usize = 512;
/// Above this, eight size classes per power of two (at most 12.5% rounding waste).
const SMALL_LIMIT: usize = 4096;

/// The block size a request of `bytes` gets. `bytes > 0`.
pub(crate) fn size_class(bytes: usize) -> usize {
    if bytes <= SMALL_LIMIT {
        return bytes.div_ceil(SMALL).max(1) * SMALL;
    }
    let log2 = usize::BITS - 1 - bytes.leading_zeros(); // floor(log2(bytes)) >= 12
    let step = 1usize << (log2 - 3);
    bytes.div_ceil(step) * step
}

/// Allocator statistics of one device, in bytes of blocks (size classes), not requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Held by live buffers.
    pub in_use: usize,
    /// Highest `in_use` so far.
    pub peak: usize,
    /// Free blocks kept for reuse (returned to the driver by `empty_cache`).
    pub cached: usize,
    /// `cuMemAlloc` calls so far.
    pub driver_allocs: u64,
    /// Allocations served from the cache so far.
    pub cache_hits: u64,
    /// Bytes asked for by live buffers, each rounded up to 512 (not to its size class): what
    /// PyTorch's `torch.cuda.memory_allocated` counts.
    pub requested: usize,
    /// Highest `requested` so far (PyTorch's `torch.cuda.max_memory_allocated`).
    pub peak_requested: usize,
}

/// `bytes` rounded up to 512, the granularity PyTorch's allocator statistics count in.
fn requested_bytes(bytes: usize) -> usize {
    bytes.div_ceil(SMALL) * SMALL
}

#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: BTreeMap<usize, Vec<u64>>,
    stats: MemoryStats,
}

impl Pool {
    /// A cached block of `class` for a request of `bytes`, if any; counts it as in use.
    pub(crate) fn take(&mut self, class: usize, bytes: usize) -> Option<u64> {
        let list = self.free.get_mut(&class)?;
        let ptr = list.pop()?;
        if list.is_empty() {
            self.free.remove(&class);
        }
        self.stats.cached -= class;
        self.stats.cache_hits += 1;
        self.add_in_use(class, bytes);
        Some(ptr)
    }

    /// Records a block of `class` fresh from the driver for a request of `bytes`.
    pub(crate) fn record_new(&mut self, class: usize, bytes: usize) {
        self.stats.driver_allocs += 1;
        self.add_in_use(class, bytes);
    }

    /// Takes back the block of a dropped buffer of `bytes`.
    pub(crate) fn give_back(&mut self, ptr: u64, class: usize, bytes: usize) {
        self.stats.in_use -= class;
        self.stats.requested -= requested_bytes(bytes);
        self.stats.cached += class;
        self.free.entry(class).or_default().push(ptr);
    }

    /// Removes every cached block (for the caller to free).
    pub(crate) fn drain(&mut self) -> Vec<u64> {
        self.stats.cached = 0;
        std::mem::take(&mut self.free)
            .into_values()
            .flatten()
            .collect()
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        self.stats
    }

    fn add_in_use(&mut self, class: usize, bytes: usize) {
        self.stats.in_use += class;
        self.stats.peak = self.stats.peak.max(self.stats.in_use);
        self.stats.requested += requested_bytes(bytes);
        self.stats.peak_requested = self.stats.peak_requested.max(self.stats.requested);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_little() {
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 4096 + 512);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), (1 << 20) + (1 << 17));
        for bytes in (1..5_000_000).step_by(9973) {
            let c = size_class(bytes);
            assert!(c >= bytes && c % 512 == 0, "{bytes} -> {c}");
            assert!(bytes <= 4096 || (c - bytes) * 8 <= bytes, "{bytes} -> {c}");
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }

    #[test]
    fn pool_reuses_by_class_and_counts() {
        let mut p = Pool::default();
        assert_eq!(p.take(512, 100), None);
        p.record_new(512, 100);
        p.record_new(1024, 600);
        assert_eq!(p.stats().in_use, 1536);
        p.give_back(0xA00, 512, 100);
        assert_eq!(
            p.stats(),
            MemoryStats {
                in_use: 1024,
                peak: 1536,
                cached: 512,
                driver_allocs: 2,
                cache_hits: 0,
                requested: 1024,
                peak_requested: 1536,
            }
        );
        assert_eq!(p.take(1024, 1024), None);
        assert_eq!(p.take(512, 512), Some(0xA00));
        assert_eq!(p.stats().cache_hits, 1);
        assert_eq!(p.stats().cached, 0);
        assert_eq!(p.stats().requested, 1536);
        p.give_back(0xA00, 512, 512);
        p.give_back(0xB00, 1024, 600);
        let mut drained = p.drain();
        drained.sort();
        assert_eq!(drained, [0xA00, 0xB00]);
        assert_eq!(p.stats().cached, 0);
        assert_eq!(p.stats().in_use, 0);
        assert_eq!(p.stats().peak, 1536);
        assert_eq!(p.stats().requested, 0);
        assert_eq!(p.stats().peak_requested, 1536);
    }
}
