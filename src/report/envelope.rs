//! The one JSON document every command's `--format json` prints, made here
//! and nowhere else (docs/json.md; its schema is docs/json.schema.json):
//!
//! ```text
//! {"tables": [{"title": …, "rows": [{column: value}], "notes": […]}],
//!  "rows":   [results rows, the columns of `--out`],
//!  "notes":  ["what the command says besides its tables"],
//!  "<own>":  what one command adds, under its own name}
//! ```
//!
//! The three lists are always there, empty when a command has none of them,
//! so that a script reading `report` and `run` reads one shape. A command
//! adds at most one key of its own: `run` (step times and losses), `search`
//! (infer's largest load), `predictions`, `history`, `traces`, `info`,
//! `data_bench`. `allreduce` alone prints nccl-tests' document instead, so
//! that what reads nccl-tests' output reads ours.
use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value};

use super::export::{Exporter, JsonExporter, Table};

/// The keys every document has; a command's own key is none of them.
pub(crate) const KEYS: [&str; 3] = ["tables", "rows", "notes"];

/// A `--format json` document, built up and then printed once.
#[derive(Default)]
pub(crate) struct Envelope {
    tables: Vec<Value>,
    rows: Vec<Value>,
    notes: Vec<String>,
    own: Option<(&'static str, Value)>,
}

impl Envelope {
    pub(crate) fn new() -> Envelope {
        Envelope::default()
    }

    /// Tables, each as `{"title", "rows", "notes"}` with raw values.
    pub(crate) fn tables(mut self, tables: &[Table]) -> Result<Envelope> {
        for t in tables {
            self.tables.push(serde_json::from_slice(&JsonExporter.export(t)?)?);
        }
        Ok(self)
    }

    /// Results rows (or anything that serializes as one object per row).
    pub(crate) fn rows<T: Serialize>(mut self, rows: &[T]) -> Result<Envelope> {
        for r in rows {
            self.rows.push(serde_json::to_value(r)?);
        }
        Ok(self)
    }

    pub(crate) fn notes(mut self, notes: impl IntoIterator<Item = String>) -> Envelope {
        self.notes.extend(notes);
        self
    }

    /// The command's own key: one per document, never one of `KEYS`.
    pub(crate) fn own(mut self, key: &'static str, value: impl Serialize) -> Result<Envelope> {
        assert!(!KEYS.contains(&key) && self.own.is_none(), "one own key per document, not {key}");
        self.own = Some((key, serde_json::to_value(value)?));
        Ok(self)
    }

    pub(crate) fn value(self) -> Value {
        let mut m = Map::new();
        m.insert("tables".into(), Value::Array(self.tables));
        m.insert("rows".into(), Value::Array(self.rows));
        m.insert("notes".into(), self.notes.into());
        if let Some((k, v)) = self.own {
            m.insert(k.into(), v);
        }
        Value::Object(m)
    }

    /// The document, indented, with a final newline.
    pub(crate) fn bytes(self) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(&self.value())?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Prints the document to stdout (a closed pipe is no error).
    pub(crate) fn print(self) -> Result<()> {
        super::pipeline::print(&self.bytes()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::{Cell, Column};

    #[test]
    fn every_document_has_the_three_lists_and_at_most_one_key_of_its_own() {
        let bare = Envelope::new().value();
        assert_eq!(bare, serde_json::json!({"tables": [], "rows": [], "notes": []}));
        let t = Table {
            title: "t".into(),
            columns: vec![Column::num("n", "n")],
            rows: vec![vec![Cell::num(2.0, "2")]],
            notes: vec![],
        };
        let v = Envelope::new()
            .tables(&[t])
            .unwrap()
            .rows(&[serde_json::json!({"status": "ok"})])
            .unwrap()
            .notes(["a note".to_string()])
            .own("run", serde_json::json!({"losses": [1.0]}))
            .unwrap()
            .value();
        assert_eq!(v["tables"][0]["rows"][0]["n"], 2);
        assert_eq!((v["rows"][0]["status"].as_str(), v["notes"][0].as_str()), (Some("ok"), Some("a note")));
        assert_eq!(v["run"]["losses"][0], 1.0);
        assert_eq!(v.as_object().unwrap().len(), 4);
    }

    #[test]
    #[should_panic(expected = "one own key")]
    fn a_second_own_key_is_a_bug() {
        let _ = Envelope::new().own("run", 1).unwrap().own("search", 2);
    }
}
