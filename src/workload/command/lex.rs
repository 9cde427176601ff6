//! A POSIX shell string as words, separators and redirects, with each word's byte range.

/// A shell token: a word (unquoted text, raw byte range), a command separator, or a redirect
/// operator (whose target word is not an argument).
#[derive(Clone, Debug, PartialEq)]
pub(in crate::workload) enum Tok {
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
pub(in crate::workload) fn lex(script: &str) -> Result<Vec<Tok>, &'static str> {
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
