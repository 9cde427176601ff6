//! Byte budgets: cut at a character boundary, marked, never longer than the budget; and
//! status written by an operator that stored a query per check still reads.

use crate::api::{truncate, ConcurrencyExperimentStatus, Verdict, CHECK_REASON_BYTES};

#[test]
fn text_is_cut_by_bytes_at_a_character_boundary_with_an_ellipsis() {
    assert_eq!(truncate("short", 10), "short");
    assert_eq!(truncate("exactly10!", 10), "exactly10!");
    assert_eq!(truncate("abcdefghijk", 10), "abcdefg…");
    // 3-byte characters: 10 bytes leave 7 for text, so 2 characters (6 bytes) and the mark.
    assert_eq!(truncate("エラーです", 10), "エラ…");
    // 2-byte characters, an odd budget.
    let cut = truncate(&"é".repeat(100), 11);
    assert_eq!(cut, "éééé…");
    for max in 0..40 {
        let cut = truncate(&"aé漢🦀".repeat(20), max);
        assert!(cut.len() <= max, "{max}: {cut:?} is {} bytes", cut.len());
    }
}

#[test]
fn bound_text_cuts_a_long_prometheus_error_in_a_check_reason() {
    let mut st: ConcurrencyExperimentStatus = serde_json::from_value(serde_json::json!({
        "analyses": [{
            "at": "2026-11-30T01:00:00Z", "stageIndex": 0, "weight": 30, "verdict": "Inconclusive",
            "checks": [{"name": "latency", "limit": "max 500ms", "verdict": "Inconclusive",
                        "reason": "candidate query failed (PrometheusError): ".to_string() + &"失敗".repeat(500)}]
        }]
    }))
    .unwrap();
    st.bound();
    let reason = st.analyses[0].checks[0].reason.clone().unwrap();
    assert!(reason.len() <= CHECK_REASON_BYTES, "{reason}");
    assert!(reason.starts_with("candidate query failed (PrometheusError): 失敗"));
    assert!(reason.ends_with('…'));
}

/// Status as the previous operator version wrote it: a `query` in every check and the
/// checks repeated in `selection.ranking[]`. An operator upgraded mid-experiment reads it.
#[test]
fn status_written_with_a_query_per_check_still_reads() {
    let old = r#"{
      "phase": "Progressing", "stageIndex": 0, "stage": "1/3", "plannedWeight": 30,
      "effectiveWeight": 33, "failedAnalyses": 0, "inconclusiveAnalyses": 0,
      "stagePassedAnalyses": 1,
      "analyses": [{"at": "2026-11-30T01:01:00Z", "stageIndex": 0, "weight": 33,
        "verdict": "Pass", "baselineRequests": 600, "candidateRequests": 300,
        "checks": [{"name": "latency", "query": "histogram_quantile(0.99, sum by (le) (rate(x_bucket{pod=~\"^storefront-candidate-.*$\"}[1m])))",
                    "baseline": 0.41, "candidate": 0.4, "limit": "max 500ms",
                    "verdict": "Pass", "reason": "candidate 400ms is within max 500ms"}],
        "reason": "all 1 checks passed"}],
      "selection": {"variants": [{"index": 0, "summary": "puma 2×4",
          "config": {"server": "puma", "workers": 2, "threads": 4},
          "checks": [{"name": "latency", "query": "q", "limit": "max 500ms", "verdict": "Pass"}]}],
        "ranking": [{"index": 0, "summary": "puma 2×4",
          "config": {"server": "puma", "workers": 2, "threads": 4}, "verdict": "Pass",
          "checks": [{"name": "latency", "query": "q", "limit": "max 500ms", "verdict": "Pass"}]}],
        "winner": 0}
    }"#;
    let st: ConcurrencyExperimentStatus = serde_json::from_str(old).unwrap();
    let c = &st.analyses[0].checks[0];
    assert_eq!((c.name.as_str(), c.verdict), ("latency", Verdict::Pass));
    assert_eq!(c.candidate, Some(0.4));
    let sel = st.selection.as_ref().unwrap();
    assert_eq!(sel.variants[0].checks[0].name, "latency");
    assert_eq!(sel.ranking[0].index, 0);
    // Written back, the old fields are gone and the queries are kept once per check from
    // the next analysis on.
    let again = serde_json::to_string(&st).unwrap();
    assert!(!again.contains("\"query\""), "{again}");
    assert!(st.queries.is_empty());
}
