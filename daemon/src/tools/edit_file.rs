//! `edit_file`: exact-string replacement (SPEC §7). Matching forgives the two differences a model
//! cannot see in displayed text, CRLF against LF and a no-break space against a space; what is
//! written keeps the file's own line endings.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use schemars::JsonSchema;
use serde::Deserialize;

use super::write_file::write_atomically;
use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError, ToolOutput};

const NBSP: char = '\u{a0}';
/// Candidate lines named when a string is not found.
const MAX_CANDIDATES: usize = 3;
/// Below this similarity a line is no hint at all.
const MIN_SIMILARITY: f64 = 0.5;
/// Lines of the best candidate shown, for a multi-line `old_string`.
const MAX_CANDIDATE_BLOCK: usize = 6;
/// Line numbers listed for an ambiguous match.
const MAX_MATCH_LINES_LISTED: usize = 10;
/// Lines longer than this are compared by their start only, to keep scoring linear in the file.
const MAX_SCORED_CHARS: usize = 300;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// Path relative to the workspace.
    pub path: String,
    /// Exact text to replace; must be unique unless replace_all.
    pub old_string: Option<String>,
    pub new_string: Option<String>,
    /// Replace every occurrence.
    pub replace_all: Option<bool>,
    /// Instead of old_string/new_string: several, applied in order.
    pub edits: Option<Vec<Replacement>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Replacement {
    pub old_string: String,
    pub new_string: String,
    pub replace_all: Option<bool>,
}

impl ToolArgs for EditFileArgs {
    fn touched_paths(&self) -> Vec<PathBuf> {
        vec![PathBuf::from(&self.path)]
    }
}

impl EditFileArgs {
    fn replacements(self) -> Result<Vec<Replacement>, ToolError> {
        match (self.old_string, self.new_string, self.edits) {
            (None, None, Some(edits)) if edits.is_empty() => Err(ToolError::new(
                "edits is empty: give at least one {old_string, new_string}",
            )),
            (None, None, Some(edits)) => Ok(edits),
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => Err(ToolError::new(
                "give either old_string and new_string, or edits, not both",
            )),
            (Some(old_string), Some(new_string), None) => Ok(vec![Replacement {
                old_string,
                new_string,
                replace_all: self.replace_all,
            }]),
            (Some(_), None, None) => Err(ToolError::new(
                "new_string is missing: give the replacement text (\"\" deletes old_string)",
            )),
            (None, _, None) => Err(ToolError::new(
                "old_string is missing: give the exact text to replace and new_string (or \
                 edits: [{old_string, new_string}])",
            )),
        }
    }
}

pub struct EditFile;

impl Tool for EditFile {
    type Args = EditFileArgs;
    type Output = ToolOutput;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit_file",
            description: "Replace exact text in a file. For several changes to one file use \
                          edits: applied in order, all or none.",
            effect: Effect::Workspace,
        }
    }

    async fn call(
        &self,
        args: EditFileArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let path = context.workspace.resolve(&args.path)?;
        let shown_as = context.workspace.display(&path);
        let replacements = args.replacements()?;
        let target = path.clone();
        let result = tokio::task::spawn_blocking(move || edit(&target, &shown_as, &replacements))
            .await
            .map_err(|error| ToolError::new(format!("edit_file stopped unexpectedly: {error}")))?;
        if result.is_ok() {
            // Whatever read_file showed of the old content no longer anchors anything.
            context
                .reads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .forget(&path);
        }
        result
    }
}

fn edit(
    path: &Path,
    shown_as: &str,
    replacements: &[Replacement],
) -> Result<ToolOutput, ToolError> {
    let original = read_text(path, shown_as)?;
    let style = Style::of(&original);
    let mut text = original.clone();
    let mut applied: Vec<Vec<usize>> = Vec::with_capacity(replacements.len());
    for (index, replacement) in replacements.iter().enumerate() {
        let which = if replacements.len() == 1 {
            String::new()
        } else {
            format!("edit {} of {}: ", index + 1, replacements.len())
        };
        let (edited, lines) = replace(&text, replacement, style, shown_as)
            .map_err(|message| ToolError::new(format!("{which}{message}; nothing was written")))?;
        text = edited;
        applied.push(lines);
    }
    if text == original {
        return Ok(ToolOutput::no_change(format!(
            "No change: the replacements leave `{shown_as}` as it was; nothing was written."
        )));
    }
    write_atomically(path, text.as_bytes()).map_err(|error| {
        ToolError::new(format!(
            "could not write `{shown_as}`: {error}; the file is unchanged"
        ))
    })?;
    Ok(report(shown_as, &applied).into())
}

fn read_text(path: &Path, shown_as: &str) -> Result<String, ToolError> {
    let bytes = std::fs::read(path).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound => ToolError::new(format!(
            "`{shown_as}` does not exist: check the path, or create the file with write_file"
        )),
        io::ErrorKind::IsADirectory => ToolError::new(format!(
            "`{shown_as}` is a directory: edit_file changes files"
        )),
        _ => ToolError::new(format!("cannot read `{shown_as}`: {error}")),
    })?;
    if bytes.contains(&0) {
        return Err(ToolError::new(format!(
            "`{shown_as}` is a binary file: edit_file changes text files only"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::new(format!(
            "`{shown_as}` is not valid UTF-8: change it with bash (sed, perl) instead"
        ))
    })
}

/// How the file writes what matching ignores.
#[derive(Debug, Clone, Copy)]
struct Style {
    crlf: bool,
    /// A file without no-break spaces gets none from the model either: one in `new_string` is
    /// almost always a copy artefact.
    keeps_nbsp: bool,
}

impl Style {
    fn of(text: &str) -> Self {
        Self {
            crlf: text
                .find('\n')
                .is_some_and(|newline| text[..newline].ends_with('\r')),
            keeps_nbsp: text.contains(NBSP),
        }
    }

    fn apply(self, new_string: &str) -> String {
        let mut text = new_string.replace("\r\n", "\n");
        if !self.keeps_nbsp {
            text = text.replace(NBSP, " ");
        }
        if self.crlf {
            text = text.replace('\n', "\r\n");
        }
        text
    }
}

/// Text as matching sees it: CRLF as LF and NBSP as a space, with, for each of its bytes, the
/// offset in the original where that byte came from (and one more entry for the end), so that a
/// match maps back to exact original bytes.
struct Normalised {
    text: String,
    origin: Vec<usize>,
}

impl Normalised {
    fn new(original: &str) -> Self {
        let mut text = String::with_capacity(original.len());
        let mut origin = Vec::with_capacity(original.len() + 1);
        let mut chars = original.char_indices().peekable();
        while let Some((offset, character)) = chars.next() {
            let normal = match character {
                '\r' if chars.peek().is_some_and(|(_, next)| *next == '\n') => {
                    chars.next();
                    '\n'
                }
                NBSP => ' ',
                other => other,
            };
            text.push(normal);
            origin.extend((0..normal.len_utf8()).map(|byte| offset + byte));
        }
        origin.push(original.len());
        Self { text, origin }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count() + 1
    }
}

/// One replacement on the current text: the new text and the lines where replacements begin in
/// it. The error is a message without the batch context.
fn replace(
    text: &str,
    replacement: &Replacement,
    style: Style,
    shown_as: &str,
) -> Result<(String, Vec<usize>), String> {
    let needle = Normalised::new(&replacement.old_string).text;
    if needle.is_empty() {
        return Err(
            "old_string is empty: give the exact text to replace (to add text, include a \
             neighbouring line in old_string and new_string; to create a file, use write_file)"
                .to_owned(),
        );
    }
    if replacement.old_string == replacement.new_string {
        return Err(
            "old_string and new_string are the same: there is nothing to change".to_owned(),
        );
    }
    let haystack = Normalised::new(text);
    let found: Vec<usize> = haystack
        .text
        .match_indices(needle.as_str())
        .map(|(offset, _)| offset)
        .collect();
    // Uniqueness counts overlapping occurrences too: `}\n}` is in `}\n}\n}` twice, and
    // picking the first would edit a place the model may not have meant.
    let every = overlapping_occurrences(&haystack.text, &needle);
    match every.len() {
        0 => return Err(not_found(&haystack.text, &needle, shown_as)),
        1 => {}
        count if !replacement.replace_all.unwrap_or(false) => {
            let lines: Vec<usize> = every
                .iter()
                .map(|offset| haystack.line_of(*offset))
                .collect();
            return Err(format!(
                "old_string matches {count} places in `{shown_as}` (lines {}): include more \
                 surrounding lines to make it unique, or set replace_all to replace every one",
                list_lines(&lines)
            ));
        }
        _ => {}
    }
    let new_text = style.apply(&replacement.new_string);
    let mut edited = String::with_capacity(text.len() + found.len() * new_text.len());
    let mut lines = Vec::with_capacity(found.len());
    let mut kept_from = 0;
    for offset in found {
        let start = haystack.origin[offset];
        let end = haystack.origin[offset + needle.len()];
        edited.push_str(&text[kept_from..start]);
        lines.push(edited.matches('\n').count() + 1);
        edited.push_str(&new_text);
        kept_from = end;
    }
    edited.push_str(&text[kept_from..]);
    Ok((edited, lines))
}

/// Every offset at which `needle` starts, overlapping ones included.
fn overlapping_occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut from = 0;
    while let Some(found) = haystack[from..].find(needle) {
        let offset = from + found;
        offsets.push(offset);
        let step = haystack[offset..].chars().next().map_or(1, char::len_utf8);
        from = offset + step;
    }
    offsets
}

/// The not-found message, naming the lines most like the first line of `old_string`, which is
/// usually where a model's copy went wrong or where the text moved.
fn not_found(text: &str, needle: &str, shown_as: &str) -> String {
    let mut message = format!("old_string was not found in `{shown_as}`");
    let Some(first) = needle.lines().map(str::trim).find(|line| !line.is_empty()) else {
        message.push_str(": it is only whitespace; give the text to replace");
        return message;
    };
    let file_lines: Vec<&str> = text.lines().collect();
    let wanted = Bigrams::of(first);
    let mut scored: Vec<(f64, usize)> = file_lines
        .iter()
        .enumerate()
        .map(|(index, line)| (wanted.similarity(&Bigrams::of(line.trim())), index))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .collect();
    scored.sort_by(|(a_score, a_index), (b_score, b_index)| {
        b_score.total_cmp(a_score).then(a_index.cmp(b_index))
    });
    scored.truncate(MAX_CANDIDATES);
    if scored.is_empty() {
        let _ = write!(
            message,
            ". No line resembles its first line `{first}`: read the file to find the text"
        );
        return message;
    }
    message.push_str(". Lines most like its first line:");
    // The best candidate shows as many lines as old_string has, so the model sees what the file
    // really holds there; the others show their one line, unless that block showed it already.
    let best = scored[0].1;
    let block = best..best + needle.lines().count().clamp(1, MAX_CANDIDATE_BLOCK);
    let others = scored[1..]
        .iter()
        .map(|(_, index)| *index..*index + 1)
        .filter(|line| !block.contains(&line.start));
    for range in std::iter::once(block.clone()).chain(others) {
        for (index, line) in file_lines
            .iter()
            .enumerate()
            .take(range.end)
            .skip(range.start)
        {
            let _ = write!(message, "\n{}| {line}", index + 1);
        }
    }
    message.push_str("\nCopy the text exactly as the file has it, then retry");
    message
}

/// A line's character pairs, sorted, for a Dice coefficient: cheap enough to score every line
/// of a large file, and forgiving of the small differences a near-miss copy has.
struct Bigrams {
    text: String,
    pairs: Vec<(char, char)>,
}

impl Bigrams {
    fn of(line: &str) -> Self {
        let chars: Vec<char> = line.chars().take(MAX_SCORED_CHARS).collect();
        let mut pairs: Vec<(char, char)> =
            chars.windows(2).map(|pair| (pair[0], pair[1])).collect();
        pairs.sort_unstable();
        Self {
            text: chars.into_iter().collect(),
            pairs,
        }
    }

    fn similarity(&self, other: &Self) -> f64 {
        if self.pairs.is_empty() || other.pairs.is_empty() {
            return if self.text == other.text && !self.text.is_empty() {
                1.0
            } else {
                0.0
            };
        }
        let (mut left, mut right, mut shared) = (0, 0, 0);
        while left < self.pairs.len() && right < other.pairs.len() {
            match self.pairs[left].cmp(&other.pairs[right]) {
                std::cmp::Ordering::Less => left += 1,
                std::cmp::Ordering::Greater => right += 1,
                std::cmp::Ordering::Equal => {
                    shared += 1;
                    left += 1;
                    right += 1;
                }
            }
        }
        (2 * shared) as f64 / (self.pairs.len() + other.pairs.len()) as f64
    }
}

fn list_lines(lines: &[usize]) -> String {
    let mut listed: Vec<String> = lines
        .iter()
        .take(MAX_MATCH_LINES_LISTED)
        .map(usize::to_string)
        .collect();
    if lines.len() > MAX_MATCH_LINES_LISTED {
        listed.push("…".to_owned());
    }
    listed.join(", ")
}

fn report(shown_as: &str, applied: &[Vec<usize>]) -> String {
    let describe = |lines: &[usize]| match lines {
        [line] => format!("1 replacement at line {line}"),
        _ => format!(
            "{} replacements at lines {}",
            lines.len(),
            list_lines(lines)
        ),
    };
    match applied {
        [only] => format!("Edited `{shown_as}`: {}.", describe(only)),
        _ => {
            let parts: Vec<String> = applied
                .iter()
                .enumerate()
                .map(|(index, lines)| format!("edit {}: {}", index + 1, describe(lines)))
                .collect();
            format!("Edited `{shown_as}`: {}.", parts.join("; "))
        }
    }
}

#[cfg(test)]
#[path = "edit_file_tests.rs"]
mod tests;
