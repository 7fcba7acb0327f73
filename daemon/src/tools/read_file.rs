//! `read_file`: a window of a text file, each line anchored as `LINE:HASH|content` (SPEC §7.1).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::sync::PoisonError;

use schemars::JsonSchema;
use serde::Deserialize;

use super::hashline::{line_content, push_anchor_prefix};
use super::{Effect, MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

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
            effect: Effect::ReadOnly,
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
#[path = "read_file_tests.rs"]
mod tests;
