use crate::telemetry::shutdown::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn sigterm_cancels_the_token() {
    let token = CancellationToken::new();
    let task = cancel_on_signal(token.clone()).unwrap();
    // The handler is installed, so the signal is caught rather than ending the test run.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(5), token.cancelled())
        .await
        .expect("token cancelled by SIGTERM");
    task.await.unwrap();
}

#[tokio::test]
async fn task_ends_when_token_is_cancelled_elsewhere() {
    let token = CancellationToken::new();
    let task = cancel_on_signal(token.clone()).unwrap();
    token.cancel();
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("task ends")
        .unwrap();
}
