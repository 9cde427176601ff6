//! SIGTERM (what the kubelet sends) and SIGINT (Ctrl-C) cancel one token that every task
//! watches, so the server drains, the leader lease is released and the controller stops.

use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Installs the handlers now (so a signal arriving right after this call is not lost) and
/// cancels `token` on the first SIGTERM or SIGINT. The task ends when either the signal
/// arrives or the token is cancelled by someone else.
pub fn cancel_on_signal(token: CancellationToken) -> std::io::Result<JoinHandle<()>> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::spawn(async move {
        let name = tokio::select! {
            _ = token.cancelled() => return,
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
        token.cancel();
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
}
