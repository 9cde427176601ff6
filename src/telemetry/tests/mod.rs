mod experiment_metrics;
mod http;
mod logging;
mod metrics;
mod shutdown;
mod tls;
