use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::*;
use crate::kubectl::render::*;
use crate::kubectl::render::{experiment_detail, experiment_list};

#[test]
fn the_detail_shows_stage_weights_the_latest_analysis_and_the_recommendation() {
    assert_eq!(experiment_detail(&progressing(), now()), PROGRESSING_DETAIL);
}

#[test]
fn a_rolled_back_experiment_shows_the_failed_check_its_reason_and_the_decision() {
    assert_eq!(
        experiment_detail(&rolled_back(), now()),
        "\
Name:        storefront-threads
Namespace:   shop
Target:      Deployment storefront, container web
Phase:       RolledBack
Stage:       1/3, weight 30% planned / 0% in force
Message:     Rolled back: the baseline serves all traffic again.
Baseline:    puma 2×6 — Deployment storefront, 2/2 ready
Candidate:   puma 2×4 — Deployment storefront-candidate, 0/0 ready
Analyses:    1 failed (failureLimit 0), 0 inconclusive (inconclusiveLimit 3)
Retry:       `kubectl concurrency retry storefront-threads` starts again from stage 1

Latest analysis: 2026-11-30T01:05:00Z (7m30s ago), stage 1/3, weight 33%, requests baseline 1200 / candidate 590
  CHECK      BASELINE  CANDIDATE  LIMIT                       VERDICT
  latency    72ms      72ms       max 500ms, maxIncrease 10%  ✓ Pass
  queueTime  1.7ms     459.2ms    max 50ms                    ✗ Fail
  memory     194Mi     -          maxIncrease 20%             ? Inconclusive
  gvlWait    0%        0%         max 15%                     ✓ Pass
  Verdict: ✗ Fail — failed: queueTime
  queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms)
  memory: no data for the candidate

Decision:       Rollback (CheckFailed) at 2026-11-30T01:05:02Z — Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).
Recommendation: I/O share 52%: 4 threads per process (speedup 1.64×; thread 5 would gain only 4.5%, below 5%)
"
    );
}

#[test]
fn holds_and_pauses_name_the_command_that_continues() {
    let held = exp(edited(|v| {
        v["spec"]["promotion"] = json!("manual");
        v["spec"]["paused"] = json!(true);
        let s = &mut v["status"];
        s["phase"] = json!("Paused");
        s["holdReason"] = json!("AwaitingApproval");
        s["analyses"] = json!([]);
        s.as_object_mut().unwrap().remove("recommendation");
    }));
    let text = experiment_detail(&held, now());
    assert!(
        text.contains(
            "Hold:        AwaitingApproval — all stages passed; `kubectl concurrency approve storefront-threads` promotes once spec.paused is lifted (`kubectl concurrency resume`), `abort` rolls back\n\
             Paused:      spec.paused — `kubectl concurrency resume storefront-threads` continues\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nLatest analysis: none yet\n"), "{text}");
    assert!(
        text.contains("\nRecommendation: none yet (needs the GVL counters, or the request-duration histogram and the container's CPU)\n"),
        "{text}"
    );
    let new = exp(edited(|v| {
        v.as_object_mut().unwrap().remove("status");
    }));
    let text = experiment_detail(&new, now());
    assert!(
        text.contains("Phase:       Pending (not yet seen by the operator)\n"),
        "{text}"
    );
    assert!(
        text.contains("Candidate:   puma 2×4 (not deployed)\n"),
        "{text}"
    );
}

#[test]
fn the_list_has_one_line_per_experiment() {
    let mut other = rolled_back_json();
    other["metadata"]["name"] = json!("storefront-1x1");
    other["metadata"]["creationTimestamp"] = json!("2026-11-28T23:00:00Z");
    let mut held = progressing_json();
    held["metadata"]["name"] = json!("storefront-manual");
    held["status"]["phase"] = json!("Paused");
    held["status"]["holdReason"] = json!("InconclusiveLimit");
    assert_eq!(
        experiment_list(&[progressing(), exp(other), exp(held)], now()),
        "\
NAME                TARGET      PHASE                       STAGE  PLANNED  IN FORCE  VERDICT  BASELINE  CANDIDATE  DECISION                AGE
storefront-threads  storefront  Progressing                 2/3    70%      67%       Pass     puma 2×6  puma 2×4   -                       12m
storefront-1x1      storefront  RolledBack                  1/3    30%      0%        Fail     puma 2×6  puma 2×4   Rollback (CheckFailed)  26h
storefront-manual   storefront  Paused (InconclusiveLimit)  2/3    70%      67%       Pass     puma 2×6  puma 2×4   -                       12m
"
    );
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn ages_read_like_kubectl() {
    let now = at("2026-11-30T12:00:00Z");
    let ago = |secs: i64| age(now, Timestamp::from_second(now.as_second() - secs).unwrap());
    assert_eq!(ago(0), "0s");
    assert_eq!(ago(119), "119s");
    assert_eq!(ago(200), "3m20s");
    assert_eq!(ago(300), "5m");
    assert_eq!(ago(720), "12m");
    assert_eq!(ago(5 * 3600 + 600), "5h10m");
    assert_eq!(ago(30 * 3600), "30h");
    assert_eq!(ago(51 * 3600), "2d3h");
    assert_eq!(ago(40 * 86400), "40d");
    assert_eq!(ago(3 * 365 * 86400), "3y");
    // A clock behind the server's is not a negative age.
    assert_eq!(ago(-30), "0s");
}

#[test]
fn tables_pad_by_characters_and_trim_the_end() {
    let mut t = Table::new(["A", "B", "C"]).indented("  ");
    t.row(["puma 2×6", "✓", ""]);
    t.row(["x", "longer", "z"]);
    pretty_assertions::assert_eq!(
        t.render(),
        "  A         B       C\n  puma 2×6  ✓\n  x         longer  z\n"
    );
}

#[test]
fn the_capacity_lines_say_where_each_variants_times_come_from() {
    use crate::api::{CapacityMeasurement, CapacitySource, VariantCapacity};
    let m = CapacityMeasurement {
        baseline: Some(VariantCapacity {
            cpu_per_request: Some(0.002),
            io_per_request: Some(0.060),
            source: Some(CapacitySource::GvlCounters),
            capacity_per_pod: Some(129.03),
            headroom: Some(0.77),
            ..Default::default()
        }),
        candidate: Some(VariantCapacity {
            cpu_per_request: Some(0.003),
            source: Some(CapacitySource::StandardMetrics),
            ..Default::default()
        }),
        total_rate: Some(90.0),
    };
    assert_eq!(
        crate::kubectl::render::capacity_lines(&m),
        "  Capacity baseline: 2ms CPU + 60ms I/O per request (GVL counters), 129.0 req/s per \
         pod, headroom 77%\n  Capacity candidate: 3ms CPU + - I/O per request (standard \
         metrics), - per pod, headroom -\n"
    );
}
