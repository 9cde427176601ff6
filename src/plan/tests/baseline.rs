//! The baseline reference (what the candidate is compared with at 100%) and the warning for
//! analyses that find no data at all.

use super::*;
use crate::analysis::{aggregate, judge_check, reference_baseline, Limits, Unit};
use crate::api::{Check, Phase};

fn max_increase_check() -> Check {
    serde_yaml::from_str(r#"{metric: latency, maxIncrease: "10%"}"#).unwrap()
}

/// Default stages, the last one 30m: 30 analyses at 100% with the 1m interval.
fn long_last_stage() -> Run {
    let mut spec = spec();
    spec.analysis.checks = vec![max_increase_check()];
    spec.stages[2].duration = "30m".into();
    Run::new(spec, 6)
}

/// The analysis the shell would run now, judged by the real judge the way `analysis::analyse`
/// does: the baseline measures `baseline` while it serves, at 100% it comes from status.
fn judged(run: &Run, baseline: f64, candidate: f64) -> Option<AnalysisOutcome> {
    let now = at(run.now);
    if !analysis_due(&run.spec, &run.status, now) {
        return None;
    }
    let weight = run.world.effective_weight();
    let check = &run.spec.analysis.checks[0];
    let name = check.display_name();
    let baseline = if weight >= 100 {
        reference_baseline(&run.status.baseline_reference, &run.status.analyses, &name)
    } else {
        Some(baseline)
    };
    let limits = Limits::from_check(check).unwrap();
    let (verdict, reason) = judge_check(&limits, Unit::of(check), baseline, Some(candidate), None);
    let checks = vec![CheckResult {
        name,
        baseline,
        candidate: Some(candidate),
        limit: limits.written.clone(),
        verdict,
        reason: Some(reason),
        evidence: None,
    }];
    let min = run.spec.analysis.min_requests;
    // At 100% only the candidate needs minRequests (the baseline serves nothing).
    let base_requests = if weight >= 100 { min as f64 } else { 600.0 };
    let (verdict, reason) = aggregate(&checks, Some(base_requests), Some(300.0), min);
    Some(AnalysisOutcome {
        record: AnalysisRecord {
            at: Time(now),
            stage_index: run.status.stage_index.unwrap_or(0),
            weight,
            verdict,
            baseline_requests: Some(if weight >= 100 { 0.0 } else { 600.0 }),
            candidate_requests: Some(300.0),
            checks,
            reason: Some(reason),
            capacity: Some(measured(30.0)),
        },
        recommendation: None,
        no_data: false,
        queries: Default::default(),
    })
}

fn tick_judged(run: &mut Run, baseline: f64, candidate: f64) {
    let outcome = judged(run, baseline, candidate);
    run.tick_with(None, move |o| o.analysis = outcome.clone());
}

#[test]
fn a_long_last_stage_promotes_against_the_baseline_reference() {
    let mut run = long_last_stage();
    run.tick(None);
    let mut at_full = 0;
    while !run.status.phase.is_terminal() {
        run.now += 60;
        tick_judged(&mut run, 0.41, 0.43);
        let latest = run.status.analyses.last();
        if let Some(a) = latest.filter(|a| a.stage_index == 2 && a.at == Time(at(run.now))) {
            at_full += 1;
            assert_eq!(a.verdict, Verdict::Pass, "{a:?}");
            assert_eq!(a.checks[0].baseline, Some(0.41));
        }
        assert!(run.now < 10_000, "{:?}", run.status.message);
    }
    assert_eq!(
        run.status.phase,
        Phase::Succeeded,
        "{:?}",
        run.status.message
    );
    assert!(at_full >= 30, "{at_full} analyses at the last stage");
    assert_eq!(run.status.inconclusive_analyses, 0);
    // The last one that measured the baseline: the first at the last stage, beside the
    // standby pod (6 candidate pods + 1: 86%).
    let r = &run.status.baseline_reference["latency"];
    assert_eq!((r.value, r.stage_index, r.weight), (0.41, 2, 86));
}

#[test]
fn the_reference_follows_the_latest_measured_baseline_only() {
    let mut run = long_last_stage();
    run.tick(None);
    while run.status.stage_index != Some(1) || run.status.stage_started_at.is_none() {
        run.now += 60;
        tick_judged(&mut run, 0.41, 0.43);
    }
    run.now += 60;
    tick_judged(&mut run, 0.5, 0.5);
    let r = run.status.baseline_reference["latency"].clone();
    assert_eq!((r.value, r.at.clone()), (0.5, Time(at(run.now))));
    // A thin interval (too few baseline requests) does not replace it.
    run.now += 60;
    let mut thin = judged(&run, 0.9, 0.5).unwrap();
    thin.record.baseline_requests = Some(10.0);
    run.tick_with(None, move |o| o.analysis = Some(thin.clone()));
    assert_eq!(run.status.baseline_reference["latency"], r);
    assert_eq!(
        run.status.analyses.last().unwrap().checks[0].baseline,
        Some(0.9)
    );
    // Nor does an analysis at 100%: its baseline value is the reference itself.
    while run.status.stage_index != Some(2) || run.status.stage_started_at.is_none() {
        run.now += 60;
        tick_judged(&mut run, 0.5, 0.5);
    }
    // The first analysis there measures the standby baseline pod too; then it goes.
    run.now += 60;
    tick_judged(&mut run, 0.5, 0.5);
    assert_eq!(run.status.analyses.last().unwrap().weight, 86);
    run.now += 60;
    run.tick(None);
    let before = run.status.baseline_reference["latency"].clone();
    for _ in 0..3 {
        run.now += 60;
        let mut full = judged(&run, 0.9, 0.5).unwrap();
        full.record.checks[0].baseline = Some(0.3);
        run.tick_with(None, move |o| o.analysis = Some(full.clone()));
        assert_eq!(run.status.analyses.last().unwrap().weight, 100);
    }
    assert_eq!(run.status.baseline_reference["latency"], before);
}

#[test]
fn reference_baseline_prefers_the_reference_and_falls_back_to_the_history() {
    let history = vec![record(Verdict::Pass, 0, 1, 67)];
    let empty = Default::default();
    // A status from before the reference existed: the newest record below 100%.
    assert_eq!(reference_baseline(&empty, &history, "latency"), Some(0.41));
    let mut st = ConcurrencyExperimentStatus::default();
    st.baseline_reference.insert(
        "latency".into(),
        crate::api::BaselineReference {
            value: 0.38,
            at: Time(at(0)),
            stage_index: 0,
            weight: 33,
        },
    );
    assert_eq!(
        reference_baseline(&st.baseline_reference, &history, "latency"),
        Some(0.38)
    );
    assert_eq!(reference_baseline(&empty, &[], "latency"), None);
}

/// An analysis in which Prometheus had nothing for any check.
fn empty_outcome(run: &Run) -> AnalysisOutcome {
    let mut rec = record(
        Verdict::Inconclusive,
        run.now,
        0,
        run.world.effective_weight(),
    );
    rec.checks[0].baseline = None;
    rec.checks[0].candidate = None;
    AnalysisOutcome {
        record: rec,
        recommendation: None,
        no_data: true,
        queries: Default::default(),
    }
}

fn tick_empty(run: &mut Run) {
    run.now += 60;
    let outcome = empty_outcome(run);
    run.tick_with(None, move |o| o.analysis = Some(outcome.clone()));
}

fn no_data_events(run: &Run) -> usize {
    run.events().iter().filter(|e| *e == "NoData").count()
}

#[test]
fn analyses_without_any_data_warn_once_and_say_why() {
    let mut run = Run::new(spec(), 6);
    run.spec.analysis.inconclusive_limit = 10;
    run.tick(None);
    run.now += 10;
    run.tick(None);
    for n in 1..=2 {
        tick_empty(&mut run);
        assert_eq!(run.status.no_data_analyses, n);
    }
    assert_eq!(no_data_events(&run), 0);
    assert!(conditions::get(&run.status, conditions::NO_DATA).is_none());
    // The third: warned, with the likely causes. Every tick also replays itself, so a
    // repeated Event would fail there.
    for _ in 0..4 {
        tick_empty(&mut run);
    }
    assert_eq!(no_data_events(&run), 1);
    let c = conditions::get(&run.status, conditions::NO_DATA).unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "NoData"));
    for part in [
        "interval (1m)",
        "two scrapes",
        "metric names",
        "does not scrape",
    ] {
        assert!(c.message.contains(part), "{part} missing in {}", c.message);
    }
    // Data is back: the condition says so and the count starts again.
    run.now += 60;
    run.tick(Some(Verdict::Pass));
    assert_eq!(run.status.no_data_analyses, 0);
    assert_eq!(
        condition(&run.status, conditions::NO_DATA),
        ("False".into(), "DataSeen".into())
    );
    // An analysis that is inconclusive for other reasons (too few requests, Prometheus down)
    // is not "no data".
    for _ in 0..4 {
        run.now += 60;
        run.tick(Some(Verdict::Inconclusive));
    }
    assert_eq!(run.status.no_data_analyses, 0);
    assert_eq!(no_data_events(&run), 1);
}

#[test]
fn the_inconclusive_rollback_points_at_the_missing_data() {
    let mut run = Run::new(spec(), 6);
    run.tick(None);
    run.now += 10;
    run.tick(None);
    for _ in 0..4 {
        tick_empty(&mut run);
    }
    assert_eq!(run.status.phase, Phase::RollingBack);
    let d = run.status.decision.clone().unwrap();
    assert_eq!(d.reason, INCONCLUSIVE_LIMIT);
    assert!(d.message.contains("NoData condition"), "{}", d.message);
    assert_eq!(
        run.events(),
        [
            "Started",
            "AnalysisInconclusive",
            "AnalysisInconclusive",
            "NoData",
            "AnalysisInconclusive",
            "AnalysisInconclusive",
            INCONCLUSIVE_LIMIT
        ]
    );
}
