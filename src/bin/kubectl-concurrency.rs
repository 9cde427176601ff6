//! `kubectl concurrency …`: kubectl runs this binary for its `concurrency` plugin when it is on
//! PATH. Parsing and printing only; the commands are in `concurrency_operator::kubectl`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use concurrency_operator::kubectl::{self, Cli, Session};
use concurrency_operator::telemetry::install_crypto_provider;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    install_crypto_provider();
    let result = match Session::connect(&cli).await {
        Ok(session) => {
            let mut stdout = std::io::stdout();
            kubectl::run(&session, cli.command, &mut stdout).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(partial) = e.partial_output() {
                let mut stdout = std::io::stdout();
                // Best effort: the error line below is what matters.
                let _ = stdout.write_all(partial.as_bytes());
                let _ = stdout.flush();
            }
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
