//! Writing the candidate's counts into the flags and assignments found, or refusing a form
//! that cannot be rewritten safely.

use std::collections::BTreeMap;

use crate::api::{ServerConfig, ServerKind};

use super::super::names::{
    ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS, ENV_RAILS_MAX_THREADS, ENV_WEB_CONCURRENCY,
};
use super::super::WorkloadError;
use super::line::{Edit, Field, Occurrence, Setting};
use super::parse::parse;

/// Rewrites the settings on `command`/`args` to `config`'s, for a Puma or Falcon candidate.
/// `from_spec` says which lists came verbatim from the spec's `command`/`args`: a flag there
/// that contradicts the spec's counts is the user's own conflict and is refused, not rewritten.
pub fn rewrite(
    container: &str,
    command: &mut Option<Vec<String>>,
    args: &mut Option<Vec<String>>,
    config: &ServerConfig,
    from_spec: (bool, bool),
) -> Result<(), WorkloadError> {
    if config.server == ServerKind::Custom {
        return Ok(());
    }
    let line = parse(command.as_deref(), args.as_deref(), config.server);
    let wanted_any = config.workers.is_some()
        || (config.server == ServerKind::Puma
            && (config.threads.is_some() || config.min_threads.is_some()));
    if let Some(u) = line.unreadable.first().filter(|_| wanted_any) {
        return Err(WorkloadError::UnreadableScript {
            container: container.to_string(),
            location: format!("{}[{}]", u.field.name(), u.index),
            reason: u.reason,
        });
    }
    let mut edits: Vec<(Edit, String)> = Vec::new();
    for occ in &line.occurrences {
        let Some(new) = wanted(config, occ) else {
            continue;
        };
        if occ.value.as_deref() == Some(new.as_str()) {
            continue;
        }
        let location = format!("{}[{}]", occ.field.name(), occ.index);
        let spec_field = match occ.field {
            Field::Command => from_spec.0.then_some("command"),
            Field::Args => from_spec.1.then_some("args"),
        };
        if let Some(list) = spec_field {
            return Err(WorkloadError::ContradictingFlag {
                field: format!("spec.candidate.{list}[{}]", occ.index),
                written: occ.written.clone(),
                setting: describe_setting(config, occ.setting),
            });
        }
        let edit = match (&occ.refusal, &occ.edit) {
            (None, Some(edit)) => edit.clone(),
            (refusal, _) => {
                return Err(WorkloadError::UnrewritableFlag {
                    container: container.to_string(),
                    location,
                    written: occ.written.clone(),
                    setting: describe_setting(config, occ.setting),
                    reason: refusal
                        .clone()
                        .unwrap_or_else(|| "its value cannot be located".into()),
                })
            }
        };
        edits.push((edit, new));
    }
    let mut by_word: BTreeMap<(Field, usize), Vec<(Edit, String)>> = BTreeMap::new();
    for (e, new) in edits {
        by_word
            .entry((e.field, e.index))
            .or_default()
            .push((e, new));
    }
    for ((field, index), mut word_edits) in by_word {
        // Back to front within a word, so earlier byte ranges stay valid; one edit per range.
        word_edits.sort_by_key(|(e, _)| std::cmp::Reverse(e.start));
        word_edits.dedup_by_key(|(e, _)| e.start);
        let list = match field {
            Field::Command => command.as_mut(),
            Field::Args => args.as_mut(),
        };
        let Some(word) = list.and_then(|l| l.get_mut(index)) else {
            continue;
        };
        for (e, new) in word_edits {
            if e.end <= word.len() && word.is_char_boundary(e.start) && word.is_char_boundary(e.end)
            {
                word.replace_range(e.start..e.end, &format!("{}{new}", e.prefix));
            }
        }
    }
    Ok(())
}

/// The value `config` wants in place of `occ`, or `None` when it leaves that setting alone.
fn wanted(config: &ServerConfig, occ: &Occurrence) -> Option<String> {
    let puma = config.server == ServerKind::Puma;
    match occ.setting {
        Setting::Workers => config.workers.map(|w| w.to_string()),
        Setting::Threads if puma => threads_value(config, occ.value.as_deref()),
        Setting::Var(ENV_WEB_CONCURRENCY) => config.workers.map(|w| w.to_string()),
        Setting::Var(ENV_RAILS_MAX_THREADS | ENV_PUMA_MAX_THREADS) if puma => {
            config.threads.map(|t| t.to_string())
        }
        Setting::Var(ENV_PUMA_MIN_THREADS) if puma => {
            config.min_threads.or(config.threads).map(|t| t.to_string())
        }
        _ => None,
    }
}

/// `-t` for the candidate: `MIN:MAX`, or a single number where the original was one and min
/// equals max. Minimum threads default to `threads`, as `PUMA_MIN_THREADS` does.
fn threads_value(config: &ServerConfig, old: Option<&str>) -> Option<String> {
    let old_max = old.map(|o| o.rsplit(':').next().unwrap_or(o).to_string());
    let max = match config.threads {
        Some(t) => t.to_string(),
        None => {
            config.min_threads?;
            old_max?
        }
    };
    let min = config
        .min_threads
        .map(|m| m.to_string())
        .unwrap_or_else(|| max.clone());
    let single = old.is_some_and(|o| !o.contains(':'));
    Some(if single && min == max {
        max
    } else {
        format!("{min}:{max}")
    })
}

fn describe_setting(config: &ServerConfig, setting: Setting) -> String {
    let n = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
    match setting {
        Setting::Workers | Setting::Var(ENV_WEB_CONCURRENCY) => {
            format!("workers: {}", n(config.workers))
        }
        Setting::Var(ENV_PUMA_MIN_THREADS) => {
            format!("minThreads: {}", n(config.min_threads.or(config.threads)))
        }
        _ => match config.min_threads {
            Some(min) => format!("threads: {}, minThreads: {min}", n(config.threads)),
            None => format!("threads: {}", n(config.threads)),
        },
    }
}
