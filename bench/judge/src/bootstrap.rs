//! Many experiments from one trace: a moving-block bootstrap. Each replay stitches blocks of
//! consecutive analysis intervals taken at random starts, the same steps for both variants —
//! requests cluster per interval and both variants share the machine at each moment, and
//! blocks keep both, where resampling single requests would make them independent.

use crate::manifest::Plan;
use crate::trace::{Interval, Trace};

/// SplitMix64: deterministic, so the figures in docs/benchmarks/judge.md can be reproduced.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n.max(1) as u64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.below(1 << 53) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// One experiment's analyses: twice `plan.total_analyses()` intervals of
/// `plan.interval_seconds` (a stage whose checks wait for requests runs past its duration),
/// in blocks of `block` intervals. `None` when the trace is shorter than one block.
pub fn resample(
    trace: &Trace,
    plan: &Plan,
    block: usize,
    rng: &mut Rng,
) -> Option<Vec<(Interval, Interval)>> {
    let per = (plan.interval_seconds as usize / trace.step_seconds.max(1) as usize).max(1);
    let steps = trace.steps();
    let block_steps = per * block.max(1);
    if steps < block_steps {
        return None;
    }
    let wanted = 2 * plan.total_analyses();
    let mut out = Vec::with_capacity(wanted);
    while out.len() < wanted {
        let start = rng.below(steps - block_steps + 1);
        for k in 0..block.max(1) {
            let (from, to) = (start + k * per, start + (k + 1) * per);
            out.push((
                trace.baseline.interval(from, to),
                trace.candidate.interval(from, to),
            ));
        }
    }
    out.truncate(wanted);
    Some(out)
}
