//! The CPU backend's threads: an op whose output splits into independent items (the images of a
//! batch, the planes of a pooling) gives each of up to [`config::cpu_threads`] scoped threads a
//! contiguous run of items. Each item is computed by the same code whatever the run it falls in,
//! so results are the same bit for bit for every thread count.

use crate::{config, Result};

/// Threads for `items` independent items of `work` units each, where a thread is worth starting
/// only for at least `min_work` units: [`config::cpu_threads`], at most one an item and one per
/// `min_work`, at least 1 (the calling thread alone).
pub(crate) fn threads_for(items: usize, work: usize, min_work: usize) -> usize {
    let by_work = items.saturating_mul(work) / min_work.max(1);
    config::cpu_threads().min(items).min(by_work).max(1)
}

/// Runs `f(first, run)` over `out` split into contiguous runs of whole items (`per` elements an
/// item, `items` items), one run a thread on `threads` scoped threads (on the calling thread
/// when `threads` is 1); the first error is returned.
pub(crate) fn for_item_runs<T, F>(
    out: &mut [T],
    per: usize,
    items: usize,
    threads: usize,
    f: F,
) -> Result<()>
where
    T: Send,
    F: Fn(usize, &mut [T]) -> Result<()> + Sync,
{
    if threads <= 1 || per == 0 {
        return f(0, out);
    }
    let run = items.div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = out
            .chunks_mut(run * per)
            .enumerate()
            .map(|(i, chunk)| {
                let f = &f;
                scope.spawn(move || f(i * run, chunk))
            })
            .collect();
        join(handles)
    })
}

/// [`for_item_runs`] over two outputs cut at the same items: `per_a` elements an item of `a`,
/// `per_b` of `b`.
pub(crate) fn for_item_runs2<A, B, F>(
    (a, per_a): (&mut [A], usize),
    (b, per_b): (&mut [B], usize),
    items: usize,
    threads: usize,
    f: F,
) -> Result<()>
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [A], &mut [B]) -> Result<()> + Sync,
{
    if threads <= 1 || per_a == 0 || per_b == 0 {
        return f(0, a, b);
    }
    let run = items.div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = a
            .chunks_mut(run * per_a)
            .zip(b.chunks_mut(run * per_b))
            .enumerate()
            .map(|(i, (ca, cb))| {
                let f = &f;
                scope.spawn(move || f(i * run, ca, cb))
            })
            .collect();
        join(handles)
    })
}

/// Joins every thread, re-raising a panic and returning the first error.
fn join(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<()>>>) -> Result<()> {
    handles
        .into_iter()
        .try_for_each(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
}
