//! The ranking as plain data: order, cost, significance, and the explanation.

use super::selection_world::selection_spec;
use super::*;
use crate::plan::ranking::{choose, cost, explain, rank, Margin};

#[test]
fn the_ranking_explains_itself_from_plain_data() {
    let spec = selection_spec("");
    let v = |i: i32, samples: &[f64]| crate::api::SelectionVariant {
        index: i,
        objective_samples: samples.to_vec(),
        ..Default::default()
    };
    let variants = [
        v(0, &[]),
        v(1, &[0.100, 0.104, 0.098, 0.101]),
        v(2, &[0.080, 0.082, 0.079, 0.081]),
    ];
    let ranking = rank(spec.candidate_list(), None, &variants);
    assert_eq!(ranking[2].verdict, Verdict::Inconclusive);
    assert_eq!(
        ranking.iter().map(|r| r.cost).collect::<Vec<_>>(),
        [Some(6), Some(8), Some(1)]
    );
    let samples = |i: i32| variants[i as usize].objective_samples.as_slice();
    let choice = choose(&ranking, 0.05, 0.05, samples).unwrap();
    assert_eq!((choice.winner, choice.runner_up), (2, Some(1)));
    assert!(matches!(choice.margin, Margin::Significant { p_value: Some(p), .. } if p < 0.05));
    let msg = explain(
        &ranking,
        &choice,
        crate::api::ObjectiveMetric::Latency,
        0.05,
        0.05,
    );
    assert!(
        msg.starts_with(
            "Chose puma 2×3 (latency 80.5 ms) over the runner-up puma 2×4 (100.8 ms): 25.2% lower"
        ),
        "{msg}"
    );
    assert!(msg.contains("Mann-Whitney p = "), "{msg}");
    let falcon = RenderedServer {
        server: ServerKind::Falcon,
        workers: Some(2),
        ..Default::default()
    };
    assert_eq!(cost(&falcon), Some(2));
}
