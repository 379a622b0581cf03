//! Loops compiled for the widest vector unit of the CPU they run on.
//!
//! The crate is built for the baseline x86-64 (SSE2), so a plain loop vectorizes 4 floats wide.
//! [`widest`] runs a [`Loop`] inside a function compiled for AVX-512 or AVX2 + FMA, whichever
//! the CPU has (checked at run time), so that its body vectorizes 16 or 8 wide; on other CPUs
//! and architectures it runs the loop as built. The results are the same bit for bit: only the
//! vector width changes, never the arithmetic of an element (Rust does not fuse `a * b + c`
//! into an FMA by itself).

/// A loop for [`widest`]. Its `run` must be `#[inline(always)]`: the body is compiled for the
/// wider unit only when it is inlined into the wrapper (a closure would not be, being too large
/// for the inliner's budget, and would run compiled for the baseline).
pub(crate) trait Loop {
    /// What the loop returns.
    type Output;
    /// The loop.
    fn run(self) -> Self::Output;
}

/// Runs `body` compiled for the widest vector unit this CPU has.
#[inline(always)]
pub(crate) fn widest<L: Loop>(body: L) -> L::Output {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the features the function is compiled for (checked above).
            return unsafe { avx512(body) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above.
            return unsafe { avx2(body) };
        }
    }
    body.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn avx512<L: Loop>(body: L) -> L::Output {
    body.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<L: Loop>(body: L) -> L::Output {
    body.run()
}

/// `f(x)` for each element of `x`, in a new vector.
#[inline(always)]
pub(crate) fn map<F: Fn(f32) -> f32>(x: &[f32], f: F) -> Vec<f32> {
    struct Map<'a, F>(&'a [f32], F);
    impl<F: Fn(f32) -> f32> Loop for Map<'_, F> {
        type Output = Vec<f32>;
        #[inline(always)]
        fn run(self) -> Vec<f32> {
            let Map(x, f) = self;
            // written into the spare capacity: `collect` goes through library functions that
            // are not inlined, so its loop would be compiled for the baseline
            let mut out = Vec::with_capacity(x.len());
            for (d, &v) in out.spare_capacity_mut()[..x.len()].iter_mut().zip(x) {
                d.write(f(v));
            }
            // SAFETY: the loop above wrote each of the first `x.len()` elements.
            unsafe { out.set_len(x.len()) };
            out
        }
    }
    widest(Map(x, f))
}

/// `f(a[i], b[i mod b.len()])` for each element of `a`, in a new vector: `b` has `a`'s length,
/// or is a row repeated along `a` (a bias over the rows of a matrix, say).
///
/// # Panics
///
/// When `b` is empty while `a` is not, or `a.len()` is not a multiple of `b.len()`.
#[inline(always)]
pub(crate) fn zip_map_rows<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: F) -> Vec<f32> {
    struct ZipRows<'a, F>(&'a [f32], &'a [f32], F);
    impl<F: Fn(f32, f32) -> f32> Loop for ZipRows<'_, F> {
        type Output = Vec<f32>;
        #[inline(always)]
        fn run(self) -> Vec<f32> {
            let ZipRows(a, b, f) = self;
            let mut out = Vec::with_capacity(a.len());
            let dst = &mut out.spare_capacity_mut()[..a.len()];
            for (d, row) in dst.chunks_exact_mut(b.len()).zip(a.chunks_exact(b.len())) {
                for ((d, &x), &y) in d.iter_mut().zip(row).zip(b) {
                    d.write(f(x, y));
                }
            }
            // SAFETY: the loops above wrote each of the first `a.len()` elements.
            unsafe { out.set_len(a.len()) };
            out
        }
    }
    if a.is_empty() {
        return Vec::new();
    }
    assert!(
        !b.is_empty() && a.len().is_multiple_of(b.len()),
        "zip_map_rows: {} elements and rows of {}",
        a.len(),
        b.len()
    );
    widest(ZipRows(a, b, f))
}
