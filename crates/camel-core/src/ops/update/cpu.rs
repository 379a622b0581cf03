//! The CPU reference of the optimizer updates, one tensor at a time.

use super::{guarded_bias, Guard, UpdateKernels, UpdateRule};
use crate::backend::cpu::CpuStorage;
use crate::Result;

impl UpdateKernels for CpuStorage {
    fn update_multi(
        ps: &mut [&mut Self],
        gs: &[&Self],
        states: &mut [Vec<&mut Self>],
        rules: &[UpdateRule],
        guard: Option<Guard<'_, Self>>,
    ) -> Result<()> {
        let op = "optimizer step";
        if let Some(g) = &guard {
            if g.found_inf.f32(op)?[0] != 0.0 {
                return Ok(()); // an overflow: the step is skipped
            }
        }
        for (i, p) in ps.iter_mut().enumerate() {
            let g = gs[i].f32(op)?;
            let mut bufs: Vec<&mut [f32]> = Vec::with_capacity(states[i].len());
            for s in states[i].iter_mut() {
                bufs.push(s.f32_mut(op)?);
            }
            let mut rule = rules[i];
            if let (
                Some(gd),
                UpdateRule::Adam {
                    beta1,
                    beta2,
                    bc1,
                    bc2,
                    ..
                },
            ) = (&guard, &mut rule)
            {
                let t = gd.steps[i] - gd.skipped.f32(op)?[0];
                (*bc1, *bc2) = (guarded_bias(*beta1, t), guarded_bias(*beta2, t));
            }
            update(p.f32_mut(op)?, g, &mut bufs, &rule);
        }
        Ok(())
    }

    fn grad_unscale(gs: &mut [&mut Self], scale: &Self, found_inf: &mut Self) -> Result<()> {
        let op = "unscale_grads";
        let inv = 1.0 / scale.f32(op)?[0];
        let mut bad = false;
        for g in gs.iter_mut() {
            for x in g.f32_mut(op)?.iter_mut() {
                *x *= inv;
                bad |= !x.is_finite();
            }
        }
        if bad {
            found_inf.f32_mut(op)?[0] = 1.0;
        }
        Ok(())
    }

    fn loss_scale_update(
        scale: &mut Self,
        growth_tracker: &mut Self,
        found_inf: &mut Self,
        skipped: &mut Self,
        growth_factor: f32,
        backoff_factor: f32,
        growth_interval: u32,
    ) -> Result<()> {
        let op = "update_loss_scale";
        let (s, g) = (
            &mut scale.f32_mut(op)?[0],
            &mut growth_tracker.f32_mut(op)?[0],
        );
        let (f, k) = (&mut found_inf.f32_mut(op)?[0], &mut skipped.f32_mut(op)?[0]);
        if *f != 0.0 {
            *s *= backoff_factor;
            *g = 0.0;
            *k += 1.0;
        } else {
            let mut finite_steps = *g + 1.0;
            if finite_steps >= growth_interval as f32 {
                let grown = *s * growth_factor;
                if grown.is_finite() {
                    *s = grown; // a scale that would overflow stays
                }
                finite_steps = 0.0;
            }
            *g = finite_steps;
        }
        *f = 0.0;
        Ok(())
    }

    fn grad_norm_clip(gs: &mut [&mut Self], max_norm: f32) -> Result<Self> {
        let op = "clip_grad_norm";
        // The reference: squares summed in f64, so the f32 kernels are checked against it.
        let mut sumsq = 0.0f64;
        for g in gs.iter() {
            sumsq += g
                .f32(op)?
                .iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum::<f64>();
        }
        let norm = sumsq.sqrt() as f32;
        let scale = super::clip_scale(norm, max_norm);
        if scale != 1.0 {
            for g in gs.iter_mut() {
                g.f32_mut(op)?.iter_mut().for_each(|x| *x *= scale);
            }
        }
        Ok(CpuStorage::F32(vec![norm]))
    }
}

/// One optimizer step in place. `state` holds the rule's buffers: `[momentum]` for SGD
/// (unused when momentum is 0), `[m, v]` for Adam.
pub fn update(p: &mut [f32], g: &[f32], state: &mut [&mut [f32]], rule: &UpdateRule) {
    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            weight_decay,
        } => {
            if momentum == 0.0 {
                for (pi, &gi) in p.iter_mut().zip(g) {
                    *pi -= lr * (gi + weight_decay * *pi);
                }
            } else {
                let buf = &mut state[0];
                for ((pi, &gi), bi) in p.iter_mut().zip(g).zip(buf.iter_mut()) {
                    *bi = momentum * *bi + gi + weight_decay * *pi;
                    *pi -= lr * *bi;
                }
            }
        }
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bc1,
            bc2,
        } => {
            let (ms, vs) = state.split_at_mut(1);
            let n = p.len();
            let adam = Adam {
                p,
                g: &g[..n],
                m: &mut ms[0][..n],
                v: &mut vs[0][..n],
                c: [lr, beta1, beta2, eps, weight_decay, bc1, bc2],
                decoupled,
            };
            crate::backend::vector::widest(adam);
        }
    }
}

/// One Adam step over equal-length slices, as a loop for `vector::widest`: the elements are
/// independent, so it vectorizes (the division and square root too) with each element's
/// arithmetic unchanged.
struct Adam<'a> {
    p: &'a mut [f32],
    g: &'a [f32],
    m: &'a mut [f32],
    v: &'a mut [f32],
    /// lr, beta1, beta2, eps, weight_decay, bc1, bc2
    c: [f32; 7],
    decoupled: bool,
}

impl crate::backend::vector::Loop for Adam<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let [lr, beta1, beta2, eps, weight_decay, bc1, bc2] = self.c;
        let params = self.p.iter_mut().zip(self.g);
        for ((pi, &g), (mi, vi)) in params.zip(self.m.iter_mut().zip(self.v.iter_mut())) {
            let mut gi = g;
            if self.decoupled {
                *pi -= lr * weight_decay * *pi;
            } else {
                gi += weight_decay * *pi;
            }
            *mi = beta1 * *mi + (1.0 - beta1) * gi;
            *vi = beta2 * *vi + (1.0 - beta2) * gi * gi;
            let mh = *mi / bc1;
            let vh = *vi / bc2;
            *pi -= lr * mh / (vh.sqrt() + eps);
        }
    }
}
