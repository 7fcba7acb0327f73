//! `read_file`: a window of a text file, each line anchored as `LINE:HASH|content` (SPEC §7.1).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::sync::PoisonError;

use schemars::JsonSchema;
use serde::Deserialize;

use super::hashline::{line_content, push_anchor_prefix};
use super::{MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

const DEFAULT_LIMIT: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;
const BINARY_PROBE_BYTES: usize = 8 * 1024;
/// Reading a bigger file whole would cost more memory than a look at it is worth.
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Room left under [`MAX_RESULT_BYTES`] for the notes that follow the lines.
const NOTES_RESERVE: usize = 1024;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// Path relative to the workspace.
    pub path: String,
    /// First line to show, 1-based.
    pub offset: Option<usize>,
    /// Number of lines to show (default 2000).
    pub limit: Option<usize>,
}

impl ToolArgs for ReadFileArgs {}

pub struct ReadFile;

/// The description when lines are shown without anchors (`edit_tools: replace`).
pub(super) const PLAIN_DESCRIPTION: &str = "Read a text file. Lines are shown as LINE|content, up \
                                            to 2000 from offset, with a note of what was left out.";

impl Tool for ReadFile {
    type Args = ReadFileArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_file",
            description: "Read a text file. Lines are shown as LINE:HASH|content (LINE:HASH is the \
                          anchor edit_lines takes), up to 2000 from offset, with a note of what \
                          was left out.",
            mutates: false,
        }
    }

    async fn call(&self, args: ReadFileArgs, context: &ToolContext) -> Result<String, ToolError> {
        let window = Window::from_args(&args)?;
        let path = context.workspace.resolve(&args.path)?;
        let shown_as = context.workspace.display(&path);
        let blocking_path = path.clone();
        let anchors = context.edit_tools.anchors_lines();
        let rendered =
            tokio::task::spawn_blocking(move || render(&blocking_path, &shown_as, window, anchors))
                .await
                .map_err(|error| {
                    ToolError::new(format!("read_file stopped unexpectedly: {error}"))
                })??;
        if let Some(total_lines) = rendered.total_lines {
            context
                .reads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(path, total_lines, rendered.shown);
        }
        Ok(rendered.text)
    }
}

#[derive(Debug, Clone, Copy)]
struct Window {
    first_line: usize,
    limit: usize,
}

impl Window {
    fn from_args(args: &ReadFileArgs) -> Result<Self, ToolError> {
        let limit = match args.limit {
            Some(0) => {
                return Err(ToolError::new(
                    "limit must be at least 1 (omit it to read up to 2000 lines)",
                ));
            }
            Some(limit) => limit,
            None => DEFAULT_LIMIT,
        };
        // Models often count from 0; line 0 can only mean the start.
        let first_line = args.offset.unwrap_or(1).max(1);
        Ok(Self { first_line, limit })
    }
}

struct Rendered {
    text: String,
    /// Set when lines were displayed: the file's line count, for the read ledger.
    total_lines: Option<usize>,
    shown: Vec<(usize, String)>,
}

impl Rendered {
    fn note(text: String) -> Self {
        Self {
            text,
            total_lines: None,
            shown: Vec::new(),
        }
    }
}

/// `anchors`: lines as `LINE:HASH|content` for edit_lines, else as `LINE|content`.
fn render(
    path: &Path,
    shown_as: &str,
    window: Window,
    anchors: bool,
) -> Result<Rendered, ToolError> {
    let metadata = std::fs::metadata(path).map_err(|error| read_error(shown_as, &error))?;
    if metadata.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown_as}` is a directory, not a file: list it with ls, then read a file inside it"
        )));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Ok(Rendered::note(format!(
            "`{shown_as}` is too large to read ({}): look at parts of it with grep, or bash \
             (`sed -n '100,200p'`)",
            human_size(metadata.len())
        )));
    }
    let bytes = std::fs::read(path).map_err(|error| read_error(shown_as, &error))?;
    if bytes.is_empty() {
        return Ok(Rendered::note(format!("`{shown_as}` is empty (0 bytes).")));
    }
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return Ok(Rendered::note(format!(
            "`{shown_as}` is a binary file ({}); its content is not shown.",
            human_size(bytes.len() as u64)
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut rendered = render_window(&text, shown_as, window, anchors)?;
    if let Cow::Owned(_) = text {
        rendered.text.push_str(
            "\n[not valid UTF-8: invalid bytes are shown as \u{FFFD}; change this file with bash, \
             not edit_lines]",
        );
    }
    Ok(rendered)
}

fn render_window(
    text: &str,
    shown_as: &str,
    window: Window,
    anchors: bool,
) -> Result<Rendered, ToolError> {
    let budget = MAX_RESULT_BYTES - NOTES_RESERVE;
    let mut lines = text.split_inclusive('\n').peekable();
    let skipped = lines.by_ref().take(window.first_line - 1).count();
    if lines.peek().is_none() {
        return Err(ToolError::new(format!(
            "offset {} is past the end of `{shown_as}`, which has {skipped} lines",
            window.first_line
        )));
    }

    let mut out = String::with_capacity(text.len().min(budget) + 64);
    let mut shown = Vec::new();
    let mut number = skipped;
    while shown.len() < window.limit {
        let Some(&line) = lines.peek() else { break };
        let content = line_content(line);
        let cut_at = cut_position(content);
        let displayed_len = cut_at.unwrap_or(content.len()) + 32;
        if !shown.is_empty() && out.len() + displayed_len > budget {
            break;
        }
        lines.next();
        number += 1;
        if !out.is_empty() {
            out.push('\n');
        }
        if anchors {
            push_anchor_prefix(&mut out, number, line);
        } else {
            let _ = write!(out, "{number}|");
        }
        match cut_at {
            None => out.push_str(content),
            Some(cut_at) => {
                out.push_str(&content[..cut_at]);
                let _ = write!(
                    out,
                    "… [line cut: {} chars in all]",
                    content.chars().count()
                );
            }
        }
        shown.push((number, content.to_owned()));
    }
    let last_shown = number;
    let total_lines = last_shown + lines.count();

    let mut left_out = Vec::new();
    if window.first_line > 1 {
        left_out.push(line_span(1, window.first_line - 1));
    }
    if last_shown < total_lines {
        left_out.push(line_span(last_shown + 1, total_lines));
    }
    if !left_out.is_empty() {
        let _ = write!(
            out,
            "\n[{} of {total_lines} not shown",
            left_out.join(" and ")
        );
        if last_shown < total_lines {
            let _ = write!(
                out,
                ": call read_file with offset={} to continue",
                last_shown + 1
            );
        }
        out.push(']');
    }
    Ok(Rendered {
        text: out,
        total_lines: Some(total_lines),
        shown,
    })
}

/// The byte position where a too-long line is cut for display, if it is too long.
fn cut_position(content: &str) -> Option<usize> {
    // A line of at most MAX_LINE_CHARS bytes has at most that many characters.
    if content.len() <= MAX_LINE_CHARS {
        return None;
    }
    content
        .char_indices()
        .nth(MAX_LINE_CHARS)
        .map(|(position, _)| position)
}

fn line_span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

fn read_error(shown_as: &str, error: &io::Error) -> ToolError {
    if error.kind() == io::ErrorKind::NotFound {
        ToolError::new(format!(
            "`{shown_as}` does not exist: check the path (glob or ls can find the file)"
        ))
    } else {
        ToolError::new(format!("cannot read `{shown_as}`: {error}"))
    }
}

fn human_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = KIB * 1024;
    match bytes {
        0..KIB => format!("{bytes} bytes"),
        KIB..MIB => format!("{:.1} KiB", bytes as f64 / KIB as f64),
        _ => format!("{:.1} MiB", bytes as f64 / MIB as f64),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::Instant;

    use super::*;
    use crate::tools::hashline::{format_line, line_hash};
    use crate::tools::test_context;

    fn args(path: &str, offset: Option<usize>, limit: Option<usize>) -> ReadFileArgs {
        ReadFileArgs {
            path: path.to_owned(),
            offset,
            limit,
        }
    }

    #[allow(clippy::unwrap_used)]
    fn numbered_lines(count: usize) -> String {
        let mut text = String::new();
        for number in 1..=count {
            writeln!(text, "line number {number}").unwrap();
        }
        text
    }

    #[tokio::test]
    async fn without_edit_lines_lines_are_plain_and_long_ones_still_cut() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        fs::write(
            dir.path().join("a.rs"),
            format!("fn main() {{\r\n{long}\n}}"),
        )
        .unwrap();
        let mut context = test_context(dir.path());
        context.edit_tools = crate::tools::EditTools::Replace;

        let output = ReadFile
            .call(args("a.rs", None, None), &context)
            .await
            .unwrap();

        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines[0], "1|fn main() {");
        assert!(lines[1].starts_with("2|xxx"), "{}", lines[1]);
        assert!(
            lines[1].ends_with("[line cut: 2010 chars in all]"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "3|}");
    }

    #[tokio::test]
    async fn shows_every_line_with_its_anchor_and_records_it() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.rs"), "fn main() {\r\n    run();\r\n}").unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("a.rs", None, None), &context)
            .await
            .unwrap();

        let expected = [
            format_line(1, "fn main() {"),
            format_line(2, "    run();"),
            format_line(3, "}"),
        ]
        .join("\n");
        assert_eq!(output, expected);
        let key = context.workspace.root().join("a.rs");
        let reads = context.reads.lock().unwrap();
        assert_eq!(reads.shown(&key, 1), Some("fn main() {"));
        assert_eq!(reads.shown(&key, 3), Some("}"));
        assert_eq!(reads.shown(&key, 4), None);
    }

    #[tokio::test]
    async fn a_window_notes_the_lines_left_out_and_how_to_continue() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("big.txt"), numbered_lines(9000)).unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("big.txt", None, None), &context)
            .await
            .unwrap();

        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), 2001);
        assert_eq!(lines[1999], format_line(2000, "line number 2000"));
        assert_eq!(
            lines[2000],
            "[lines 2001-9000 of 9000 not shown: call read_file with offset=2001 to continue]"
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_range() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), numbered_lines(50)).unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("f.txt", Some(10), Some(3)), &context)
            .await
            .unwrap();

        assert_eq!(
            output,
            [
                format_line(10, "line number 10"),
                format_line(11, "line number 11"),
                format_line(12, "line number 12"),
                "[lines 1-9 and lines 13-50 of 50 not shown: call read_file with offset=13 to \
                 continue]"
                    .to_owned(),
            ]
            .join("\n")
        );
        let key = context.workspace.root().join("f.txt");
        let reads = context.reads.lock().unwrap();
        assert_eq!(reads.shown(&key, 9), None);
        assert_eq!(reads.shown(&key, 11), Some("line number 11"));
    }

    #[tokio::test]
    async fn reading_to_the_end_has_no_continuation() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), numbered_lines(5)).unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("f.txt", Some(4), None), &context)
            .await
            .unwrap();

        assert!(output.ends_with("[lines 1-3 of 5 not shown]"), "{output}");
    }

    #[tokio::test]
    async fn offset_past_the_end_says_how_long_the_file_is() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), numbered_lines(5)).unwrap();
        let context = test_context(dir.path());

        let error = ReadFile
            .call(args("f.txt", Some(6), None), &context)
            .await
            .unwrap_err();

        assert_eq!(
            error.message,
            "offset 6 is past the end of `f.txt`, which has 5 lines"
        );
    }

    #[tokio::test]
    async fn zero_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), "x\n").unwrap();
        let context = test_context(dir.path());
        let error = ReadFile
            .call(args("f.txt", None, Some(0)), &context)
            .await
            .unwrap_err();
        assert!(
            error.message.contains("limit must be at least 1"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut_but_recorded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let long = "é".repeat(5000);
        fs::write(dir.path().join("min.js"), format!("{long}\nshort\n")).unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("min.js", None, None), &context)
            .await
            .unwrap();

        let first = output.lines().next().unwrap();
        let expected = format!(
            "1:{}|{}… [line cut: 5000 chars in all]",
            line_hash(&long),
            "é".repeat(MAX_LINE_CHARS)
        );
        assert_eq!(first, expected);
        let key = context.workspace.root().join("min.js");
        assert_eq!(
            context.reads.lock().unwrap().shown(&key, 1),
            Some(long.as_str())
        );
    }

    #[tokio::test]
    async fn binary_files_get_a_note_instead_of_content() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = b"\x7fELF".to_vec();
        bytes.extend([0u8; 2044]);
        fs::write(dir.path().join("tool"), bytes).unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("tool", None, None), &context)
            .await
            .unwrap();

        assert_eq!(
            output,
            "`tool` is a binary file (2.0 KiB); its content is not shown."
        );
    }

    #[tokio::test]
    async fn empty_files_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("empty.txt"), "").unwrap();
        let context = test_context(dir.path());
        let output = ReadFile
            .call(args("empty.txt", None, None), &context)
            .await
            .unwrap();
        assert_eq!(output, "`empty.txt` is empty (0 bytes).");
    }

    #[tokio::test]
    async fn directories_point_to_ls() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        let context = test_context(dir.path());
        let error = ReadFile
            .call(args("src", None, None), &context)
            .await
            .unwrap_err();
        assert!(error.message.contains("is a directory"), "{error}");
        assert!(error.message.contains("ls"), "{error}");
    }

    #[tokio::test]
    async fn missing_files_and_escapes_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let missing = ReadFile
            .call(args("nope.rs", None, None), &context)
            .await
            .unwrap_err();
        assert!(
            missing.message.contains("`nope.rs` does not exist"),
            "{missing}"
        );
        let escape = ReadFile
            .call(args("/etc/passwd", None, None), &context)
            .await
            .unwrap_err();
        assert!(escape.message.contains("refused"), "{escape}");
    }

    #[tokio::test]
    async fn invalid_utf8_is_shown_lossily_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
        let context = test_context(dir.path());
        let output = ReadFile
            .call(args("latin1.txt", None, None), &context)
            .await
            .unwrap();
        assert!(
            output.starts_with(&format_line(1, "caf\u{FFFD}")),
            "{output}"
        );
        assert!(output.contains("not valid UTF-8"), "{output}");
    }

    #[tokio::test]
    async fn output_stays_under_the_result_bound_and_says_where_to_continue() {
        let dir = tempfile::tempdir().unwrap();
        let line = "x".repeat(200);
        fs::write(
            dir.path().join("wide.txt"),
            format!("{line}\n").repeat(1000),
        )
        .unwrap();
        let context = test_context(dir.path());

        let output = ReadFile
            .call(args("wide.txt", None, None), &context)
            .await
            .unwrap();

        assert!(output.len() <= MAX_RESULT_BYTES, "{}", output.len());
        let shown = output.lines().count() - 1;
        assert!(shown > 200, "{shown}");
        assert!(
            output.ends_with(&format!(
                "of 1000 not shown: call read_file with offset={} to continue]",
                shown + 1
            )),
            "{}",
            output.lines().last().unwrap()
        );
    }

    #[tokio::test]
    async fn a_hundred_thousand_line_file_reads_quickly() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("huge.txt"), numbered_lines(100_000)).unwrap();
        let context = test_context(dir.path());

        let started = Instant::now();
        let output = ReadFile
            .call(args("huge.txt", None, Some(100_000)), &context)
            .await
            .unwrap();
        let elapsed = started.elapsed();

        assert!(
            output.ends_with("continue]"),
            "{}",
            output.lines().last().unwrap()
        );
        // The target is 30 ms in release; an unoptimised test build gets ten times that.
        assert!(elapsed.as_millis() < 300, "{elapsed:?}");
    }
}
