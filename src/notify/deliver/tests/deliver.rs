//! The sender against a real HTTP listener on 127.0.0.1: signature and headers, retries on
//! 5xx within the bound, no retry on 4xx, a full queue that drops instead of blocking, files
//! read at each delivery, and the metric.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::notify::deliver::{Notifier, NotifierConfig, SlackSink, WebhookSink};
use crate::notify::{self, Filter, Kind, SlackOptions};
use crate::telemetry::Metrics;

fn webhook(
    url_file: std::path::PathBuf,
    key: Option<std::path::PathBuf>,
    attempts: u32,
) -> NotifierConfig {
    NotifierConfig {
        webhook: Some(WebhookSink {
            url_file,
            signing_key_file: key,
        }),
        retry: fast(attempts),
        queue: 16,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_webhook_is_posted_signed_with_the_key_from_its_file() {
    let rx = Receiver::start(&[], Answer::Status(204)).await;
    let metrics = Metrics::new();
    // A key file as `kubectl create secret --from-file` leaves it: with a newline.
    let config = webhook(
        file("url", &format!("{}\n", rx.url)),
        Some(file("key", "s3cret\n")),
        3,
    );
    let notifier = Notifier::start(config, metrics.clone());
    let n = notification(Kind::RolledBack, 0);
    notifier.notify(vec![n.clone()]);
    eventually(|| count(&metrics, "webhook", "sent") == 1).await;

    let got = rx.received();
    assert_eq!(got.len(), 1);
    let req = &got[0];
    assert_eq!(req.path, "/hooks/concurrency");
    let h = |k: &str| req.headers.get(k).map(String::as_str);
    assert_eq!(h("content-type"), Some("application/json"));
    assert_eq!(h("x-concurrency-event"), Some("RolledBack"));
    assert_eq!(h("x-concurrency-delivery"), Some(n.id.as_str()));
    let expected = notify::signature(b"s3cret", &req.body);
    assert_eq!(h("x-concurrency-signature"), Some(expected.as_str()));
    // The replay-proof one: the timestamp it was sent at, signed with the body.
    let ts: i64 = h("x-concurrency-timestamp").unwrap().parse().unwrap();
    assert!((jiff::Timestamp::now().as_second() - ts).abs() < 60, "{ts}");
    let expected = notify::timestamped_signature(b"s3cret", ts, &req.body);
    assert_eq!(h("x-concurrency-signature-v1"), Some(expected.as_str()));
    assert_ne!(
        notify::timestamped_signature(b"s3cret", ts - 600, &req.body),
        expected,
        "another time must give another signature"
    );
    let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body, notify::webhook_body(&n, None));
    assert_eq!(count(&metrics, "webhook", "failed"), 0);
}

#[tokio::test]
async fn a_500_is_retried_with_the_same_delivery_id_until_it_is_taken() {
    let rx = Receiver::start(
        &[Answer::Status(500), Answer::Status(503)],
        Answer::Status(200),
    )
    .await;
    let metrics = Metrics::new();
    let notifier = Notifier::start(webhook(file("url", &rx.url), None, 5), metrics.clone());
    notifier.notify(vec![notification(Kind::Promoted, 2)]);
    eventually(|| count(&metrics, "webhook", "sent") == 1).await;
    let got = rx.received();
    assert_eq!(got.len(), 3);
    let ids: Vec<_> = got
        .iter()
        .map(|r| r.headers["x-concurrency-delivery"].clone())
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert!(
        got.iter()
            .all(|r| !r.headers.contains_key("x-concurrency-signature")
                && !r.headers.contains_key("x-concurrency-signature-v1")),
        "no key: unsigned"
    );
    assert_eq!(count(&metrics, "webhook", "failed"), 0);
}

#[tokio::test]
async fn it_gives_up_after_the_bound_and_counts_a_failure() {
    let rx = Receiver::start(&[], Answer::Status(500)).await;
    let metrics = Metrics::new();
    let notifier = Notifier::start(webhook(file("url", &rx.url), None, 3), metrics.clone());
    notifier.notify(vec![notification(Kind::RolledBack, 0)]);
    eventually(|| count(&metrics, "webhook", "failed") == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.received().len(), 3, "exactly `attempts` requests");
    assert_eq!(count(&metrics, "webhook", "sent"), 0);
}

#[tokio::test]
async fn a_4xx_answer_is_final() {
    let rx = Receiver::start(&[], Answer::Status(404)).await;
    let metrics = Metrics::new();
    let notifier = Notifier::start(webhook(file("url", &rx.url), None, 5), metrics.clone());
    notifier.notify(vec![notification(Kind::Invalid, 0)]);
    eventually(|| count(&metrics, "webhook", "failed") == 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rx.received().len(), 1);
}

/// On this single-threaded runtime the delivery task cannot run while `notify` loops: one
/// receiver that never answers, a queue of 2, and `notify` still returns at once, the
/// notifications that do not fit dropped and counted.
#[tokio::test]
async fn a_full_queue_drops_instead_of_blocking_the_caller() {
    let rx = Receiver::start(&[], Answer::Hang).await;
    let metrics = Metrics::new();
    let mut config = webhook(file("url", &rx.url), None, 1);
    config.queue = 2;
    config.retry.timeout = Duration::from_millis(300);
    let notifier = Notifier::start(config, metrics.clone());
    let started = Instant::now();
    for i in 0..10 {
        notifier.notify(vec![notification(Kind::StageAdvanced, i)]);
    }
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(count(&metrics, "webhook", "dropped"), 8);
    // The two queued ones time out against the hanging receiver, each after one attempt.
    eventually(|| count(&metrics, "webhook", "failed") == 2).await;
    assert_eq!(count(&metrics, "webhook", "sent"), 0);
}

#[tokio::test]
async fn the_url_file_is_read_again_for_every_delivery() {
    let first = Receiver::start(&[], Answer::Status(200)).await;
    let second = Receiver::start(&[], Answer::Status(200)).await;
    let metrics = Metrics::new();
    let url = file("url", &first.url);
    let notifier = Notifier::start(webhook(url.clone(), None, 2), metrics.clone());
    notifier.notify(vec![notification(Kind::Started, 0)]);
    eventually(|| count(&metrics, "webhook", "sent") == 1).await;
    // The kubelet updated the mounted Secret.
    std::fs::write(&url, &second.url).unwrap();
    notifier.notify(vec![notification(Kind::StageAdvanced, 1)]);
    eventually(|| count(&metrics, "webhook", "sent") == 2).await;
    assert_eq!((first.received().len(), second.received().len()), (1, 1));
}

#[tokio::test]
async fn a_missing_url_file_is_a_counted_failure_not_a_crash() {
    let metrics = Metrics::new();
    let missing = std::env::temp_dir().join("concurrency-notify-absent/url");
    let notifier = Notifier::start(webhook(missing, None, 2), metrics.clone());
    notifier.notify(vec![notification(Kind::Started, 0)]);
    eventually(|| count(&metrics, "webhook", "failed") == 1).await;
}

#[tokio::test]
async fn slack_gets_its_own_message_and_the_filter_applies_to_every_sink() {
    let hook = Receiver::start(&[], Answer::Status(200)).await;
    let slack = Receiver::start(&[], Answer::Status(200)).await;
    let metrics = Metrics::new();
    let mut config = webhook(file("url", &hook.url), Some(file("key", "k")), 2);
    config.slack = Some(SlackSink {
        url_file: file("slack-url", &slack.url),
        options: SlackOptions::default(),
    });
    config.filter = Filter::parse(&["RolledBack", "Promoted"]).unwrap();
    config.cluster = Some("prod-eu".into());
    let notifier = Notifier::start(config, metrics.clone());
    let told = notification(Kind::Promoted, 2);
    notifier.notify(vec![notification(Kind::StageAdvanced, 1), told.clone()]);
    eventually(|| count(&metrics, "webhook", "sent") == 1 && count(&metrics, "slack", "sent") == 1)
        .await;
    let s = slack.received();
    assert_eq!(s.len(), 1);
    let body: serde_json::Value = serde_json::from_slice(&s[0].body).unwrap();
    assert_eq!(
        body,
        notify::slack_body(&told, &SlackOptions::default(), Some("prod-eu"))
    );
    assert!(!s[0].headers.contains_key("x-concurrency-signature"));
    let h = hook.received();
    assert_eq!(h.len(), 1, "StageAdvanced is filtered out");
    assert_eq!(h[0].headers["x-concurrency-event"], "Promoted");
}

#[tokio::test]
async fn without_sinks_nothing_is_started_and_notify_is_a_no_op() {
    let notifier = Notifier::start(NotifierConfig::default(), Metrics::new());
    assert!(!notifier.is_enabled());
    notifier.notify(vec![notification(Kind::Promoted, 2)]);
}

#[tokio::test]
async fn flush_waits_for_queued_deliveries_but_not_beyond_its_timeout() {
    let rx = Receiver::start(&[Answer::Status(500)], Answer::Status(200)).await;
    let metrics = Metrics::new();
    let notifier = Notifier::start(webhook(file("url", &rx.url), None, 3), metrics.clone());
    notifier.notify(vec![
        notification(Kind::Promoted, 2),
        notification(Kind::Started, 0),
    ]);
    assert!(notifier.flush(Duration::from_secs(5)).await);
    assert_eq!(
        count(&metrics, "webhook", "sent"),
        2,
        "both delivered before flush returned"
    );

    let hang = Receiver::start(&[], Answer::Hang).await;
    let mut config = webhook(file("url", &hang.url), None, 1);
    config.retry.timeout = Duration::from_secs(30);
    let stuck = Notifier::start(config, Metrics::new());
    stuck.notify(vec![notification(Kind::RolledBack, 0)]);
    let started = Instant::now();
    assert!(!stuck.flush(Duration::from_millis(200)).await);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(Notifier::default().flush(Duration::ZERO).await);
}
