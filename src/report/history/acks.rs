//! Acknowledgements: a text file the user commits and reviews like code,
//! one line each (`#` starts a comment):
//!
//! ```text
//! expected 4f1c2a9e0b7d  driver 560.35 on the H100 box: a new level, not a regression
//! accepted 7a1b2c3d4e5f  checkpointing on by default since #123 (tracked in #130)
//! ignore   2026-11-14    the night the fans failed
//! ```
//!
//! - `expected ID`: a known change; it starts a new level there and is never
//!   a regression (Conbench's "distribution change").
//! - `accepted ID`: a regression known and tracked; reported, never gated.
//! - `ignore POINT`: a point left out (a broken night): a commit (7 or more
//!   of its first characters), a sweep or run id, or a date (every point of
//!   that day).
//!
//! The reason is the rest of the line; `gpubench history --ack ID` requires
//! one. IDs are findings' stable ids: the same change keeps its id as nights
//! are added (a hash of the series and the change's first point).
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

use crate::error::usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Expected,
    Accepted,
    Ignore,
}

impl Kind {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Kind::Expected => "expected",
            Kind::Accepted => "accepted",
            Kind::Ignore => "ignore",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ack {
    pub kind: Kind,
    /// A finding's id, or a point for `ignore`.
    pub target: String,
    pub reason: String,
    /// Line in the file, for notes about it.
    pub line: usize,
}

/// Reads the file; a line that is not `KIND TARGET [reason]` is refused with
/// its number. A missing file is no acknowledgement at all.
pub(crate) fn read(path: &Path) -> Result<Vec<Ack>> {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| usage(format!("{}: not a text file of acknowledgements", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(usage(format!("cannot read {}: {e}", path.display()))),
    };
    parse(&text).map_err(|(line, why)| usage(format!("{}:{line}: {why}", path.display())))
}

pub(crate) fn parse(text: &str) -> std::result::Result<Vec<Ack>, (usize, String)> {
    let mut acks = vec![];
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split_once('#').map_or(raw, |(a, _)| a).trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.splitn(3, char::is_whitespace);
        let kind = match words.next().unwrap_or("") {
            "expected" => Kind::Expected,
            "accepted" => Kind::Accepted,
            "ignore" => Kind::Ignore,
            other => {
                return Err((
                    i + 1,
                    format!("`{other}` is not expected, accepted or ignore (a line is KIND ID-OR-POINT reason)"),
                ))
            }
        };
        let target = words.next().unwrap_or("").trim().to_string();
        if target.is_empty() {
            return Err((i + 1, format!("`{}` names no finding id or point", kind.word())));
        }
        if kind != Kind::Ignore && !is_id(&target) {
            return Err((
                i + 1,
                format!("`{target}` is not a finding id (12 hex digits, as `gpubench history` prints)"),
            ));
        }
        let reason = words.next().unwrap_or("").trim().to_string();
        acks.push(Ack { kind, target, reason, line: i + 1 });
    }
    Ok(acks)
}

pub(crate) fn is_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `ignore TARGET` names a point with this id, commit and date.
pub(crate) fn names_point(target: &str, id: &str, commit: &str, date: &str) -> bool {
    target == id
        || target == date
        || (target.len() >= 7 && !commit.is_empty() && commit.starts_with(target))
        || id.strip_prefix("sweep ").or_else(|| id.strip_prefix("run ")) == Some(target)
}

/// Appends one line to the file (created when missing) in a single write
/// under its lock: the file never holds half a line.
pub(crate) fn append(path: &Path, kind: Kind, target: &str, reason: &str) -> Result<()> {
    let one_line = reason.replace(['\n', '\r'], " ");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| usage(format!("cannot write {}: {e}", path.display())))?;
    f.lock().with_context(|| format!("cannot lock {}", path.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut text = String::new();
    if len > 0 && !ends_with_newline(path)? {
        text.push('\n');
    }
    text.push_str(&format!("{:<8} {target}  {}\n", kind.word(), one_line.trim()));
    f.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
    f.sync_all().with_context(|| format!("cannot flush {}", path.display()))
}

fn ends_with_newline(path: &Path) -> Result<bool> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes.last() == Some(&b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_a_broken_one_is_named() {
        let a = parse("# acks\nexpected 0123456789ab  new driver\n\nignore 2026-11-14 fans # a comment\n").unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].kind, a[0].target.as_str(), a[0].reason.as_str(), a[0].line),
            (Kind::Expected, "0123456789ab", "new driver", 2)
        );
        assert_eq!((a[1].kind, a[1].reason.as_str(), a[1].line), (Kind::Ignore, "fans", 4));
        assert_eq!(parse("accepted 0123456789ab\nexpect 0123456789ab x\n").unwrap_err().0, 2);
        assert!(parse("accepted xyz reason\n").unwrap_err().1.contains("not a finding id"));
        assert!(parse("ignore\n").unwrap_err().1.contains("names no finding id or point"));
    }

    #[test]
    fn points_are_named_by_id_commit_prefix_or_date() {
        assert!(names_point("2026-11-14", "abc", "", "2026-11-14"));
        assert!(names_point("1a2b3c4", "1a2b3c4d5e", "1a2b3c4d5e", "x"));
        assert!(!names_point("1a2b3c", "1a2b3c4d5e", "1a2b3c4d5e", "x"), "six characters are too few");
        assert!(names_point("s18f-2a", "sweep s18f-2a", "", "x"));
    }

    #[test]
    fn appends_are_whole_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("acks");
        std::fs::write(&p, "expected 0123456789ab no newline").unwrap();
        append(&p, Kind::Accepted, "ba9876543210", "known\nslower").unwrap();
        let a = read(&p).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!((a[1].kind, a[1].reason.as_str()), (Kind::Accepted, "known slower"));
        assert_eq!(read(&d.path().join("none")).unwrap(), vec![]);
    }
}
