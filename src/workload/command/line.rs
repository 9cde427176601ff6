//! What the command line holds: which list a word is in, what a flag sets, where its value
//! sits, and what was found.

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
pub(super) struct Edit {
    pub(super) field: Field,
    pub(super) index: usize,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) prefix: String,
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
    pub(super) edit: Option<Edit>,
    /// Why this one cannot be rewritten even though its value is known.
    pub(super) refusal: Option<String>,
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
