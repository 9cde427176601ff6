//! What the evidence shows about candidate / baseline as a range of ratios, shared by the
//! quantile and the rate tests: the edges found by bisection over a monotone "shown" test.

/// What the evidence shows about candidate / baseline so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioBounds {
    /// The candidate is shown to be above this multiple of the baseline.
    pub lower: Option<f64>,
    /// The candidate is shown to be within this multiple of the baseline.
    pub upper: Option<f64>,
}

const RATIO_MIN: f64 = 1e-3;
const RATIO_MAX: f64 = 1e3;

/// The edge of the ratios for which `shown` holds: `shown` is monotone — true up to the edge
/// (`below`) or from it on. Bisection in log space to 0.1 %.
pub(super) fn boundary(shown: impl Fn(f64) -> bool, below: bool) -> Option<f64> {
    let (inner, outer) = if below {
        (RATIO_MIN, RATIO_MAX)
    } else {
        (RATIO_MAX, RATIO_MIN)
    };
    if !shown(inner) {
        return None;
    }
    if shown(outer) {
        return Some(outer);
    }
    let (mut yes, mut no) = (inner.ln(), outer.ln());
    while (yes - no).abs() > 1e-3 {
        let mid = (yes + no) / 2.0;
        if shown(mid.exp()) {
            yes = mid;
        } else {
            no = mid;
        }
    }
    Some(yes.exp())
}
