//! `edit_lines`: hash-anchored edits (SPEC §7.1). Every anchor, and every line inside a range,
//! is checked against the file before anything is written; one stale anchor rejects the batch.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use schemars::JsonSchema;
use serde::Deserialize;

use super::hashline::{
    line_content, line_hash, parse_anchor, push_formatted_line, strip_echoed_prefixes,
};
use super::write_file::write_atomically;
use super::{
    Effect, ReadLedger, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError, ToolOutput,
};

/// Lines of the current file shown around each stale anchor.
const STALE_CONTEXT: usize = 2;
/// Lines shown around each edited region in the result.
const RESULT_CONTEXT: usize = 1;
/// Caps on the lines a report displays, so one huge range cannot flood the context.
const MAX_STALE_LINES_SHOWN: usize = 60;
const MAX_RESULT_LINES_SHOWN: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditLinesArgs {
    /// Path relative to the workspace.
    pub path: String,
    /// Applied together; anchors refer to the file as last read.
    pub edits: Vec<LineEdit>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LineEdit {
    /// Anchor line number.
    pub line: usize,
    /// Anchor hash.
    pub hash: String,
    /// Lines to write (omit for delete).
    pub new_text: Option<String>,
    /// Default replace.
    #[serde(default)]
    pub op: EditOp,
    /// Last line of a range to replace or delete.
    pub end_line: Option<usize>,
    /// Hash of end_line.
    pub end_hash: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EditOp {
    #[default]
    Replace,
    InsertAfter,
    InsertBefore,
    Delete,
}

impl ToolArgs for EditLinesArgs {
    fn touched_paths(&self) -> Vec<PathBuf> {
        vec![PathBuf::from(&self.path)]
    }
}

pub struct EditLines;

impl Tool for EditLines {
    type Args = EditLinesArgs;
    type Output = ToolOutput;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit_lines",
            description: "Edit a file at LINE:HASH anchors from read_file. op: replace (default), \
                          insert_after, insert_before, delete; end_line/end_hash make a range. \
                          Batch a file's edits in one call: all apply or none.",
            effect: Effect::Workspace,
        }
    }

    async fn call(
        &self,
        args: EditLinesArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let path = context.workspace.resolve(&args.path)?;
        let shown_as = context.workspace.display(&path);
        let reads = Arc::clone(&context.reads);
        tokio::task::spawn_blocking(move || edit_file(&path, &shown_as, &args.edits, &reads))
            .await
            .map_err(|error| ToolError::new(format!("edit_lines stopped unexpectedly: {error}")))?
    }
}

/// One edit as a splice of the original line list: remove `remove` lines at index `start`, put
/// `new_lines` there.
#[derive(Debug)]
struct Splice {
    edit_number: usize,
    op: EditOp,
    first_line: usize,
    last_line: usize,
    start: usize,
    remove: usize,
    new_lines: Vec<String>,
}

impl Splice {
    fn describe(&self) -> String {
        let span = line_span(self.first_line, self.last_line);
        match self.op {
            EditOp::Replace => format!("replaces {span}"),
            EditOp::Delete => format!("deletes {span}"),
            EditOp::InsertAfter => format!("inserts after {span}"),
            EditOp::InsertBefore => format!("inserts before {span}"),
        }
    }

    fn summary(&self) -> String {
        let span = line_span(self.first_line, self.last_line);
        let count = line_count(self.new_lines.len());
        match self.op {
            EditOp::Replace => format!("replaced {span} with {count}"),
            EditOp::Delete => format!("deleted {span}"),
            EditOp::InsertAfter => format!("inserted {count} after {span}"),
            EditOp::InsertBefore => format!("inserted {count} before {span}"),
        }
    }
}

/// A line of the file being edited: untouched lines keep their exact bytes, ending included.
#[derive(Debug, Clone)]
struct FileLine<'a> {
    content: Cow<'a, str>,
    ending: &'a str,
}

fn edit_file(
    path: &Path,
    shown_as: &str,
    edits: &[LineEdit],
    reads: &Mutex<ReadLedger>,
) -> Result<ToolOutput, ToolError> {
    if edits.is_empty() {
        return Err(ToolError::new(
            "edits is empty: give at least one {line, hash, new_text}",
        ));
    }
    let original = read_text(path, shown_as)?;
    let lines = split_lines(&original);
    let mut splices = edits
        .iter()
        .enumerate()
        .map(|(index, edit)| plan_splice(index + 1, edit, lines.len()))
        .collect::<Result<Vec<_>, _>>()?;

    {
        let mut ledger = reads.lock().unwrap_or_else(PoisonError::into_inner);
        let stale = find_stale(edits, &lines, path, &ledger);
        if !stale.is_empty() {
            return Err(stale_error(shown_as, path, &stale, &lines, &mut ledger));
        }
    }

    splices.sort_by_key(|splice| (splice.start, splice.remove));
    check_overlaps(&splices)?;

    let line_ending = lines
        .iter()
        .map(|line| line.ending)
        .find(|ending| ending.ends_with('\n'))
        .unwrap_or("\n");
    let mut edited = lines.clone();
    for splice in splices.iter().rev() {
        let replacement = splice.new_lines.iter().map(|content| FileLine {
            content: Cow::Borrowed(content.as_str()),
            ending: line_ending,
        });
        edited.splice(splice.start..splice.start + splice.remove, replacement);
    }
    let ends_with_newline = original.ends_with('\n');
    let last_index = edited.len().saturating_sub(1);
    for (index, line) in edited.iter_mut().enumerate() {
        let terminated = line.ending.ends_with('\n');
        if index < last_index && !terminated {
            line.ending = line_ending;
        }
        if index == last_index && terminated && !ends_with_newline {
            line.ending = "";
        }
    }
    let new_text: String = edited
        .iter()
        .flat_map(|line| [line.content.as_ref(), line.ending])
        .collect();
    if new_text == original {
        return Ok(ToolOutput::no_change(format!(
            "No change: the new text equals what `{shown_as}` already holds; nothing was written."
        )));
    }
    write_atomically(path, new_text.as_bytes()).map_err(|error| {
        ToolError::new(format!(
            "could not write `{shown_as}`: {error}; the file is unchanged"
        ))
    })?;

    let mut ledger = reads.lock().unwrap_or_else(PoisonError::into_inner);
    ledger.forget(path);
    Ok(success_report(shown_as, path, &splices, &edited, &mut ledger).into())
}

fn read_text(path: &Path, shown_as: &str) -> Result<String, ToolError> {
    let bytes = std::fs::read(path).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound => ToolError::new(format!(
            "`{shown_as}` does not exist: edit_lines changes existing files (check the path, or \
             create the file with write_file)"
        )),
        io::ErrorKind::IsADirectory => ToolError::new(format!(
            "`{shown_as}` is a directory: edit_lines changes files"
        )),
        _ => ToolError::new(format!("cannot read `{shown_as}`: {error}")),
    })?;
    if bytes.contains(&0) {
        return Err(ToolError::new(format!(
            "`{shown_as}` is a binary file: edit_lines changes text files only"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::new(format!(
            "`{shown_as}` is not valid UTF-8: edit_lines would have to change bytes it cannot \
             show you; use bash (sed, perl) instead"
        ))
    })
}

fn split_lines(text: &str) -> Vec<FileLine<'_>> {
    text.split_inclusive('\n')
        .map(|line| {
            let content = line_content(line);
            FileLine {
                content: Cow::Borrowed(content),
                ending: &line[content.len()..],
            }
        })
        .collect()
}

/// Checks an edit's shape (not yet its anchors) and turns it into a splice.
fn plan_splice(
    edit_number: usize,
    edit: &LineEdit,
    total_lines: usize,
) -> Result<Splice, ToolError> {
    let problem = |message: String| {
        ToolError::new(format!(
            "edit {edit_number}: {message}; nothing was written"
        ))
    };
    if edit.line == 0 {
        return Err(problem("line numbers start at 1".to_owned()));
    }
    let last_line = match (edit.end_line, &edit.end_hash) {
        (None, None) => edit.line,
        (Some(_), None) | (None, Some(_)) => {
            return Err(problem(
                "a range needs both end_line and end_hash".to_owned(),
            ));
        }
        (Some(end_line), Some(_)) if end_line < edit.line => {
            return Err(problem(format!(
                "end_line {end_line} comes before line {}",
                edit.line
            )));
        }
        (Some(end_line), Some(_)) => end_line,
    };
    let inserts = matches!(edit.op, EditOp::InsertAfter | EditOp::InsertBefore);
    if inserts && edit.end_line.is_some() {
        return Err(problem(
            "insert_after and insert_before take one anchor, not a range".to_owned(),
        ));
    }
    let new_lines = match (&edit.new_text, edit.op) {
        (_, EditOp::Delete) => Vec::new(),
        (Some(text), _) => text_lines(text),
        (None, _) => {
            return Err(problem(
                "new_text is missing (to remove lines, use op \"delete\")".to_owned(),
            ));
        }
    };
    // Out-of-range anchors are reported with the stale ones; clamp so planning can go on.
    let start = match edit.op {
        EditOp::InsertAfter => edit.line.min(total_lines),
        _ => (edit.line - 1).min(total_lines),
    };
    let remove = match edit.op {
        EditOp::Replace | EditOp::Delete => (last_line - edit.line + 1).min(total_lines - start),
        EditOp::InsertAfter | EditOp::InsertBefore => 0,
    };
    Ok(Splice {
        edit_number,
        op: edit.op,
        first_line: edit.line,
        last_line,
        start,
        remove,
        new_lines,
    })
}

/// The lines of a `new_text`: echoed anchors stripped, one final newline dropped (models end
/// blocks with one), line endings left to the file's style.
fn text_lines(text: &str) -> Vec<String> {
    let text = strip_echoed_prefixes(text);
    let text = text.strip_suffix('\n').unwrap_or(&text);
    text.split('\n')
        .map(|line| line_content(line).to_owned())
        .collect()
}

/// A reason an edit cannot be applied to the file as it is now, and the lines that show why.
struct Stale {
    message: String,
    lines: Vec<usize>,
}

fn find_stale(
    edits: &[LineEdit],
    lines: &[FileLine<'_>],
    path: &Path,
    ledger: &ReadLedger,
) -> Vec<Stale> {
    let mut stale = Vec::new();
    for (index, edit) in edits.iter().enumerate() {
        let edit_number = index + 1;
        let mut anchors = vec![(edit.line, edit.hash.as_str())];
        if let (Some(end_line), Some(end_hash)) = (edit.end_line, &edit.end_hash) {
            anchors.push((end_line, end_hash.as_str()));
        }
        let mut anchors_hold = true;
        for (line, hash) in anchors {
            if let Some(problem) = check_anchor(edit_number, line, hash, lines) {
                stale.push(problem);
                anchors_hold = false;
            }
        }
        let Some(end_line) = edit.end_line.filter(|_| anchors_hold) else {
            continue;
        };
        let changed: Vec<usize> = (edit.line + 1..end_line)
            .filter(|&line| ledger.shown(path, line) != Some(lines[line - 1].content.as_ref()))
            .collect();
        if !changed.is_empty() {
            stale.push(Stale {
                message: format!(
                    "edit {edit_number}: {} inside the range {}-{end_line} differ from what you \
                     last read, or were never shown to you",
                    compress_spans(&changed),
                    edit.line
                ),
                lines: changed,
            });
        }
    }
    stale
}

fn check_anchor(
    edit_number: usize,
    line: usize,
    hash: &str,
    lines: &[FileLine<'_>],
) -> Option<Stale> {
    let total = lines.len();
    if line > total {
        return Some(Stale {
            message: format!(
                "edit {edit_number}: line {line} does not exist (the file has {})",
                line_count(total)
            ),
            lines: (total.saturating_sub(STALE_CONTEXT).max(1)..=total).collect(),
        });
    }
    let given = parse_anchor(hash).map_or_else(|| hash.trim().to_owned(), |anchor| anchor.hash);
    let current = line_hash(&lines[line - 1].content);
    (given != current).then(|| Stale {
        message: format!(
            "edit {edit_number}: line {line} is not the line you read (its hash is now \
             {current}, not {given})"
        ),
        lines: vec![line],
    })
}

fn stale_error(
    shown_as: &str,
    path: &Path,
    stale: &[Stale],
    lines: &[FileLine<'_>],
    ledger: &mut ReadLedger,
) -> ToolError {
    let mut message = format!(
        "Nothing was written to `{shown_as}`: {} stale.\n",
        match stale.len() {
            1 => "1 anchor is".to_owned(),
            count => format!("{count} anchors are"),
        }
    );
    if ledger.changed_since_read(path) {
        let _ = writeln!(
            message,
            "`{shown_as}` changed on disk since you last read it (another program or person edited it)."
        );
    }
    for problem in stale {
        let _ = writeln!(message, "- {}", problem.message);
    }
    let focus = stale
        .iter()
        .flat_map(|problem| problem.lines.iter().copied());
    let windows = windows_around(focus, STALE_CONTEXT, lines.len());
    if !windows.is_empty() {
        message.push_str("Current lines:\n");
        let shown = push_windows(&mut message, &windows, lines, MAX_STALE_LINES_SHOWN);
        ledger.record(path.to_owned(), lines.len(), shown);
    }
    message.push_str(
        "Retry the whole batch with these anchors (read_file the file again if they are not the \
         lines you meant).",
    );
    ToolError::new(message)
}

fn check_overlaps(sorted: &[Splice]) -> Result<(), ToolError> {
    for pair in sorted.windows(2) {
        let [first, second] = pair else { continue };
        let same_insertion_point =
            first.start == second.start && first.remove == 0 && second.remove == 0;
        if second.start < first.start + first.remove || same_insertion_point {
            let (earlier, later) = if first.edit_number < second.edit_number {
                (first, second)
            } else {
                (second, first)
            };
            return Err(ToolError::new(format!(
                "edits {} and {} overlap (edit {} {}, edit {} {}): combine them into one edit; \
                 nothing was written",
                earlier.edit_number,
                later.edit_number,
                earlier.edit_number,
                earlier.describe(),
                later.edit_number,
                later.describe()
            )));
        }
    }
    Ok(())
}

fn success_report(
    shown_as: &str,
    path: &Path,
    sorted: &[Splice],
    edited: &[FileLine<'_>],
    ledger: &mut ReadLedger,
) -> String {
    let mut in_call_order: Vec<&Splice> = sorted.iter().collect();
    in_call_order.sort_by_key(|splice| splice.edit_number);
    let summaries: Vec<String> = in_call_order
        .iter()
        .map(|splice| splice.summary())
        .collect();
    let mut report = format!("Edited `{shown_as}`: {}.", summaries.join("; "));
    if edited.is_empty() {
        report.push_str(" The file is now empty.");
        return report;
    }

    // Each edited region in the new numbering (1-based), with the lines just around it.
    let mut shift = 0isize;
    let mut focus = Vec::new();
    for splice in sorted {
        let new_start = splice.start.saturating_add_signed(shift);
        focus.extend(new_start + 1..=new_start + splice.new_lines.len());
        if splice.new_lines.is_empty() {
            focus.extend([new_start, new_start + 1]);
        }
        shift += splice.new_lines.len() as isize - splice.remove as isize;
    }
    let focus = focus
        .into_iter()
        .filter(|&line| line >= 1 && line <= edited.len());
    let windows = windows_around(focus, RESULT_CONTEXT, edited.len());
    report.push_str(" Those lines now read:\n");
    let shown = push_windows(&mut report, &windows, edited, MAX_RESULT_LINES_SHOWN);
    ledger.record(path.to_owned(), edited.len(), shown);
    if report.ends_with('\n') {
        report.pop();
    }
    report
}

/// Merged inclusive line ranges covering each focus line with `context` lines either side.
fn windows_around(
    focus: impl Iterator<Item = usize>,
    context: usize,
    total: usize,
) -> Vec<(usize, usize)> {
    let focus: BTreeSet<usize> = focus.collect();
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for line in focus {
        let first = line.saturating_sub(context).max(1);
        let last = (line + context).min(total);
        match windows.last_mut() {
            Some((_, previous_last)) if first <= *previous_last + 1 => {
                *previous_last = (*previous_last).max(last);
            }
            _ => windows.push((first, last)),
        }
    }
    windows
}

/// Appends the windows as `LINE:HASH|content` lines, `...` between them, at most `cap` lines.
/// Returns what was displayed, for the read ledger.
fn push_windows(
    out: &mut String,
    windows: &[(usize, usize)],
    lines: &[FileLine<'_>],
    cap: usize,
) -> Vec<(usize, String)> {
    let mut shown = Vec::new();
    for (index, &(first, last)) in windows.iter().enumerate() {
        if index > 0 {
            out.push_str("...\n");
        }
        for number in first..=last {
            if shown.len() == cap {
                let _ = writeln!(
                    out,
                    "[more lines not shown: read_file with offset={number} to see them]"
                );
                return shown;
            }
            let content = lines[number - 1].content.as_ref();
            push_formatted_line(out, number, content);
            out.push('\n');
            shown.push((number, content.to_owned()));
        }
    }
    shown
}

fn line_span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

fn line_count(count: usize) -> String {
    if count == 1 {
        "1 line".to_owned()
    } else {
        format!("{count} lines")
    }
}

/// `[3, 4, 5, 9]` as `lines 3-5, 9`.
fn compress_spans(sorted_lines: &[usize]) -> String {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for &line in sorted_lines {
        match spans.last_mut() {
            Some((_, last)) if *last + 1 == line => *last = line,
            _ => spans.push((line, line)),
        }
    }
    let text: Vec<String> = spans
        .iter()
        .map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        })
        .collect();
    let noun = if sorted_lines.len() == 1 {
        "line"
    } else {
        "lines"
    };
    format!("{noun} {}", text.join(", "))
}

#[cfg(test)]
#[path = "edit_lines_props.rs"]
mod props;

#[cfg(test)]
#[path = "edit_lines_tests.rs"]
mod tests;
