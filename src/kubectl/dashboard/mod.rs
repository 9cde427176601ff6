//! `kubectl concurrency dashboard`: a local, read-only web page of every experiment the
//! kubeconfig can see — phase, stage and weights, the latest checks, holds waiting for a
//! person — live, with each experiment's report a click away.
//!
//! The experiments come from one watch (a reflector cache), so a page or its refresh costs no
//! API call; a report is made on demand from Prometheus (`report::make`). It listens on
//! loopback by default, answers GET only, and refuses a Host header that is not its own
//! address (a web page elsewhere cannot reach it through DNS rebinding).

pub mod page;

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::ConcurrencyExperiment;

use super::cli::DashboardArgs;
use super::report::svg::esc;
use super::{api_error, Op, PluginError, Session};

const HTML: &str = "text/html; charset=utf-8";

/// What the dashboard shows: the experiments now, and one's report.
pub trait Source: Send + Sync + 'static {
    fn experiments(&self) -> Vec<Arc<ConcurrencyExperiment>>;
    /// What the page says it lists, e.g. `all namespaces`.
    fn scope(&self) -> String;
    /// The report page of one experiment, or why there is none.
    fn report(&self, namespace: String, name: String)
        -> BoxFuture<'static, Result<String, String>>;
}

/// Serves `source` on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, source: Arc<dyn Source>, shutdown: CancellationToken) {
    let Ok(local) = listener.local_addr() else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let source = source.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| answer(req, source.clone(), local));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The Host header names this server: its address, or `localhost` on its port when it
/// listens on loopback.
pub fn own_host(host: Option<&str>, local: SocketAddr) -> bool {
    let Some(host) = host else { return false };
    let port = local.port();
    let mut names = vec![local.to_string()];
    if local.ip().is_loopback() {
        names.extend([
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]);
    }
    names.iter().any(|n| n.eq_ignore_ascii_case(host))
}

async fn answer(
    req: Request<Incoming>,
    source: Arc<dyn Source>,
    local: SocketAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let text = "text/plain; charset=utf-8";
    let host = req.headers().get("host").and_then(|h| h.to_str().ok());
    if !own_host(host, local) {
        return Ok(respond(
            StatusCode::FORBIDDEN,
            text,
            format!("this dashboard answers only requests for {local}\n"),
        ));
    }
    if req.method() != Method::GET {
        let mut r = respond(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "read-only: GET only\n".into(),
        );
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET"));
        return Ok(r);
    }
    let now = Timestamp::now();
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    Ok(match segments.as_slice() {
        [""] => {
            let exps = source.experiments();
            let refs: Vec<&ConcurrencyExperiment> = exps.iter().map(|e| e.as_ref()).collect();
            respond(
                StatusCode::OK,
                HTML,
                page::page(&refs, &source.scope(), now),
            )
        }
        ["rows"] => {
            let exps = source.experiments();
            let refs: Vec<&ConcurrencyExperiment> = exps.iter().map(|e| e.as_ref()).collect();
            respond(StatusCode::OK, HTML, page::rows(&refs, now))
        }
        ["report", ns, name] if !ns.is_empty() && !name.is_empty() => {
            match source.report(ns.to_string(), name.to_string()).await {
                Ok(html) => respond(StatusCode::OK, HTML, html),
                Err(e) => respond(
                    StatusCode::BAD_GATEWAY,
                    HTML,
                    format!(
                        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>no report</title></head><body><p id=\"error\">No report of {}/{}: {}</p><p><a href=\"../../\">back</a></p></body></html>",
                        esc(ns),
                        esc(name),
                        esc(&e)
                    ),
                ),
            }
        }
        _ => respond(StatusCode::NOT_FOUND, text, "not found\n".into()),
    })
}

/// The cluster as the kubeconfig sees it: a watch of experiments, reports from Prometheus.
struct Cluster {
    store: Store<ConcurrencyExperiment>,
    scope: String,
    client: kube::Client,
    args: DashboardArgs,
}

impl Source for Cluster {
    fn experiments(&self) -> Vec<Arc<ConcurrencyExperiment>> {
        self.store.state()
    }

    fn scope(&self) -> String {
        self.scope.clone()
    }

    fn report(
        &self,
        namespace: String,
        name: String,
    ) -> BoxFuture<'static, Result<String, String>> {
        let exp = self.store.get(&ObjectRef::new(&name).within(&namespace));
        let session = Session {
            client: self.client.clone(),
            namespace,
        };
        let args = self.args.clone();
        Box::pin(async move {
            let Some(exp) = exp else {
                return Err("no such experiment in view".into());
            };
            super::report::make(
                &session,
                &exp,
                args.prometheus.as_deref(),
                &args.access,
                args.timeout,
            )
            .await
            .map(|(html, _)| html)
            .map_err(|e| e.to_string())
        })
    }
}

pub async fn run(
    session: &Session,
    args: &DashboardArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    // Every namespace the kubeconfig may list; else the session's.
    let all: Api<ConcurrencyExperiment> = Api::all(session.client.clone());
    let (api, scope) = match (
        args.namespaced,
        all.list(&ListParams::default().limit(1)).await,
    ) {
        (false, Ok(_)) => (all, "all namespaces".to_string()),
        (false, Err(kube::Error::Api(s))) if s.is_forbidden() => (
            session.experiments(),
            format!(
                "namespace {} (listing all namespaces is not allowed)",
                session.namespace
            ),
        ),
        (false, Err(e)) => return Err(api_error(e, Op::experiment("list", None, "(all)"))),
        (true, _) => (
            session.experiments(),
            format!("namespace {}", session.namespace),
        ),
    };
    let (store, writer) = reflector::store();
    let watch = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .applied_objects();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut watch = std::pin::pin!(watch);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                e = watch.next() => if e.is_none() { return },
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), store.wait_until_ready())
        .await
        .map_err(|_| PluginError::Connect("the experiments' watch did not start in 30 s".into()))?
        .map_err(|e| PluginError::Connect(e.to_string()))?;
    let addr = SocketAddr::new(args.address, args.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| PluginError::Usage(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| PluginError::Usage(e.to_string()))?;
    if !local.ip().is_loopback() {
        writeln!(
            out,
            "warning: listening on {local}, not loopback: anyone who reaches it sees every experiment this kubeconfig can"
        )?;
    }
    writeln!(
        out,
        "dashboard of {scope}: http://{local}/ (read-only; Ctrl-C stops it)"
    )?;
    out.flush()?;
    let source = Arc::new(Cluster {
        store,
        scope,
        client: session.client.clone(),
        args: args.clone(),
    });
    let server = tokio::spawn(serve(listener, source, shutdown.clone()));
    let _ = tokio::signal::ctrl_c().await;
    shutdown.cancel();
    let _ = server.await;
    Ok(())
}
