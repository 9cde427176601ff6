//! Server settings on the container's command line: Puma's `-w/--workers N` and
//! `-t/--threads MIN:MAX`, Falcon's `-n/--count N`, and `WEB_CONCURRENCY=N`-style assignments
//! in front of the server — as argv words (`bundle exec puma -w 2`) and inside one shell string
//! (`sh -c "bundle exec puma -w 2 -t 6:6"`).
//!
//! They beat the environment the renderer writes (Puma's CLI overrides `config/puma.rb`, which
//! reads the env), so the read-back reads them first and the candidate gets them rewritten. A
//! form that cannot be rewritten safely is refused: a candidate silently running the
//! baseline's config would make the whole experiment compare a config with itself.

mod lex;
mod line;
mod parse;
mod rewrite;

#[cfg(test)]
pub(in crate::workload) use lex::{lex, Tok};
pub use line::Setting;
pub use parse::parse;
pub use rewrite::rewrite;
