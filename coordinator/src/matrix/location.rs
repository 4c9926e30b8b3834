//! From byte spans to what a person reads: line, column and the dotted key.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A matrix file that cannot be run, and where.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{file}:{line}:{column}: {}{message}", key_prefix(.key))]
pub struct Error {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The dotted path of the offending key, e.g. `workloads[1].params.threads`;
    /// empty when the error is not about one key (e.g. a TOML syntax error).
    pub key: String,
    pub message: String,
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A check's answer: the value, or an issue not yet placed in the file.
pub(super) type Checked<T> = std::result::Result<T, Issue>;

/// A validation failure before it is placed in a file: the span it points at,
/// the dotted key, and what is wrong.
#[derive(Debug)]
pub(super) struct Issue {
    pub span: Range<usize>,
    pub key: String,
    pub message: String,
}

impl Issue {
    pub fn new(span: Range<usize>, key: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            span,
            key: key.into(),
            message: message.into(),
        }
    }

    /// The error at the span's line and column. Key and message are cut
    /// to [`MAX_KEY_BYTES`] and [`MAX_MESSAGE_BYTES`]: the TOML parser and
    /// serde quote keys and values whole, and a 1 MiB key would otherwise
    /// be a 1 MiB error.
    pub fn locate(self, file: &str, text: &str) -> Error {
        let (line, column) = line_column(text, self.span.start);
        Error {
            file: file.to_owned(),
            line,
            column,
            key: cut(self.key, MAX_KEY_BYTES),
            message: cut(self.message, MAX_MESSAGE_BYTES),
        }
    }
}

/// The longest key path an error names; real ones are under 64 bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The longest message of an error; ours are under 400 bytes, and
/// serde's lists of expected keys under 300.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `s` cut to at most `limit` bytes at a character boundary, with `…`
/// (3 bytes, within the limit) when it was longer.
fn cut(mut s: String, limit: usize) -> String {
    if s.len() > limit {
        let mut end = limit - '…'.len_utf8();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// Places an error of the TOML parser or of serde: the span comes with it, the
/// key is found by looking the span up in the document.
pub(super) fn from_toml(file: &str, text: &str, err: &toml::de::Error) -> Error {
    let span = err.span().unwrap_or(0..0);
    let message = readable(err.message());
    let mut key = key_at(text, &span);
    if let Some(field) = missing_field(&message) {
        key = join(&key, field);
    }
    Issue { span, key, message }.locate(file, text)
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Appends `field` to the dotted path `key`.
pub(super) fn join(key: &str, field: &str) -> String {
    if key.is_empty() {
        field.to_owned()
    } else {
        format!("{key}.{field}")
    }
}

/// Says in TOML's words what serde says in its own.
fn readable(message: &str) -> String {
    message
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: map", "invalid type: table")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a table")
}

/// The field named by serde's "missing field `x`".
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// The dotted path of the key or value whose span is exactly `span`; the
/// deepest wins (an array of tables and its first element share a span).
/// A repeated key, which the parser leaves out of the document, takes the
/// path of the last earlier key of that name. Empty when nothing matches,
/// e.g. for the document itself or most syntax errors.
fn key_at(text: &str, span: &Range<usize>) -> String {
    let (doc, _syntax_errors) = DeTable::parse_recoverable(text);
    let name = text
        .get(span.clone())
        .unwrap_or_default()
        .trim_matches(['"', '\'']);
    let mut finder = Finder {
        target: span.clone(),
        name,
        best: None,
        earlier: None,
    };
    finder.table(doc.get_ref(), "", 0);
    finder
        .best
        .or(finder.earlier)
        .map(|(_, key)| key)
        .unwrap_or_default()
}

struct Finder<'a> {
    target: Range<usize>,
    /// The text at `target`.
    name: &'a str,
    /// Depth and path of the deepest match so far.
    best: Option<(usize, String)>,
    /// Start and path of the last key named `name` before `target`.
    earlier: Option<(usize, String)>,
}

impl Finder<'_> {
    fn consider(&mut self, span: Range<usize>, depth: usize, path: &str) {
        if span == self.target && self.best.as_ref().is_none_or(|(d, _)| depth > *d) {
            self.best = Some((depth, path.to_owned()));
        }
    }

    fn table(&mut self, table: &DeTable<'_>, prefix: &str, depth: usize) {
        for (key, value) in table.iter() {
            let path = join(prefix, key.get_ref());
            self.consider(key.span(), depth + 1, &path);
            let start = key.span().start;
            if !self.name.is_empty()
                && key.get_ref() == self.name
                && start < self.target.start
                && self.earlier.as_ref().is_none_or(|(s, _)| start > *s)
            {
                self.earlier = Some((start, path.clone()));
            }
            self.value(value, &path, depth + 1);
        }
    }

    fn value(&mut self, value: &Spanned<DeValue<'_>>, path: &str, depth: usize) {
        self.consider(value.span(), depth, path);
        match value.get_ref() {
            DeValue::Table(t) => self.table(t, path, depth),
            DeValue::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    self.value(item, &format!("{path}[{i}]"), depth + 1);
                }
            }
            _ => {}
        }
    }
}
