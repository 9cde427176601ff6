//! Server settings on the container's command line: Puma's `-w/--workers N` and
//! `-t/--threads MIN:MAX`, Falcon's `-n/--count N`, and `WEB_CONCURRENCY=N`-style assignments
//! in front of the server — as argv words (`bundle exec puma -w 2`) and inside one shell string
//! (`sh -c "bundle exec puma -w 2 -t 6:6"`).
//!
//! They beat the environment the renderer writes (Puma's CLI overrides `config/puma.rb`, which
//! reads the env), so the read-back reads them first and the candidate gets them rewritten. A
//! form that cannot be rewritten safely is refused: a candidate silently running the
//! baseline's config would make the whole experiment compare a config with itself.

use std::collections::BTreeMap;

use crate::api::{ServerConfig, ServerKind};

use super::names::{
    ENV_PUMA_MAX_THREADS, ENV_PUMA_MIN_THREADS, ENV_RAILS_MAX_THREADS, ENV_WEB_CONCURRENCY,
};
use super::WorkloadError;

/// Which of the container's two lists a word is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    Command,
    Args,
}

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::Command => "command",
            Field::Args => "args",
        }
    }
}

/// What a flag or assignment sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `-w N`, `--count N`.
    Workers,
    /// `-t MIN:MAX` or `-t N` (Puma reads a single number as N:N).
    Threads,
    /// `NAME=value` in front of the server, for one of the variables the renderer writes.
    Var(&'static str),
}

/// Where a value sits: a byte range of one word, replaced by `prefix` + the new value.
#[derive(Clone, Debug, PartialEq)]
struct Edit {
    field: Field,
    index: usize,
    start: usize,
    end: usize,
    prefix: String,
}

/// One flag or assignment found on the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Occurrence {
    pub setting: Setting,
    /// The word holding the flag, for messages.
    pub field: Field,
    pub index: usize,
    /// The value as written (unquoted); `None` when the flag has none.
    pub value: Option<String>,
    /// Flag and value as written: `-w 2`, `--threads=4:8`, `WEB_CONCURRENCY=2`.
    pub written: String,
    edit: Option<Edit>,
    /// Why this one cannot be rewritten even though its value is known.
    refusal: Option<String>,
}

/// A shell string that names a server but could not be read.
#[derive(Clone, Debug, PartialEq)]
pub struct Unreadable {
    pub field: Field,
    pub index: usize,
    pub reason: &'static str,
}

/// The server settings found on a command line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommandLine {
    pub occurrences: Vec<Occurrence>,
    pub unreadable: Vec<Unreadable>,
}

impl CommandLine {
    /// The last value given for `setting` (later flags win, as in Puma's option parser).
    pub fn last(&self, setting: Setting) -> Option<&Occurrence> {
        self.occurrences.iter().rev().find(|o| o.setting == setting)
    }
}

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

/// A shell token: a word (unquoted text, raw byte range), a command separator, or a redirect
/// operator (whose target word is not an argument).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Word {
        text: String,
        start: usize,
        end: usize,
    },
    Sep,
    Redirect,
}

/// Splits a POSIX shell string into words, separators and redirects: enough to find the
/// server's arguments and their exact byte ranges. Quotes are removed from the text;
/// expansions (`$X`, `$(…)`, `` `…` ``) are kept as written.
pub(super) fn lex(script: &str) -> Result<Vec<Tok>, &'static str> {
    let mut toks = Vec::new();
    let mut chars = script.char_indices().peekable();
    let mut word: Option<(usize, String)> = None;
    let flush = |word: &mut Option<(usize, String)>, end: usize, toks: &mut Vec<Tok>| {
        if let Some((start, text)) = word.take() {
            toks.push(Tok::Word { text, start, end });
        }
    };
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\r' => flush(&mut word, i, &mut toks),
            '\n' => {
                flush(&mut word, i, &mut toks);
                toks.push(Tok::Sep);
            }
            '#' if word.is_none() => while chars.next_if(|&(_, c)| c != '\n').is_some() {},
            ';' | '&' | '|' | '(' | ')' => {
                flush(&mut word, i, &mut toks);
                toks.push(Tok::Sep);
            }
            '<' | '>' => {
                flush(&mut word, i, &mut toks);
                while chars
                    .next_if(|&(_, c)| matches!(c, '<' | '>' | '&' | '|'))
                    .is_some()
                {}
                toks.push(Tok::Redirect);
            }
            '\'' => {
                let text = &mut word.get_or_insert_with(|| (i, String::new())).1;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, c)) => text.push(c),
                        None => return Err("unterminated single quote"),
                    }
                }
            }
            '"' => {
                let text = &mut word.get_or_insert_with(|| (i, String::new())).1;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, '\n')) => {}
                            Some((_, c)) if matches!(c, '"' | '\\' | '$' | '`') => text.push(c),
                            Some((_, c)) => {
                                text.push('\\');
                                text.push(c);
                            }
                            None => return Err("unterminated double quote"),
                        },
                        Some((_, '$')) => {
                            text.push('$');
                            expansion(&mut chars, text)?;
                        }
                        Some((_, '`')) => {
                            text.push('`');
                            backticks(&mut chars, text)?;
                        }
                        Some((_, c)) => text.push(c),
                        None => return Err("unterminated double quote"),
                    }
                }
            }
            '\\' => match chars.next() {
                // A line continuation joins words only if one was under way.
                Some((_, '\n')) => {}
                Some((_, c)) => word.get_or_insert_with(|| (i, String::new())).1.push(c),
                None => word.get_or_insert_with(|| (i, String::new())).1.push('\\'),
            },
            '$' => {
                let text = &mut word.get_or_insert_with(|| (i, String::new())).1;
                text.push('$');
                expansion(&mut chars, text)?;
            }
            '`' => {
                let text = &mut word.get_or_insert_with(|| (i, String::new())).1;
                text.push('`');
                backticks(&mut chars, text)?;
            }
            c => word.get_or_insert_with(|| (i, String::new())).1.push(c),
        }
    }
    flush(&mut word, script.len(), &mut toks);
    Ok(toks)
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

/// After a `$`: copies `(…)` (nested, quotes respected) or `{…}` as written.
fn expansion(chars: &mut Chars, text: &mut String) -> Result<(), &'static str> {
    let (open, close) = match chars.peek() {
        Some((_, '(')) => ('(', ')'),
        Some((_, '{')) => ('{', '}'),
        _ => return Ok(()),
    };
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    while let Some((_, c)) = chars.next() {
        text.push(c);
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') => {
                if let Some((_, e)) = chars.next() {
                    text.push(e);
                }
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => {
                if let Some((_, e)) = chars.next() {
                    text.push(e);
                }
            }
            (None, c) if c == open => depth += 1,
            (None, c) if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
            _ => {}
        }
    }
    Err("unterminated $( or ${")
}

/// After a backtick: copies up to the closing one.
fn backticks(chars: &mut Chars, text: &mut String) -> Result<(), &'static str> {
    while let Some((_, c)) = chars.next() {
        text.push(c);
        match c {
            '`' => return Ok(()),
            '\\' => {
                if let Some((_, e)) = chars.next() {
                    text.push(e);
                }
            }
            _ => {}
        }
    }
    Err("unterminated backtick")
}
