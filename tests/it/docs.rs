//! Every gpubench command line in README.md and docs/ is one this gpubench
//! takes: parsed and configured by `gpubench validate` (with 8 GPUs assumed
//! present), so that a renamed or retired flag cannot linger in the docs.
//! Output blocks (fenced as `text`) are not command lines.
use super::common::{bin, stderr};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The documentation files: README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// The gpubench invocations in `text`'s code blocks (not `text` ones), each
/// joined across `\` continuations and cut at the first shell operator.
fn command_lines(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut fence: Option<bool> = None; // Some(is a command block)
    let mut pending = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(info) = t.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(!matches!(info.trim(), "text" | "json" | "csv" | "yaml" | "toml" | "rust")),
            };
            continue;
        }
        if fence != Some(true) {
            continue;
        }
        let t = t.strip_prefix("$ ").unwrap_or(t);
        if pending.is_empty() && !is_gpubench(t) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(head) => pending += &format!("{} ", head.trim()),
            None => {
                pending += t;
                out.push(std::mem::take(&mut pending));
            }
        }
    }
    out
}

fn is_gpubench(t: &str) -> bool {
    let first = t.split_whitespace().next().unwrap_or("");
    matches!(first, "gpubench" | "scripts/gpubench" | "target/release/gpubench" | "./target/release/gpubench")
}

/// Shell words up to the first operator or comment, quotes removed.
fn words(line: &str) -> Vec<String> {
    let mut v = vec![];
    let mut w = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => w.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '|' | '>' | '<' | ';' | '&' | '#') if w.is_empty() && !any => break,
            (None, c) if c.is_whitespace() => {
                if !w.is_empty() || any {
                    v.push(std::mem::take(&mut w));
                    any = false;
                }
            }
            (None, c) => w.push(c),
        }
    }
    if !w.is_empty() || any {
        v.push(w);
    }
    v
}

#[test]
fn the_docs_split_their_commands_as_a_shell_does() {
    let text = "```bash\n$ gpubench run --cpu --label 'box A' \\\n   --steps 5 | tee x # c\n```\n```text\ngpubench run --bogus\n```\n";
    let lines = command_lines(text);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(words(&lines[0]), ["gpubench", "run", "--cpu", "--label", "box A", "--steps", "5"]);
}

#[test]
fn every_documented_command_line_is_taken() {
    let mut checked = 0;
    let mut problems = vec![];
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in command_lines(&text) {
            let w = words(&line);
            // A line with a shell variable or placeholder is a pattern, not a command.
            if w.iter().any(|a| a.contains('$') || a.contains('…') || a.contains("...")) || w.len() < 2 {
                continue;
            }
            let o = Command::new(bin()).args(["validate", "--assume-gpus", "8"]).args(&w[1..]).output().unwrap();
            checked += 1;
            if !o.status.success() {
                problems.push(format!("{}: {line}\n    {}", page.display(), stderr(&o).trim()));
            }
        }
    }
    assert!(checked >= 30, "only {checked} command lines found in README.md and docs/");
    assert!(problems.is_empty(), "{} of {checked} documented lines refused:\n{}", problems.len(), problems.join("\n"));
}
