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
