mod experiment_metrics;
mod http;
mod logging;
mod metrics;
mod redact;
mod shutdown;
mod tls;
