//! Finding the server's flags and the assignments in front of it, in argv words and in shell
//! strings.

use crate::api::ServerKind;

use super::super::names::{
    ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS, ENV_RAILS_MAX_THREADS, ENV_WEB_CONCURRENCY,
};
use super::lex::{lex, Tok};
use super::line::{CommandLine, Edit, Field, Occurrence, Setting, Unreadable};

struct FlagSpec {
    short: &'static str,
    long: &'static str,
    setting: Setting,
    /// Ruby's OptionParser (Puma) accepts any unambiguous prefix of a long option.
    abbreviable: bool,
}

const PUMA_FLAGS: [FlagSpec; 2] = [
    FlagSpec {
        short: "-w",
        long: "--workers",
        setting: Setting::Workers,
        abbreviable: true,
    },
    FlagSpec {
        short: "-t",
        long: "--threads",
        setting: Setting::Threads,
        abbreviable: true,
    },
];

const FALCON_FLAGS: [FlagSpec; 1] = [FlagSpec {
    short: "-n",
    long: "--count",
    setting: Setting::Workers,
    abbreviable: false,
}];

/// Variables the server reads that may be assigned on the command line.
const VARS: [&str; 4] = [
    ENV_WEB_CONCURRENCY,
    ENV_RAILS_MAX_THREADS,
    ENV_PUMA_MAX_THREADS,
    ENV_PUMA_MIN_THREADS,
];

fn flags(server: ServerKind) -> &'static [FlagSpec] {
    match server {
        ServerKind::Puma => &PUMA_FLAGS,
        ServerKind::Falcon => &FALCON_FLAGS,
        ServerKind::Custom => &[],
    }
}

/// `puma`, `bin/puma`, `/usr/local/bundle/bin/puma` start Puma; likewise Falcon.
fn server_word(text: &str) -> Option<ServerKind> {
    match text.rsplit('/').next() {
        Some("puma") => Some(ServerKind::Puma),
        Some("falcon") => Some(ServerKind::Falcon),
        _ => None,
    }
}

/// One word of the line: argv word or shell token, unquoted, with where its raw text sits.
#[derive(Clone, Debug)]
struct Item {
    text: String,
    field: Field,
    index: usize,
    start: usize,
    end: usize,
}

/// Reads the server settings of `command` + `args`. `default` is the server assumed when no
/// word names one (the image's entrypoint starts it and the words are its flags).
pub fn parse(
    command: Option<&[String]>,
    args: Option<&[String]>,
    default: ServerKind,
) -> CommandLine {
    let words: Vec<(Field, usize, &str)> = command
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, w)| (Field::Command, i, w.as_str()))
        .chain(
            args.unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, w)| (Field::Args, i, w.as_str())),
        )
        .collect();
    let mut line = CommandLine::default();
    let mut script_names_server = false;
    for &(field, index, word) in &words {
        if !word.contains(char::is_whitespace) {
            continue;
        }
        match lex(word) {
            Ok(tokens) => script_names_server |= scan_script(&tokens, field, index, &mut line),
            Err(reason) => {
                // Only a script that might start a server matters.
                if word.contains("puma") || word.contains("falcon") {
                    line.unreadable.push(Unreadable {
                        field,
                        index,
                        reason,
                    });
                    script_names_server = true;
                }
            }
        }
    }
    let items: Vec<Item> = words
        .iter()
        .map(|&(field, index, word)| Item {
            text: word.to_string(),
            field,
            index,
            start: 0,
            end: word.len(),
        })
        .collect();
    match items.iter().position(|i| server_word(&i.text).is_some()) {
        Some(at) => {
            let server = server_word(&items[at].text).unwrap_or(default);
            scan_assignments(&items[..at], &mut line);
            scan_flags(&items[at + 1..], server, &mut line);
        }
        // Only args, no command: the image's entrypoint runs them, taken to be Puma, unless a
        // shell string starts the server. A command of its own is some other program whose
        // `-t` may mean anything; Falcon's `-n` is too common a flag to assume as much.
        None if !script_names_server && default == ServerKind::Puma && command.is_none() => {
            scan_flags(&items, default, &mut line)
        }
        None => {}
    }
    line
}

/// Scans each simple command of a script; returns whether one of them starts a server.
fn scan_script(tokens: &[Tok], field: Field, index: usize, line: &mut CommandLine) -> bool {
    let mut found = false;
    let mut exported: Vec<Item> = Vec::new();
    for command in tokens.split(|t| matches!(t, Tok::Sep)) {
        let mut items = Vec::new();
        let mut skip_next = false;
        for t in command {
            match t {
                Tok::Redirect => skip_next = true,
                Tok::Word { .. } if std::mem::take(&mut skip_next) => {}
                Tok::Word { text, start, end } => items.push(Item {
                    text: text.clone(),
                    field,
                    index,
                    start: *start,
                    end: *end,
                }),
                Tok::Sep => {}
            }
        }
        match items.iter().position(|i| server_word(&i.text).is_some()) {
            Some(at) => {
                found = true;
                let server = server_word(&items[at].text).unwrap_or(ServerKind::Puma);
                // `export X=1` (or a bare `X=1`) earlier in the script, then `X=1 puma`. Taken
                // once: a second server command would only repeat the same edits.
                scan_assignments(&std::mem::take(&mut exported), line);
                scan_assignments(&items[..at], line);
                scan_flags(&items[at + 1..], server, line);
            }
            None => {
                let statement = match items.first().map(|i| i.text.as_str()) {
                    Some("export") => &items[1..],
                    _ if items.iter().all(|i| i.text.contains('=')) => &items[..],
                    _ => &[],
                };
                exported.extend(statement.iter().cloned());
            }
        }
    }
    found
}

fn scan_assignments(items: &[Item], line: &mut CommandLine) {
    for item in items {
        let Some((name, value)) = item.text.split_once('=') else {
            continue;
        };
        let Some(var) = VARS.iter().find(|v| **v == name) else {
            continue;
        };
        line.occurrences.push(Occurrence {
            setting: Setting::Var(var),
            field: item.field,
            index: item.index,
            value: Some(value.to_string()),
            written: item.text.clone(),
            edit: Some(edit(item, format!("{name}="))),
            refusal: None,
        });
    }
}

fn edit(item: &Item, prefix: String) -> Edit {
    Edit {
        field: item.field,
        index: item.index,
        start: item.start,
        end: item.end,
        prefix,
    }
}

/// How one word matches a flag.
enum Match {
    /// `-w` or `--workers`: the value is the next word.
    Separate,
    /// `--workers=2`, `-w2`: the value follows `prefix` in the same word.
    Attached { prefix: String, value: String },
    /// `--work 2`: Puma takes it, but the operator will not guess at prefixes.
    Abbreviated,
}

fn classify(text: &str, spec: &FlagSpec) -> Option<Match> {
    if text == spec.short || text == spec.long {
        return Some(Match::Separate);
    }
    if let Some(value) = text.strip_prefix(&format!("{}=", spec.long)) {
        return Some(Match::Attached {
            prefix: format!("{}=", spec.long),
            value: value.to_string(),
        });
    }
    if let Some(rest) = text.strip_prefix(spec.short) {
        // `-w2`, `-t4:8`, `-w$(N)`; not `-timeout`, which is some other program's flag.
        let (prefix, value) = match rest.strip_prefix('=') {
            Some(v) => (format!("{}=", spec.short), v),
            None => (spec.short.to_string(), rest),
        };
        if value.starts_with(|c: char| c.is_ascii_digit() || c == '$') {
            return Some(Match::Attached {
                prefix,
                value: value.to_string(),
            });
        }
    }
    if spec.abbreviable {
        let name = text.strip_prefix("--")?;
        let name = name.split_once('=').map_or(name, |(n, _)| n);
        let long = spec.long.trim_start_matches('-');
        if !name.is_empty() && name.len() < long.len() && long.starts_with(name) {
            return Some(Match::Abbreviated);
        }
    }
    None
}

fn scan_flags(items: &[Item], server: ServerKind, line: &mut CommandLine) {
    let table = flags(server);
    let mut i = 0;
    while i < items.len() {
        let item = &items[i];
        // Options end at `--` for Ruby's OptionParser.
        if item.text == "--" {
            break;
        }
        for spec in table {
            let Some(m) = classify(&item.text, spec) else {
                continue;
            };
            let occurrence = match m {
                Match::Separate => {
                    let next = items.get(i + 1).filter(|n| !looks_like_flag(&n.text));
                    if next.is_some() {
                        i += 1;
                    }
                    Occurrence {
                        setting: spec.setting,
                        field: item.field,
                        index: item.index,
                        value: next.map(|n| n.text.clone()),
                        written: match next {
                            Some(n) => format!("{} {}", item.text, n.text),
                            None => item.text.clone(),
                        },
                        edit: next.map(|n| edit(n, String::new())),
                        refusal: next
                            .is_none()
                            .then(|| format!("{} has no value", item.text)),
                    }
                }
                Match::Attached { prefix, value } => Occurrence {
                    setting: spec.setting,
                    field: item.field,
                    index: item.index,
                    value: Some(value),
                    written: item.text.clone(),
                    edit: Some(edit(item, prefix)),
                    refusal: None,
                },
                Match::Abbreviated => {
                    let value = item
                        .text
                        .split_once('=')
                        .map(|(_, v)| v.to_string())
                        .or_else(|| items.get(i + 1).map(|n| n.text.clone()));
                    Occurrence {
                        setting: spec.setting,
                        field: item.field,
                        index: item.index,
                        value,
                        written: item.text.clone(),
                        edit: None,
                        refusal: Some(format!(
                            "{} is an abbreviation of {}; write {} so it can be rewritten",
                            item.text, spec.long, spec.long
                        )),
                    }
                }
            };
            line.occurrences.push(occurrence);
            break;
        }
        i += 1;
    }
}

/// `-C`, `--bind`: another flag, so the one before it has no value. `-1` is a value.
fn looks_like_flag(text: &str) -> bool {
    text.strip_prefix('-')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '-'))
}
