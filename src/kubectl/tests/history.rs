use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::*;
use crate::kubectl::history::history_text;

#[test]
fn history_shows_every_kept_analysis_and_why_some_did_not_pass() {
    assert_eq!(
        history_text(&progressing()),
        "\
storefront-threads: 3 analyses kept in status (the operator keeps the newest 10); in the whole experiment 0 failed (failureLimit 1), 1 inconclusive (inconclusiveLimit 3)
Limits: latency max 500ms, maxIncrease 10%; queueTime max 50ms; memory maxIncrease 20%; gvlWait max 15%

TIME                  STAGE  WEIGHT  REQUESTS (BASE / CAND)  latency (base / cand)  queueTime (base / cand)  memory (base / cand)  gvlWait (base / cand)  VERDICT
2026-11-30T01:05:00Z  1/3    33%     1200 / 600              72ms / 73ms ✓          1.7ms / 1.8ms ✓          210Mi / 194Mi ✓       0% / 1.2% ✓            Pass
2026-11-30T01:06:00Z  1/3    33%     1190 / 20               71ms / 74ms ✓          1.6ms / - ?              210Mi / 194Mi ✓       0% / 1.1% ✓            Inconclusive
2026-11-30T01:11:00Z  2/3    67%     800 / 1650              72ms / 73ms ✓          1.7ms / 1.9ms ✓          210Mi / 195Mi ✓       0% / 1.3% ✓            Pass

Why not Pass:
  2026-11-30T01:06:00Z Inconclusive: too few requests in the interval: baseline 1190, candidate 20 (minRequests 50)
    queueTime: no data for the candidate

Decision: none yet (phase Progressing)
"
    );
    assert_eq!(
        history_text(&rolled_back()),
        "\
storefront-threads: 1 analysis kept in status (the operator keeps the newest 10); in the whole experiment 1 failed (failureLimit 0), 0 inconclusive (inconclusiveLimit 3)
Limits: latency max 500ms, maxIncrease 10%; queueTime max 50ms; memory maxIncrease 20%; gvlWait max 15%

TIME                  STAGE  WEIGHT  REQUESTS (BASE / CAND)  latency (base / cand)  queueTime (base / cand)  memory (base / cand)  gvlWait (base / cand)  VERDICT
2026-11-30T01:05:00Z  1/3    33%     1200 / 590              72ms / 72ms ✓          1.7ms / 459.2ms ✗        194Mi / - ?           0% / 0% ✓              Fail

Why not Pass:
  2026-11-30T01:05:00Z Fail: failed: queueTime
    queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms)
    memory: no data for the candidate

Decision: Rollback (CheckFailed) at 2026-11-30T01:05:02Z — Rolling back: 1 failed analyses exceed failureLimit 0; queueTime: candidate 459.2ms is above max 50ms (baseline 1.7ms).
"
    );
    let empty = exp(edited(|v| {
        v["status"]["analyses"] = json!([]);
    }));
    assert!(history_text(&empty).contains("\nNo analyses yet.\n"));
}
