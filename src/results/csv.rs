//! The results file: CSV schema v6, one row per run, appended.
//!
//! Rows are appended with the file locked, each in a single write, so a crash
//! or a concurrent writer cannot leave half a row. A file whose header differs
//! from ours is refused, never mixed.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use crate::error::usage;

/// The schema this gpubench writes. Files of earlier schemas are read by
/// column name; rows are appended only to a file of this schema (`gpubench
/// upgrade FILE` rewrites an earlier one).
pub const SCHEMA_VERSION: u32 = 6;

pub use super::columns::Row;

impl Row {
    /// The header line of schema v1, as written to files.
    pub(crate) fn header() -> String {
        let mut w = csv::Writer::from_writer(vec![]);
        w.serialize(Row::default()).expect("serializing a default row");
        let bytes = w.into_inner().expect("flushing to a Vec");
        let text = String::from_utf8(bytes).expect("CSV is UTF-8");
        text.lines().next().unwrap_or_default().to_string()
    }

    /// The row as one CSV record, without header, ending in a newline.
    /// Text that a spreadsheet would run as a formula is written with a
    /// leading `'` (`escape_cell`); `read_rows` takes it off again.
    pub(crate) fn to_record(&self) -> String {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(vec![]);
        w.serialize(self).expect("serializing a row");
        let plain = w.into_inner().expect("flushing to a Vec");
        // Most rows have no field that could need the mark: they are written
        // as serialized, without reading them back (a merge of 200,000 rows
        // spent most of its time building that reader).
        if !may_need_escape(&plain) {
            return String::from_utf8(plain).expect("CSV is UTF-8");
        }
        let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(&plain[..]);
        let rec = r.records().next().expect("one record").expect("our own CSV");
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(vec![]);
        w.write_record(rec.iter().map(|f| escape_cell(f).into_owned())).expect("writing a record");
        String::from_utf8(w.into_inner().expect("flushing to a Vec")).expect("CSV is UTF-8")
    }
}

/// Rows as a results file's text: the header, then a record each (what
/// `--format csv` prints for the rows a command writes).
pub(crate) fn rows_text(rows: &[Row]) -> String {
    let mut s = Row::header() + "\n";
    for r in rows {
        s.push_str(&r.to_record());
    }
    s
}

/// Whether some field of a serialized record starts (inside its quotes, if
/// quoted) with a byte that `escape_cell` may mark: false means no field is
/// formula-like. Quoted fields with commas inside may give false alarms,
/// which only cost the careful path.
fn may_need_escape(record: &[u8]) -> bool {
    let marks = |b: u8| matches!(b, b'\'' | b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r');
    let mut start = true;
    for (i, &b) in record.iter().enumerate() {
        if start && (marks(b) || (b == b'"' && record.get(i + 1).is_some_and(|&c| marks(c)))) {
            return true;
        }
        start = b == b',';
    }
    false
}

/// Whether a spreadsheet would read `s` as a formula: text (not a number)
/// that starts, after any `'`, with one of OWASP's formula characters.
fn formula_like(s: &str) -> bool {
    s.trim_start_matches('\'').starts_with(['=', '+', '-', '@', '\t', '\r']) && s.trim().parse::<f64>().is_err()
}

/// CSV formula injection (OWASP): a text cell that a spreadsheet would run
/// (`=HYPERLINK(…)`, `@SUM(…)`, …) gets a leading `'`, which spreadsheets
/// show as text. Numbers are untouched. `unescape_cell` undoes it exactly,
/// even for text that itself began with `'`.
pub(crate) fn escape_cell(s: &str) -> std::borrow::Cow<'_, str> {
    if formula_like(s) {
        std::borrow::Cow::Owned(format!("'{s}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// The inverse of `escape_cell`.
pub(crate) fn unescape_cell(s: &str) -> &str {
    match s.strip_prefix('\'') {
        Some(rest) if formula_like(rest) => rest,
        _ => s,
    }
}

pub(crate) fn first_line(path: &Path) -> Result<String> {
    let f = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut line = vec![];
    BufReader::new(f).read_until(b'\n', &mut line).with_context(|| format!("cannot read {}", path.display()))?;
    // A binary file is a wrong input, not a failure: exit 2, naming it.
    let line = String::from_utf8(line).map_err(|_| {
        usage(format!(
            "{} is not a gpubench CSV file (its first line is not text); write to a new file with --out",
            path.display()
        ))
    })?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn header_mismatch(path: &Path) -> anyhow::Error {
    let p = path.display();
    match first_line(path).ok().and_then(|h| earlier_schema(&h)) {
        Some(v) => usage(format!(
            "{p} has the header of gpubench's CSV schema v{v}; rows of v{SCHEMA_VERSION} are not appended to it: \
             run `gpubench upgrade {p}` (it rewrites the file for v{SCHEMA_VERSION} and keeps the old one beside \
             it), or write to a new file with --out"
        )),
        None => usage(format!(
            "{p} has a different header than gpubench's CSV schema v{SCHEMA_VERSION}; write to a new file with \
             --out (rows are never mixed across schemas)"
        )),
    }
}

/// The schema an earlier gpubench wrote `header` in: every column known to
/// this one, `schema_version` first, but not today's header.
fn earlier_schema(header: &str) -> Option<u32> {
    let ours = Row::header();
    let known: Vec<&str> = ours.split(',').collect();
    let cols: Vec<&str> = header.split(',').collect();
    let earlier = header != ours && cols.first() == Some(&"schema_version") && cols.iter().all(|c| known.contains(c));
    if !earlier {
        return None;
    }
    // Each schema after v1 wrote exactly today's header less what came later;
    // anything else of ours is v1, whose files may lack more.
    let version = (2..SCHEMA_VERSION).rev().find(|&v| {
        let later = super::columns::added_after(v);
        known.iter().filter(|c| !later.contains(c)).copied().collect::<Vec<_>>() == cols
    });
    Some(version.unwrap_or(1))
}

/// What `upgrade` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Upgrade {
    /// The file already has this gpubench's header.
    Current,
    /// Rewritten; the old file kept at this path.
    Done { rows: usize, kept: std::path::PathBuf },
}

/// `gpubench upgrade FILE`: rewrites a results file of an earlier schema
/// with this schema's header, every row read by column name (columns added
/// since are empty), so that new rows can be appended to it. Atomic: the new
/// file is written beside it and renamed into place, under the lock that
/// appends take; the old file is kept as FILE.schema<N>.csv, which must not
/// exist yet (nothing is ever silently overwritten).
pub(crate) fn upgrade(path: &Path) -> Result<Upgrade> {
    let p = path.display();
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(usage(format!("cannot upgrade {p}: not a regular file (a FIFO, socket, device or directory)")));
    }
    let f = OpenOptions::new().read(true).open(path).map_err(|e| usage(format!("cannot read {p}: {e}")))?;
    f.lock().with_context(|| format!("cannot lock {p}"))?;
    let header = first_line(path)?;
    if header == Row::header() {
        return Ok(Upgrade::Current);
    }
    let Some(v) = earlier_schema(&header) else {
        // Not ours, or a later gpubench's: the reader says which, with the line.
        read_rows_with_lines(path)?;
        return Err(usage(format!("{p}: not a results file of an earlier gpubench schema; nothing to upgrade")));
    };
    let rows = read_rows(path)?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let kept = path.with_file_name(format!("{stem}.schema{v}.csv"));
    let tmp = path.with_file_name(format!(".{stem}.upgrade-{}.tmp", std::process::id()));
    let mut text = Row::header() + "\n";
    for r in &rows {
        text.push_str(&Row { schema_version: SCHEMA_VERSION, ..r.clone() }.to_record());
    }
    let write = || -> Result<()> {
        let mut t = File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        t.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", tmp.display()))?;
        t.sync_all().with_context(|| format!("cannot flush {}", tmp.display()))?;
        std::fs::hard_link(path, &kept).map_err(|e| {
            usage(format!("cannot keep the old file as {} ({e}); move that file away first", kept.display()))
        })?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {p}"))
    };
    let done = write();
    let _ = std::fs::remove_file(&tmp);
    done?;
    Ok(Upgrade::Done { rows: rows.len(), kept })
}

/// The directory a new file at `path` would go in; a usage error naming
/// `flag` when it does not exist.
pub(crate) fn existing_parent<'a>(path: &'a Path, flag: &str) -> Result<&'a Path> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{flag} {}: {} is a file, not a directory; choose another place",
            path.display(),
            dir.display()
        )));
    }
    if !dir.is_dir() {
        return Err(usage(format!(
            "{flag} {}: directory {} does not exist; create it first (mkdir -p {})",
            path.display(),
            dir.display(),
            dir.display()
        )));
    }
    Ok(dir)
}

/// Checks, before any work is done, that a row can later be appended to `path`:
/// its directory exists and is writable, and an existing file has our header.
pub(crate) fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(usage(format!(
            "--out {} is a directory; give a file name such as {}/results.csv",
            path.display(),
            path.display()
        )));
    }
    if path.exists() {
        let meta = std::fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
        // A FIFO would block the first read of its header, and then every append.
        if !meta.is_file() {
            return Err(usage(format!(
                "--out {} is not a regular file (a FIFO, socket or device); give a results file",
                path.display()
            )));
        }
        let len = meta.len();
        if len > 0 && first_line(path)? != Row::header() {
            return Err(header_mismatch(path));
        }
        // A cut-short last line is refused now, before any work, not after it.
        if len > 0 {
            unterminated_tail(path, &Row::header())?;
        }
        OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| usage(format!("--out {} is not writable ({e}); choose another file", path.display())))?;
        return Ok(());
    }
    let dir = existing_parent(path, "--out")?;
    writable_dir(dir, "--out", path)
}

/// Whether files can be created in `dir` (for `flag PATH`): a probe file is
/// made and removed, which answers for root, read-only mounts and ACLs alike.
pub(crate) fn writable_dir(dir: &Path, flag: &str, path: &Path) -> Result<()> {
    let probe = dir.join(format!(".gpubench-probe-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(usage(format!(
            "{flag} {}: directory {} is not writable ({e}); choose another location",
            path.display(),
            dir.display()
        ))),
    }
}

/// Appends rows to `path`, writing the header first if the file is new or
/// empty. The file is locked for the duration, and the bytes go out in one write.
pub fn append_rows(path: &Path, rows: &[Row]) -> Result<()> {
    let body: String = rows.iter().map(Row::to_record).collect();
    append_locked(path, &Row::header(), &body, header_mismatch)
}

/// Appends `body` (whole CSV records) to `path` under an exclusive lock, with
/// `header` first when the file is new or empty, in one write, then flushed
/// to disk; an existing file with another header gets `mismatch(path)`.
/// Every gpubench CSV (results, devices, telemetry) is written through here.
///
/// The append lands whole or not at all: a write that fails part way (a full
/// disk, a file size limit) is cut back to the file's length before it, so
/// the file stays byte for byte as it was and every later append still
/// parses. A last line without its newline (a hand edit, a copy cut short)
/// gets one when it is a whole record; anything else there is refused with
/// its line number, the file untouched (`unterminated_tail`).
pub(crate) fn append_locked(path: &Path, header: &str, body: &str, mismatch: fn(&Path) -> anyhow::Error) -> Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .with_context(|| format!("cannot open {} for appending", path.display()))?;
    f.lock().with_context(|| format!("cannot lock {}", path.display()))?;
    // A file renamed over this one while we waited for the lock (`upgrade`)
    // is the one to append to, not the old one we hold open.
    if !same_file(&f, path) {
        drop(f);
        return append_locked(path, header, body, mismatch);
    }
    let len = f.metadata().with_context(|| format!("cannot stat {}", path.display()))?.len();
    let mut buf = String::new();
    if len == 0 {
        buf.push_str(header);
        buf.push('\n');
    } else if first_line(path)? != header {
        return Err(mismatch(path));
    }
    if len > 0 && unterminated_tail(path, header)? {
        buf.push('\n');
    }
    buf.push_str(body);
    let written = f.write_all(buf.as_bytes()).and_then(|_| f.sync_data());
    if let Err(e) = written {
        // Whatever part of the append reached the file goes again.
        let restored = f.set_len(len).and_then(|_| f.sync_data());
        let state = match restored {
            Ok(()) => "the file is as it was before".to_string(),
            Err(r) => format!("cutting it back to {len} bytes failed too ({r}): its last line may be partial"),
        };
        return Err(anyhow::anyhow!("cannot append a row to {}: {e}; {state}", path.display()));
    }
    Ok(())
}

/// Whether the file's last line lacks its newline while being a whole
/// record of `header`'s columns (it gets one before the append). Any other
/// unterminated last line is refused: the next row would be glued to it.
fn unterminated_tail(path: &Path, header: &str) -> Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    // The last byte first: a whole file (the usual case) is not read at all.
    let mut f = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut last = [b'\n'];
    if f.seek(SeekFrom::End(-1)).is_ok() {
        f.read_exact(&mut last).with_context(|| format!("cannot read {}", path.display()))?;
    }
    if last[0] == b'\n' {
        return Ok(false);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.last().is_none_or(|&b| b == b'\n') {
        return Ok(false);
    }
    let columns = header.split(',').count();
    // The last record as CSV reads it (a quoted label may hold a newline),
    // and the line it starts on; None when the tail does not parse.
    let mut rd = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&bytes[..]);
    let (mut fields, mut line) = (None, 1);
    let mut rec = csv::ByteRecord::new();
    loop {
        match rd.read_byte_record(&mut rec) {
            Ok(true) => {
                fields = Some(rec.len());
                line = rec.position().map_or(line, |p| p.line());
            }
            Ok(false) => break,
            Err(e) => {
                fields = None;
                line = e.position().map_or(line, |p| p.line());
                break;
            }
        }
    }
    match fields {
        Some(n) if n == columns => Ok(true),
        got => Err(usage(format!(
            "{}:{line}: the last line has no newline and is not a whole row ({} of {columns} columns): a copy cut \
             short or a hand edit; finish or remove that line, then run again (the file was not changed)",
            path.display(),
            got.map_or("unreadable".to_string(), |n| n.to_string())
        ))),
    }
}

/// Whether the open file `f` is still the one at `path`.
fn same_file(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

/// Reads every row of a results file written by gpubench.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    Ok(read_rows_with_lines(path)?.into_iter().map(|(_, r)| r).collect())
}

/// Reads every row with the line it starts on, for messages about single rows.
/// Every problem is a usage error (exit 2) on one line naming the file and,
/// where there is one, the line: these files are inputs the user chose.
///
/// Columns are matched by name. A file from an earlier gpubench, whose v1
/// header lacks columns added since, reads with those columns empty, so a
/// committed baseline or last month's results stay comparable; a column this
/// gpubench does not know is refused. (Appending stays exact: see
/// `check_writable`.)
pub(crate) fn read_rows_with_lines(path: &Path) -> Result<Vec<(u64, Row)>> {
    let mut rows = vec![];
    for_each_row(path, |line, row| rows.push((line, row)))?;
    Ok(rows)
}

/// `read_rows_with_lines`, handing each row to `f` as it is read: the file
/// is streamed, never held whole, so a year of nightly rows costs the rows
/// a command keeps and nothing more.
pub(crate) fn for_each_row(path: &Path, f: impl FnMut(u64, Row)) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let p = path.display();
    let cannot = |e: std::io::Error| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        usage(format!("cannot read {p}: {why}"))
    };
    // Opening a FIFO for reading waits for a writer, maybe forever: what is
    // not a regular file is refused before it is opened.
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if meta.is_dir() {
        return Err(usage(format!("cannot read {p}: it is a directory")));
    }
    if !meta.is_file() {
        return Err(usage(format!(
            "cannot read {p}: not a regular file (a FIFO, socket or device); give a results file"
        )));
    }
    let mut file = File::open(path).map_err(cannot)?;
    // gpubench ends every row with a newline: a file that does not was cut
    // off mid-write, which the last record's message says.
    let mut last = [b'\n'];
    if file.seek(SeekFrom::End(-1)).is_ok() {
        file.read_exact(&mut last).map_err(cannot)?;
    }
    file.seek(SeekFrom::Start(0)).map_err(cannot)?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let head = reader.fill_buf().map_err(cannot)?;
    if head.len() < (1 << 20) && head.iter().all(u8::is_ascii_whitespace) {
        return Err(usage(format!("{p}: the file is empty; expected a gpubench results CSV with a header line")));
    }
    parse_from(path, reader, last[0] != b'\n', f)
}

/// `read_rows_with_lines` on text already read (`path` names it in messages):
/// the published reference files built into the binary go through here.
pub(crate) fn parse_rows(path: &Path, bytes: &[u8]) -> Result<Vec<(u64, Row)>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(usage(format!(
            "{}: the file is empty; expected a gpubench results CSV with a header line",
            path.display()
        )));
    }
    let mut rows = vec![];
    parse_from(path, bytes, bytes.last() != Some(&b'\n'), |line, row| rows.push((line, row)))?;
    Ok(rows)
}

/// The rows of a results file's text from `source`; `unterminated` when
/// the text does not end in a newline.
fn parse_from<R: std::io::Read>(path: &Path, source: R, unterminated: bool, mut f: impl FnMut(u64, Row)) -> Result<()> {
    let p = path.display();
    let mut rdr = csv::ReaderBuilder::new().flexible(true).from_reader(source);
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    let mut rec = csv::StringRecord::new();
    let first = check_header(path, &headers, &mut rdr, &mut rec)?;
    let ours_text = Row::header();
    let ours = csv::StringRecord::from(ours_text.split(',').collect::<Vec<_>>());
    let from_file: Vec<Option<usize>> = ours.iter().map(|c| headers.iter().position(|h| h == c)).collect();
    // This gpubench's own header: records deserialize as read, unless a
    // cell carries `escape_cell`'s mark.
    let same = headers == ours;

    let mut next = first;
    while next {
        let line = rec.position().map_or(0, |pos| pos.line());
        if rec.len() != headers.len() {
            // A record that is the last of a file lacking its final newline
            // was cut off mid-write (gpubench always ends rows with one).
            let (n, mut after) = (rec.len(), csv::StringRecord::new());
            let is_last = matches!(rdr.read_record(&mut after), Ok(false));
            if unterminated && is_last {
                return Err(usage(format!(
                    "{p}:{line}: the last line is truncated ({n} of {} columns, no final newline); \
                     a run was probably interrupted while writing: delete that line",
                    headers.len()
                )));
            }
            return Err(usage(format!("{p}:{line}: {n} columns, expected {}", headers.len())));
        }
        let remapped;
        let rec_ours = if same && !rec.iter().any(|c| c.starts_with('\'')) {
            &rec
        } else {
            remapped = from_file
                .iter()
                .map(|i| unescape_cell(i.and_then(|i| rec.get(i)).unwrap_or("")))
                .collect::<csv::StringRecord>();
            &remapped
        };
        // By position: the record is in our column order, and matching 130 names
        // per row was most of the time spent reading.
        let row: Row = rec_ours.deserialize(None).map_err(|e| {
            let de = match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => Some(err),
                _ => None,
            };
            let col = de.and_then(|d| d.field()).and_then(|i| ours.get(i as usize));
            let value = de.and_then(|d| d.field()).and_then(|i| rec_ours.get(i as usize));
            let what = match de.map(|d| d.kind()) {
                Some(csv::DeserializeErrorKind::ParseInt(_)) => "is not a whole number".to_string(),
                Some(csv::DeserializeErrorKind::ParseFloat(_)) => "is not a number".to_string(),
                Some(csv::DeserializeErrorKind::ParseBool(_)) => "is not true/false".to_string(),
                Some(other) => format!("cannot be read ({other})"),
                None => format!("cannot be read ({e})"),
            };
            match (col, value) {
                (Some(c), Some(v)) => usage(format!("{p}:{line}: column `{c}`: `{v}` {what}")),
                _ => usage(format!("{p}:{line}: {e}")),
            }
        })?;
        if row.schema_version == 0 || row.schema_version > SCHEMA_VERSION {
            return Err(usage(format!(
                "{p}:{line}: schema_version is {}, but this gpubench reads schemas v1 to v{SCHEMA_VERSION}",
                row.schema_version
            )));
        }
        f(line, row);
        next = rdr.read_record(&mut rec).map_err(|e| csv_error(path, e))?;
    }
    Ok(())
}

fn csv_error(path: &Path, e: csv::Error) -> anyhow::Error {
    let line = e.position().map(|pos| pos.line());
    let why = match e.kind() {
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8 text".to_string(),
        _ => e.to_string(),
    };
    match line {
        Some(l) => usage(format!("{}:{l}: {why}", path.display())),
        None => usage(format!("{}: {why}", path.display())),
    }
}

/// Accepts our header or a subset of its columns (an earlier v1 file). Tells
/// another gpubench schema (header starts with `schema_version`) from another
/// tool's CSV, and names the first column this gpubench does not know.
/// Reads the first record into `first` (true when there is one): a header
/// of another schema is named by the version its first row carries.
fn check_header<R: std::io::Read>(
    path: &Path,
    headers: &csv::StringRecord,
    rdr: &mut csv::Reader<R>,
    first: &mut csv::StringRecord,
) -> Result<bool> {
    let ours = Row::header();
    let ours: Vec<&str> = ours.split(',').collect();
    let unknown = headers.iter().position(|h| !ours.contains(&h));
    if headers.get(0) == Some("schema_version") && unknown.is_none() {
        return rdr.read_record(first).map_err(|e| csv_error(path, e));
    }
    let p = path.display();
    if headers.get(0) != Some("schema_version") {
        let start: Vec<&str> = headers.iter().take(4).collect();
        return Err(usage(format!(
            "{p}:1: not a gpubench results file (header starts `{}`; expected `{}`)",
            start.join(","),
            ours[..4].join(",")
        )));
    }
    let version = matches!(rdr.read_record(first), Ok(true))
        .then(|| first.get(0).and_then(|v| v.parse::<u32>().ok()))
        .flatten()
        .filter(|&v| v > SCHEMA_VERSION);
    let i = unknown.unwrap_or(0);
    let diff = format!("column {} `{}` is unknown to this gpubench", i + 1, &headers[i]);
    let from = match version {
        Some(v) => format!("written by gpubench CSV schema v{v}"),
        None => "from a newer gpubench".to_string(),
    };
    Err(usage(format!("{p}:1: header is {from} ({diff}); this gpubench reads schemas v1 to v{SCHEMA_VERSION}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Row {
        Row {
            schema_version: SCHEMA_VERSION,
            run_id: "abc".into(),
            strategy: "single".into(),
            model: "resnet18".into(),
            label: "V100, \"box\"".into(),
            throughput_img_s: Some(123.5),
            loss_first: Some(6.9),
            status: crate::results::Status::Ok,
            ..Default::default()
        }
    }

    #[test]
    fn header_starts_with_identity_and_names_impl() {
        let h = Row::header();
        assert!(h.starts_with(
            "schema_version,run_id,timestamp,gpubench_version,gpubench_commit,host,label,impl,mode,strategy"
        ));
        assert!(h.ends_with("status,error,note,source"));
    }

    #[test]
    fn append_creates_header_once_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        check_writable(&p).unwrap();
        append_rows(&p, &[sample()]).unwrap();
        append_rows(&p, &[sample()]).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches("schema_version").count(), 1);
        let rows = read_rows(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], sample());
        assert_eq!(rows[1].throughput_img_s, Some(123.5));
        assert_eq!(rows[1].step_ms_p50, None);
    }

    #[test]
    fn an_unterminated_last_line_gets_its_newline_when_whole_and_is_refused_when_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        // A whole row without its newline (a hand edit): completed, then appended to.
        append_rows(&p, &[sample()]).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.trim_end_matches('\n')).unwrap();
        append_rows(&p, &[sample()]).unwrap();
        assert_eq!(read_rows(&p).unwrap().len(), 2);
        // The header alone, unterminated: the row goes on a line of its own.
        std::fs::write(&p, Row::header()).unwrap();
        append_rows(&p, &[sample()]).unwrap();
        assert_eq!(read_rows(&p).unwrap().len(), 1);
        // A row cut short (a copy interrupted): refused, the file untouched, its line named.
        let whole = std::fs::read_to_string(&p).unwrap();
        let cut = format!("{whole}{}", &sample().to_record()[..60]);
        std::fs::write(&p, &cut).unwrap();
        let err = append_rows(&p, &[sample()]).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2, "{err}");
        assert!(err.to_string().contains("r.csv:3:") && err.to_string().contains("not a whole row"), "{err}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), cut);
    }

    #[test]
    fn a_fifo_is_refused_for_reading_and_appending_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("r.csv");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = check_writable(&fifo).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("is not a regular file (a FIFO, socket or device)"), "{e}");
        let e = for_each_row(&fifo, |_, _| {}).unwrap_err();
        assert!(e.to_string().ends_with("not a regular file (a FIFO, socket or device); give a results file"), "{e}");
        assert!(upgrade(&fifo).unwrap_err().to_string().contains("not a regular file"));
    }

    #[test]
    fn a_binary_file_is_refused_as_a_wrong_input() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bin.csv");
        std::fs::write(&p, [0xffu8, 0xfe, 0x00, 0x81, b'\n', 0x90]).unwrap();
        let err = check_writable(&p).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2, "{err}");
        assert!(err.to_string().contains("not a gpubench CSV file"), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), [0xffu8, 0xfe, 0x00, 0x81, b'\n', 0x90]);
    }

    #[test]
    fn foreign_header_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("other.csv");
        std::fs::write(&p, "a,b\n1,2\n").unwrap();
        let err = check_writable(&p).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(format!("{err}").contains("different header"));
        assert!(append_rows(&p, &[sample()]).is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
    }

    #[test]
    fn missing_directory_is_a_usage_error() {
        let err = check_writable(Path::new("/nonexistent-dir-gpubench/x.csv")).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(format!("{err}").contains("does not exist"));
    }

    /// Writes `text` to a file and returns read_rows' one-line error for it.
    fn read_err(name: &str, text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let err = read_rows(&p).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2, "{err}");
        let msg = crate::error::one_line(&err);
        assert!(msg.contains(name), "{msg}");
        msg.replace(&format!("{}/", dir.path().display()), "")
    }

    fn file_of(rows: &[Row]) -> String {
        let mut s = Row::header() + "\n";
        for r in rows {
            s.push_str(&r.to_record());
        }
        s
    }

    #[test]
    fn bad_inputs_name_file_line_and_problem() {
        assert_eq!(
            read_err("e.csv", ""),
            "e.csv: the file is empty; expected a gpubench results CSV with a header line"
        );
        assert_eq!(
            read_err("o.csv", "model,batch,img_s\nresnet50,64,1\n"),
            "o.csv:1: not a gpubench results file (header starts `model,batch,img_s`; \
             expected `schema_version,run_id,timestamp,gpubench_version`)"
        );
        let v9 = Row::header().replace(",n_devices,", ",world_size,n_devices,");
        assert_eq!(
            read_err("v9.csv", &format!("{v9}\n9,x\n")),
            "v9.csv:1: header is written by gpubench CSV schema v9 (column 14 `world_size` is unknown to this \
             gpubench); this gpubench reads schemas v1 to v6"
        );
        let text = file_of(&[sample(), sample()]).replace(",123.5,", ",fast,");
        assert_eq!(read_err("t.csv", &text), "t.csv:2: column `throughput_img_s`: `fast` is not a number");
        let text = file_of(&[sample(), sample()]);
        let cut = &text[..text.len() - 12];
        assert!(read_err("c.csv", cut).starts_with("c.csv:3: the last line is truncated ("));
        let mut short = file_of(&[sample()]);
        short.push_str("1,x\n");
        let n = Row::header().split(',').count();
        assert_eq!(read_err("s.csv", &short), format!("s.csv:3: 2 columns, expected {n}"));
        let text = file_of(&[Row { schema_version: 7, ..sample() }]);
        assert_eq!(read_err("n.csv", &text), "n.csv:2: schema_version is 7, but this gpubench reads schemas v1 to v6");
    }

    #[test]
    fn an_earlier_schema_is_refused_for_appends_and_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.csv");
        let old = "schema_version,strategy,throughput_img_s,status,n_devices\n1,ddp,812.5,ok,4\n";
        std::fs::write(&p, old).unwrap();
        // Appending names the fix and leaves the file as it was.
        for e in [check_writable(&p).unwrap_err(), append_rows(&p, &[sample()]).unwrap_err()] {
            let m = e.to_string();
            assert!(m.contains("schema v1") && m.contains(&format!("gpubench upgrade {}", p.display())), "{m}");
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), old);
        // upgrade: today's header, the rows by name, the old file beside it.
        let kept = dir.path().join("old.schema1.csv");
        assert_eq!(upgrade(&p).unwrap(), Upgrade::Done { rows: 1, kept: kept.clone() });
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), old);
        assert_eq!(first_line(&p).unwrap(), Row::header());
        let rows = read_rows(&p).unwrap();
        assert_eq!(
            (rows[0].schema_version, rows[0].throughput_img_s, rows[0].n_devices),
            (SCHEMA_VERSION, Some(812.5), 4)
        );
        append_rows(&p, &[sample()]).unwrap();
        assert_eq!(read_rows(&p).unwrap().len(), 2);
        assert_eq!(upgrade(&p).unwrap(), Upgrade::Current);
        // A second upgrade never overwrites the kept file.
        std::fs::write(&p, old).unwrap();
        let e = upgrade(&p).unwrap_err().to_string();
        assert!(e.contains("move that file away first"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), old);
        // Not a results file: nothing to upgrade, and said why.
        std::fs::write(&p, "a,b\n1,2\n").unwrap();
        assert!(upgrade(&p).unwrap_err().to_string().contains("not a gpubench results file"));
    }

    /// A file of an earlier schema (today's header less the columns added
    /// since) is named by its version, upgraded, and its rows read with
    /// those columns empty: v2 (before grad_accum) and v5 (before the
    /// columns that place a row in history).
    #[test]
    fn an_earlier_file_is_named_by_its_version_and_upgraded() {
        for (version, added) in [(2, "grad_accum"), (5, "commit")] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join(format!("v{version}.csv"));
            let later = crate::results::columns::added_after(version);
            assert!(later.contains(&added), "v{version}: {later:?}");
            let header: Vec<&str> = Row::header().leak().split(',').filter(|c| !later.contains(c)).collect();
            let row: Vec<String> = header
                .iter()
                .map(|c| match *c {
                    "schema_version" => version.to_string(),
                    "strategy" => "ddp".into(),
                    "status" => "ok".into(),
                    "n_devices" => "2".into(),
                    _ => String::new(),
                })
                .collect();
            std::fs::write(&p, format!("{}\n{}\n", header.join(","), row.join(","))).unwrap();
            assert_eq!(earlier_schema(&first_line(&p).unwrap()), Some(version));
            let m = append_rows(&p, &[sample()]).unwrap_err().to_string();
            assert!(m.contains(&format!("schema v{version}")) && m.contains("gpubench upgrade"), "{m}");
            let kept = dir.path().join(format!("v{version}.schema{version}.csv"));
            assert_eq!(upgrade(&p).unwrap(), Upgrade::Done { rows: 1, kept });
            assert_eq!(first_line(&p).unwrap(), Row::header());
            let rows = read_rows(&p).unwrap();
            assert_eq!((rows[0].schema_version, rows[0].strategy.as_str()), (SCHEMA_VERSION, "ddp"));
            assert_eq!(rows[0].grad_accum, None);
            let r = &rows[0];
            let history = [&r.gpubench_commit, &r.commit, &r.branch, &r.sweep_id, &r.ci_url];
            assert!(history.iter().all(|c| c.is_empty()), "v{version}: {history:?}");
            append_rows(&p, &[sample()]).unwrap();
        }
    }

    #[test]
    fn an_earlier_v1_file_with_fewer_columns_reads_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.csv");
        // columns in another order, most missing: what an earlier gpubench wrote
        std::fs::write(&p, "schema_version,strategy,throughput_img_s,status,n_devices\n1,ddp,812.5,ok,4\n").unwrap();
        let rows = read_rows(&p).unwrap();
        assert_eq!((rows[0].strategy.as_str(), rows[0].n_devices), ("ddp", 4));
        assert_eq!((rows[0].throughput_img_s, rows[0].step_ms_p50), (Some(812.5), None));
        // a column this gpubench does not know is refused, naming it
        std::fs::write(&p, "schema_version,strategy,warp_factor\n1,ddp,9\n").unwrap();
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(err.contains("column 3 `warp_factor` is unknown to this gpubench"), "{err}");
        assert!(err.contains("from a newer gpubench"), "{err}");
    }

    #[test]
    fn missing_file_is_a_usage_error() {
        let err = read_rows(Path::new("/nonexistent-gpubench/r.csv")).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert_eq!(err.to_string(), "cannot read /nonexistent-gpubench/r.csv: no such file");
    }

    #[test]
    fn empty_optional_columns_read_as_none_and_lines_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ref.csv");
        let r = Row { throughput_img_s: Some(51.9), loss_first: None, source: "a paper".into(), ..sample() };
        // no final newline: a hand-written file, complete, is accepted
        std::fs::write(&p, file_of(&[sample(), r.clone()]).trim_end()).unwrap();
        let rows = read_rows_with_lines(&p).unwrap();
        assert_eq!(rows.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(rows[1].1, r);
        assert_eq!(rows[1].1.step_ms_p50, None);
    }

    #[test]
    fn only_records_with_a_field_that_may_be_formula_like_take_the_careful_path() {
        assert!(!may_need_escape(b"5,r1,2026-12-06T01:00:00Z,0.1.0,\"a,b\",,370.5\n"));
        assert!(may_need_escape(b"5,=HYPERLINK(1),x\n"));
        assert!(may_need_escape(b"5,\"@SUM(1,2)\",x\n"));
        assert!(may_need_escape(b"-3,x\n"), "a negative number: checked (and left alone) by escape_cell");
        assert!(may_need_escape(b"5,'quoted\n"));
        let mut r = sample();
        r.label = "=cmd|' /C calc'!A0".into();
        assert!(r.to_record().contains("'=cmd"), "{}", r.to_record());
        r.label = "nightly-7".into();
        assert!(r.to_record().contains(",nightly-7,"), "{}", r.to_record());
    }

    #[test]
    fn formula_like_text_is_escaped_and_read_back_exactly() {
        for s in
            ["=HYPERLINK(\"x\")", "+cmd", "-2+3", "@SUM(A1)", "\tx", "'=x", "''@y", "'plain", "plain", "-5", "1e3", ""]
        {
            let e = escape_cell(s);
            assert_eq!(unescape_cell(&e), s, "{s:?} -> {e:?}");
            let risky =
                e.trim_start_matches('\'').starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err();
            assert!(!risky || e.starts_with('\''), "{s:?} written as {e:?}");
        }
        // Numbers, negative ones included, are written as they are.
        assert_eq!(escape_cell("-1.5"), "-1.5");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        let row = Row {
            schema_version: SCHEMA_VERSION,
            label: "=HYPERLINK(\"http://x\")".into(),
            note: "@evil".into(),
            status: crate::results::Status::Ok,
            ..Default::default()
        };
        append_rows(&p, std::slice::from_ref(&row)).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("'=HYPERLINK") && text.contains(",'@evil,"), "{text}");
        assert_eq!(read_rows(&p).unwrap()[0], row);
    }
}
