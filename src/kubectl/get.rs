//! `get [NAME] [-w]`: one experiment in detail, or one line per experiment; `-w` follows a
//! watch on the API server (never polls): for one experiment a line per change until it has
//! finished, for the namespace a line per experiment whose status changes.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, ResourceExt};

use super::cli::GetArgs;
use super::follow;
use super::render::{experiment_detail, experiment_list, line, list_row, Table, LIST_HEADER};
use super::{api_error, Op, PluginError, Session};
use crate::api::{ConcurrencyExperiment, ANNOTATION_RETRY};

pub async fn run(
    session: &Session,
    args: &GetArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    match (&args.name, args.watch) {
        (Some(name), false) => {
            let exp = session.experiment(name).await?;
            out.write_all(experiment_detail(&exp, Timestamp::now()).as_bytes())?;
        }
        (Some(name), true) => follow_one(session, name, args.timeout, out).await?,
        (None, false) => {
            let list = session
                .experiments()
                .list(&ListParams::default())
                .await
                .map_err(|e| api_error(e, Op::experiment("list", None, &session.namespace)))?;
            let mut items = list.items;
            items.sort_by_key(|e| e.name_any());
            out.write_all(list_text(&items, &session.namespace).as_bytes())?;
        }
        (None, true) => follow_all(session, out).await?,
    }
    Ok(())
}

fn list_text(items: &[ConcurrencyExperiment], namespace: &str) -> String {
    if items.is_empty() {
        format!("No experiments in namespace {namespace}.\n")
    } else {
        experiment_list(items, Timestamp::now())
    }
}

/// The status as compared between events: a change in anything else (annotations,
/// resourceVersion alone) does not print again.
fn status_key(exp: &ConcurrencyExperiment) -> serde_json::Value {
    serde_json::to_value(&exp.status).unwrap_or_default()
}

/// A watch error that will not heal by retrying ends the command; others are reported and
/// the watcher starts again (with backoff).
fn watch_error(
    e: watcher::Error,
    session: &Session,
    name: Option<&str>,
) -> Result<(), PluginError> {
    let inner = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => kube::Error::Api(status),
        other => {
            eprintln!("warning: watch: {other}; watching again");
            return Ok(());
        }
    };
    match &inner {
        kube::Error::Api(s) if s.is_forbidden() || (s.is_not_found() && name.is_none()) => Err(
            api_error(inner, Op::experiment("watch", name, &session.namespace)),
        ),
        _ => {
            eprintln!("warning: watch: {inner}; watching again");
            Ok(())
        }
    }
}

/// The experiment has ended and nothing asks it to run again: a follower is done. A pending
/// retry annotation keeps following (the operator has not seen it yet).
pub fn finished(exp: &ConcurrencyExperiment) -> bool {
    let phase = exp.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let retry = exp.annotations().get(ANNOTATION_RETRY).map(String::as_str) == Some("true");
    phase.is_terminal() && !retry
}

/// Prints the experiment, then a line for every change (`follow::changes`) until it has
/// finished (the whole view once more) or is deleted; `timeout` bounds the wait.
pub async fn follow_one(
    session: &Session,
    name: &str,
    timeout: Option<Duration>,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    // A plain read first: a missing object or a denied read is a clear error at once.
    let first = session.experiment(name).await?;
    out.write_all(experiment_detail(&first, Timestamp::now()).as_bytes())?;
    out.flush()?;
    if finished(&first) {
        return Ok(());
    }
    let follow = async {
        let mut last = first.clone();
        let api: Api<ConcurrencyExperiment> = session.experiments();
        let mut events = kube::runtime::watcher::watch_object(api, name)
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Some(exp)) => {
                    // `changes` is empty when nothing worth a line changed.
                    let clock = Timestamp::now().strftime("%H:%M:%S").to_string();
                    out.write_all(follow::changes(&last, &exp, &clock).as_bytes())?;
                    out.flush()?;
                    if finished(&exp) {
                        out.write_all(b"\n")?;
                        out.write_all(experiment_detail(&exp, Timestamp::now()).as_bytes())?;
                        out.flush()?;
                        return Ok(());
                    }
                    last = exp;
                }
                Ok(None) => {
                    writeln!(out, "\nConcurrencyExperiment {name} was deleted.")?;
                    return Ok(());
                }
                Err(e) => watch_error(e, session, Some(name))?,
            }
        }
        Ok(())
    };
    match timeout {
        None => follow.await,
        Some(t) => match tokio::time::timeout(t, follow).await {
            Ok(done) => done,
            Err(_) => {
                let phase = session
                    .experiment(name)
                    .await
                    .ok()
                    .and_then(|e| e.status.map(|s| s.phase))
                    .unwrap_or_default();
                Err(PluginError::Timeout {
                    name: name.to_string(),
                    after: format!("{}s", t.as_secs()),
                    phase: phase.as_str(),
                })
            }
        },
    }
}

/// Prints the namespace's table, then one line per experiment whose status changes.
pub async fn follow_all(
    session: &Session,
    out: &mut (dyn Write + Send),
) -> Result<(), PluginError> {
    let mut events = watcher(session.experiments(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    // Objects of the (re)list in progress; the table or the changed lines print at its end.
    let mut listing: Option<Vec<ConcurrencyExperiment>> = None;
    let mut widths: Option<Vec<usize>> = None;
    loop {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return Ok(()),
            Err(e) => {
                watch_error(e, session, None)?;
                continue;
            }
        };
        match event {
            watcher::Event::Init => listing = Some(Vec::new()),
            watcher::Event::InitApply(exp) => listing.get_or_insert_with(Vec::new).push(exp),
            watcher::Event::InitDone => {
                let mut items = listing.take().unwrap_or_default();
                items.sort_by_key(|e| e.name_any());
                match &mut widths {
                    None => {
                        let text = list_text(&items, &session.namespace);
                        out.write_all(text.as_bytes())?;
                        out.flush()?;
                        let mut t = Table::new(LIST_HEADER);
                        for e in &items {
                            t.row(list_row(e, Timestamp::now()));
                        }
                        widths = Some(t.widths());
                    }
                    Some(w) => {
                        // After a re-list only what changed meanwhile.
                        for e in &items {
                            if seen.get(&e.name_any()) != Some(&status_key(e)) {
                                print_row(out, e, w)?;
                            }
                        }
                    }
                }
                seen = items
                    .iter()
                    .map(|e| (e.name_any(), status_key(e)))
                    .collect();
            }
            watcher::Event::Apply(exp) => {
                let key = status_key(&exp);
                if seen.get(&exp.name_any()) != Some(&key) {
                    let w = widths.get_or_insert_with(|| {
                        LIST_HEADER.iter().map(|h| h.chars().count()).collect()
                    });
                    print_row(out, &exp, w)?;
                    seen.insert(exp.name_any(), key);
                }
            }
            watcher::Event::Delete(exp) => {
                seen.remove(&exp.name_any());
                writeln!(out, "{} deleted", exp.name_any())?;
                out.flush()?;
            }
        }
    }
}

/// One list line aligned with the table printed first (columns grow when a cell is wider).
fn print_row(
    out: &mut (dyn Write + Send),
    exp: &ConcurrencyExperiment,
    widths: &mut [usize],
) -> std::io::Result<()> {
    let row = list_row(exp, Timestamp::now());
    for (w, cell) in widths.iter_mut().zip(&row) {
        *w = (*w).max(cell.chars().count());
    }
    writeln!(out, "{}", line("", &row, widths))?;
    out.flush()
}
