//! Property tests of the hash-anchored edit applier, standing in for a fuzz target: arbitrary
//! batches of edits against arbitrary files never panic; a rejected batch leaves the file's bytes
//! as they were; and whether a batch applies, and what the file then holds, is what a reference
//! model of SPEC §7.1 says. `PROPTEST_CASES` sets how many cases each property runs.

use std::path::Path;
use std::sync::Mutex;

use crate::proptest_config as config;
use proptest::collection::vec;
use proptest::prelude::*;

use super::{EditOp, LineEdit, edit_file};
use crate::tools::ReadLedger;
use crate::tools::hashline::{line_content, line_hash, parse_anchor};

/// A file as lines of a small alphabet (so lines repeat, as code does), each ended by `\n` or
/// `\r\n`, the last one maybe unterminated.
#[derive(Debug, Clone)]
struct File {
    lines: Vec<String>,
    crlf: Vec<bool>,
    final_newline: bool,
}

impl File {
    fn text(&self) -> String {
        let mut text = String::new();
        for (index, line) in self.lines.iter().enumerate() {
            text.push_str(line);
            let last = index + 1 == self.lines.len();
            if !last || self.final_newline {
                text.push_str(if self.crlf[index] { "\r\n" } else { "\n" });
            }
        }
        text
    }
}

fn file() -> impl Strategy<Value = File> {
    vec(("[ab {}]{0,3}", any::<bool>()), 0..12).prop_flat_map(|lines| {
        let (lines, crlf): (Vec<String>, Vec<bool>) = lines.into_iter().unzip();
        any::<bool>().prop_map(move |final_newline| File {
            lines: lines.clone(),
            crlf: crlf.clone(),
            // An empty last line without a newline would be no line at all.
            final_newline: final_newline || lines.last().is_some_and(String::is_empty),
        })
    })
}

/// How an edit names a line's hash.
#[derive(Debug, Clone)]
enum HashGiven {
    /// The line's real hash, if the line exists.
    Right,
    /// As a displayed anchor, `N:hhh|…`.
    RightAsAnchor,
    Arbitrary(String),
}

#[derive(Debug, Clone)]
struct Edit {
    op: EditOp,
    line: usize,
    hash: HashGiven,
    end: Option<(usize, HashGiven)>,
    /// Half-ranges (an end line without its hash) must be refused.
    end_hash_missing: bool,
    new_text: Option<String>,
}

/// Mostly a line of the file, sometimes just past it, 0, or anything at all.
fn line_number(lines: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 1..=lines.max(1),
        2 => 0..=lines + 2,
        1 => any::<usize>(),
    ]
}

fn hash_given() -> impl Strategy<Value = HashGiven> {
    prop_oneof![
        12 => Just(HashGiven::Right),
        1 => Just(HashGiven::RightAsAnchor),
        1 => "[0-9a-z]{3}|.{0,5}".prop_map(HashGiven::Arbitrary),
    ]
}

fn edit(lines: usize) -> impl Strategy<Value = Edit> {
    (
        op(),
        line_number(lines),
        hash_given(),
        proptest::option::weighted(0.3, (0usize..4, hash_given())),
        proptest::bool::weighted(0.05),
        proptest::option::weighted(0.9, new_text()),
    )
        .prop_map(|(op, line, hash, end, end_hash_missing, new_text)| Edit {
            op,
            line,
            hash,
            end: end.map(|(length, hash)| (line.saturating_add(length), hash)),
            end_hash_missing,
            new_text,
        })
}

/// Lines joined by `\n` or `\r\n`, maybe with a final newline. No `:` or `|`, so no echoed
/// anchor prefix is stripped; a `\r` only before a `\n`, where every reader takes it as the line
/// ending.
fn new_text() -> impl Strategy<Value = String> {
    (vec(("[ab {}]{0,3}", any::<bool>()), 1..4), any::<bool>()).prop_map(
        |(lines, final_newline)| {
            let mut text = String::new();
            let count = lines.len();
            for (index, (line, crlf)) in lines.into_iter().enumerate() {
                text.push_str(&line);
                if index + 1 < count || final_newline {
                    text.push_str(if crlf { "\r\n" } else { "\n" });
                }
            }
            text
        },
    )
}

fn op() -> impl Strategy<Value = EditOp> {
    prop_oneof![
        Just(EditOp::Replace),
        Just(EditOp::Delete),
        Just(EditOp::InsertAfter),
        Just(EditOp::InsertBefore),
    ]
}

fn hash_for(given: &HashGiven, line: usize, lines: &[String]) -> String {
    let real = || {
        line.checked_sub(1)
            .and_then(|index| lines.get(index))
            .map_or_else(|| "zzz".to_owned(), |content| line_hash(content))
    };
    match given {
        HashGiven::Right => real(),
        HashGiven::RightAsAnchor => format!("{line}:{}|whatever", real()),
        HashGiven::Arbitrary(text) => text.clone(),
    }
}

impl Edit {
    fn to_line_edit(&self, lines: &[String]) -> LineEdit {
        LineEdit {
            line: self.line,
            hash: hash_for(&self.hash, self.line, lines),
            new_text: self.new_text.clone(),
            op: self.op,
            end_line: self.end.as_ref().map(|(end, _)| *end),
            end_hash: self
                .end
                .as_ref()
                .filter(|_| !self.end_hash_missing)
                .map(|(end, given)| hash_for(given, *end, lines)),
        }
    }
}

/// Where an accepted edit lands: replaced lines `first..=last` (1-based), or new lines in the
/// gap after line `gap` (0 is before the first line).
#[derive(Debug)]
enum Target {
    Lines { first: usize, last: usize },
    Gap(usize),
}

/// The reference model: the file's lines after the batch, or `None` when the batch must be
/// refused. Written from the rules, not from the implementation.
fn reference(lines: &[String], edits: &[LineEdit]) -> Option<Vec<String>> {
    let anchor_holds = |line: usize, hash: &str| {
        let given = parse_anchor(hash).map_or_else(|| hash.trim().to_owned(), |anchor| anchor.hash);
        (1..=lines.len()).contains(&line) && given == line_hash(&lines[line - 1])
    };
    let mut planned = Vec::new();
    for edit in edits {
        let inserts = matches!(edit.op, EditOp::InsertAfter | EditOp::InsertBefore);
        let last = match (edit.end_line, &edit.end_hash) {
            (None, None) => edit.line,
            (Some(end), Some(hash)) if !inserts && end >= edit.line && anchor_holds(end, hash) => {
                end
            }
            _ => return None,
        };
        if !anchor_holds(edit.line, &edit.hash) {
            return None;
        }
        let new_lines = match (edit.op, &edit.new_text) {
            (EditOp::Delete, _) => Vec::new(),
            (_, Some(text)) => {
                let text = text.strip_suffix('\n').unwrap_or(text);
                text.split('\n')
                    .map(|line| line_content(line).to_owned())
                    .collect()
            }
            (_, None) => return None,
        };
        let target = match edit.op {
            EditOp::Replace | EditOp::Delete => Target::Lines {
                first: edit.line,
                last,
            },
            EditOp::InsertAfter => Target::Gap(edit.line),
            EditOp::InsertBefore => Target::Gap(edit.line - 1),
        };
        planned.push((target, new_lines));
    }
    // Two edits may not touch the same line, nor insert at the same place, nor insert inside a
    // range another replaces; inserting right before or after that range is fine.
    for (index, (first, _)) in planned.iter().enumerate() {
        for (second, _) in &planned[index + 1..] {
            let clash = match (first, second) {
                (Target::Lines { first: a, last: b }, Target::Lines { first: c, last: d }) => {
                    a <= d && c <= b
                }
                (Target::Gap(gap), Target::Gap(other)) => gap == other,
                (Target::Gap(gap), Target::Lines { first, last })
                | (Target::Lines { first, last }, Target::Gap(gap)) => first <= gap && gap < last,
            };
            if clash {
                return None;
            }
        }
    }
    let mut result = Vec::new();
    let gap = |number: usize, result: &mut Vec<String>| {
        for (target, new_lines) in &planned {
            if matches!(target, Target::Gap(at) if *at == number) {
                result.extend(new_lines.iter().cloned());
            }
        }
    };
    gap(0, &mut result);
    for number in 1..=lines.len() {
        let range = planned.iter().find_map(|(target, new_lines)| match target {
            Target::Lines { first, last } if (*first..=*last).contains(&number) => {
                Some((*first, new_lines))
            }
            _ => None,
        });
        match range {
            Some((first, new_lines)) if first == number => result.extend(new_lines.iter().cloned()),
            Some(_) => {}
            None => result.push(lines[number - 1].clone()),
        }
        gap(number, &mut result);
    }
    Some(result)
}

/// The text a file of `lines` holds, with `\n` for every line ending: `["a", ""]` without a
/// final newline is the same file as `["a"]` with one.
fn joined(lines: &[String], final_newline: bool) -> String {
    let mut text = lines.join("\n");
    if final_newline && !lines.is_empty() {
        text.push('\n');
    }
    text
}

fn apply(path: &Path, file: &File, edits: &[LineEdit]) -> Result<String, String> {
    std::fs::write(path, file.text()).unwrap();
    let mut ledger = ReadLedger::default();
    let shown = file
        .lines
        .iter()
        .enumerate()
        .map(|(index, line)| (index + 1, line.clone()));
    ledger.record(path.to_owned(), file.lines.len(), shown);
    edit_file(path, "f.txt", edits, &Mutex::new(ledger))
        .map(|output| output.text)
        .map_err(|error| error.message)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_batch_on_any_file_applies_as_the_reference_model_says(
        (file, edits) in file().prop_flat_map(|file| {
            let lines = file.lines.len();
            (Just(file), vec(edit(lines), 1..4))
        }),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        let edits: Vec<LineEdit> = edits.iter().map(|edit| edit.to_line_edit(&file.lines)).collect();
        let before = file.text();
        let outcome = apply(&path, &file, &edits);
        let after = std::fs::read_to_string(&path).unwrap();
        match reference(&file.lines, &edits) {
            None => {
                prop_assert!(outcome.is_err(), "applied a batch that must be refused: {outcome:?}");
                prop_assert_eq!(&after, &before, "a refused batch changed the file");
            }
            Some(expected) => {
                prop_assert!(outcome.is_ok(), "refused a valid batch: {outcome:?}");
                // Line contents hold no `\r`, so every `\r\n` is a line ending.
                prop_assert_eq!(after.replace("\r\n", "\n"), joined(&expected, file.final_newline));
            }
        }
    }

    #[test]
    fn arbitrary_edits_never_panic(
        content in "(?s).{0,80}",
        edits in vec(
            (op(), any::<usize>(), ".{0,6}", proptest::option::of("(?s).{0,20}"),
             proptest::option::of(any::<usize>()), proptest::option::of(".{0,6}")),
            0..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, &content).unwrap();
        let edits: Vec<LineEdit> = edits
            .into_iter()
            .map(|(op, line, hash, new_text, end_line, end_hash)| LineEdit {
                line,
                hash,
                new_text,
                op,
                end_line,
                end_hash,
            })
            .collect();
        let outcome = edit_file(&path, "f.txt", &edits, &Mutex::new(ReadLedger::default()));
        if outcome.is_err() {
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
        }
    }
}
