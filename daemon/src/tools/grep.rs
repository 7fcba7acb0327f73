//! `grep`: regex search on ripgrep's own crates (SPEC §7): a parallel, .gitignore-aware walk,
//! binary files skipped, results in ripgrep's `path:line:text` form, sorted by path.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::glob::{PathGlob, names_hidden, search_root, walker};
use super::{Effect, MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::Workspace;

const DEFAULT_MAX_RESULTS: usize = 100;
/// More results than this never fit in [`MAX_RESULT_BYTES`]; a larger max_results would only
/// make each file's search keep lines that cannot be shown.
const MAX_RESULTS_CAP: usize = 5000;
const MAX_CONTEXT: usize = 20;
/// Longer lines (minified code) are cut, so one match cannot fill the result.
const MAX_LINE_CHARS: usize = 400;
/// Room left under [`MAX_RESULT_BYTES`] for the note that follows the results.
const NOTE_RESERVE: usize = 512;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regex (Rust syntax).
    pub pattern: String,
    /// File or directory (default: workspace root).
    pub path: Option<String>,
    /// Only files matching this glob, e.g. *.rs.
    pub glob: Option<String>,
    pub case_insensitive: Option<bool>,
    /// Lines shown before and after each match.
    pub context: Option<usize>,
    #[serde(default)]
    pub output: OutputMode,
    /// Lines (or files) shown, default 100.
    pub max_results: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    #[default]
    Content,
    Files,
    Count,
}

impl ToolArgs for GrepArgs {}

pub struct Grep;

impl Tool for Grep {
    type Args = GrepArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "grep",
            description: "Search file contents by regex, skipping gitignored, hidden and binary \
                          files. output: content (path:line:text), files, or count per file.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: GrepArgs, context: &ToolContext) -> Result<String, ToolError> {
        let request = Request::new(&args, &context.workspace)?;
        let context = context.clone();
        tokio::task::spawn_blocking(move || request.run(&context))
            .await
            .map_err(|error| ToolError::new(format!("grep stopped unexpectedly: {error}")))?
    }
}

/// A checked call: everything that can be wrong with the arguments is found before the search.
struct Request {
    pattern: String,
    matcher: RegexMatcher,
    root: PathBuf,
    filter: Option<PathGlob>,
    include_hidden: bool,
    context: usize,
    mode: OutputMode,
    limit: usize,
}

impl Request {
    fn new(args: &GrepArgs, workspace: &Workspace) -> Result<Self, ToolError> {
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(args.case_insensitive.unwrap_or(false))
            // Lets the searcher find candidate lines with a fast scan, as ripgrep does.
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|error| {
                ToolError::new(format!(
                    "invalid regex `{}`: {error}. Escape special characters (`\\(`, `\\.`) to \
                     match them literally; a match cannot span lines",
                    args.pattern
                ))
            })?;
        let limit = match args.max_results {
            Some(0) => {
                return Err(ToolError::new(
                    "max_results must be at least 1 (omit it for 100)",
                ));
            }
            Some(limit) => limit.min(MAX_RESULTS_CAP),
            None => DEFAULT_MAX_RESULTS,
        };
        let filter = args.glob.as_deref().map(PathGlob::new).transpose()?;
        Ok(Self {
            pattern: args.pattern.clone(),
            matcher,
            root: search_root(workspace, args.path.as_deref())?,
            filter,
            include_hidden: args.glob.as_deref().is_some_and(names_hidden),
            context: args.context.unwrap_or(0).min(MAX_CONTEXT),
            mode: args.output,
            limit,
        })
    }

    fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            // As ripgrep: a NUL byte marks a binary file, which is then left alone.
            .binary_detection(BinaryDetection::quit(0))
            .line_number(self.mode == OutputMode::Content)
            .before_context(self.context_lines())
            .after_context(self.context_lines())
            .build()
    }

    fn context_lines(&self) -> usize {
        if self.mode == OutputMode::Content {
            self.context
        } else {
            0
        }
    }

    fn run(&self, context: &ToolContext) -> Result<String, ToolError> {
        let workspace = &context.workspace;
        let collected = Mutex::new(Collected::new(self.mode, self.limit));
        if self.root.is_file() {
            // A file named outright is searched even if ignored, as ripgrep does.
            if let Some(hits) = self.search_file(&mut self.searcher(), &self.root) {
                collected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .add(workspace.display(&self.root), hits);
            }
        } else {
            self.walk(workspace, &context.cancel, &collected);
        }
        if context.cancel.is_cancelled() {
            return Err(ToolError::new("cancelled: the search was stopped"));
        }
        let collected = collected
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(self.render(&collected, &workspace.display(&self.root)))
    }

    fn walk(
        &self,
        workspace: &Workspace,
        cancel: &CancellationToken,
        collected: &Mutex<Collected>,
    ) {
        walker(workspace, &self.root, self.include_hidden)
            .build_parallel()
            .run(|| {
                let mut searcher = self.searcher();
                Box::new(move |entry| {
                    if cancel.is_cancelled() {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                        return WalkState::Continue;
                    }
                    let path = entry.path();
                    if let Some(filter) = &self.filter {
                        let relative = path.strip_prefix(&self.root).unwrap_or(path);
                        if !filter.is_match(relative) {
                            return WalkState::Continue;
                        }
                    }
                    if let Some(hits) = self.search_file(&mut searcher, path) {
                        collected
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .add(workspace.display(path), hits);
                    }
                    WalkState::Continue
                })
            });
    }

    /// One file's hits; nothing for a file without matches, a binary file or an unreadable one.
    fn search_file(&self, searcher: &mut Searcher, path: &Path) -> Option<FileHits> {
        let mut sink = FileSink {
            mode: self.mode,
            limit: self.limit,
            hits: FileHits::default(),
            binary: false,
        };
        searcher.search_path(&self.matcher, path, &mut sink).ok()?;
        (sink.hits.matches > 0 && !sink.binary).then_some(sink.hits)
    }

    fn render(&self, collected: &Collected, shown_root: &str) -> String {
        if collected.total_files == 0 {
            return format!(
                "No matches for `{}` in `{shown_root}` (gitignored, hidden and binary files are \
                 skipped).",
                self.pattern
            );
        }
        let mut out = Output {
            text: String::new(),
            budget: MAX_RESULT_BYTES - NOTE_RESERVE,
            cut: false,
        };
        let mut shown = 0;
        match self.mode {
            OutputMode::Content => {
                'files: for (path, hits) in &collected.files {
                    if shown == self.limit
                        || (self.context > 0 && !out.text.is_empty() && !out.push("--"))
                    {
                        break;
                    }
                    for line in &hits.lines {
                        // Once the limit is reached, only the after-context of the last match
                        // shown still belongs to it.
                        let pushed = match line {
                            Line::Match { .. }
                            | Line::Break
                            | Line::Context { after: false, .. }
                                if shown == self.limit =>
                            {
                                break 'files;
                            }
                            Line::Match { number, text } => {
                                let pushed = out.push(&format!("{path}:{number}:{text}"));
                                shown += usize::from(pushed);
                                pushed
                            }
                            Line::Context { number, text, .. } => {
                                out.push(&format!("{path}-{number}-{text}"))
                            }
                            Line::Break => out.push("--"),
                        };
                        if !pushed {
                            break 'files;
                        }
                    }
                }
            }
            OutputMode::Files | OutputMode::Count => {
                for (path, hits) in collected.files.iter().take(self.limit) {
                    let line = match self.mode {
                        OutputMode::Count => format!("{path}:{}", hits.matches),
                        _ => path.clone(),
                    };
                    if !out.push(&line) {
                        break;
                    }
                    shown += 1;
                }
            }
        }
        let mut text = out.text;
        let (total, unit) = match self.mode {
            OutputMode::Content => (collected.total_matches, "matching lines"),
            OutputMode::Files | OutputMode::Count => (collected.total_files, "files"),
        };
        if self.mode == OutputMode::Count {
            let _ = write!(
                text,
                "\n[{} matching lines in {} files]",
                collected.total_matches, collected.total_files
            );
        }
        if shown < total {
            let advice = if out.cut {
                "narrow path, glob or pattern (the output was too long), or use output=files"
            } else {
                "raise max_results, or narrow path, glob or pattern"
            };
            let _ = write!(text, "\n[{shown} of {total} {unit} shown: {advice}]");
        }
        text
    }
}

/// The result text, kept under a byte budget.
struct Output {
    text: String,
    budget: usize,
    cut: bool,
}

impl Output {
    /// Adds a line if it fits; once one does not, nothing more is added.
    fn push(&mut self, line: &str) -> bool {
        if self.cut || self.text.len() + line.len() + 1 > self.budget {
            self.cut = true;
            return false;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
        true
    }
}

/// The hits of every file searched, kept in path order and only as many as can be shown: a
/// common pattern over a large tree must not hold every matching line in memory.
struct Collected {
    mode: OutputMode,
    limit: usize,
    files: BTreeMap<String, FileHits>,
    /// Results the kept files contribute (matching lines, or files).
    kept: usize,
    total_matches: usize,
    total_files: usize,
}

impl Collected {
    fn new(mode: OutputMode, limit: usize) -> Self {
        Self {
            mode,
            limit,
            files: BTreeMap::new(),
            kept: 0,
            total_matches: 0,
            total_files: 0,
        }
    }

    fn add(&mut self, path: String, hits: FileHits) {
        self.total_matches += hits.matches;
        self.total_files += 1;
        self.kept += self.units(&hits);
        self.files.insert(path, hits);
        // Output runs in path order up to the limit, so a file after enough others can never
        // be shown.
        while let Some((_, last)) = self.files.last_key_value() {
            let last_units = self.units(last);
            if self.kept - last_units < self.limit {
                break;
            }
            self.kept -= last_units;
            self.files.pop_last();
        }
    }

    fn units(&self, hits: &FileHits) -> usize {
        match self.mode {
            OutputMode::Content => hits.matches.min(self.limit),
            OutputMode::Files | OutputMode::Count => 1,
        }
    }
}

#[derive(Debug, Default)]
struct FileHits {
    /// Matching lines, all of them even when only some are kept.
    matches: usize,
    lines: Vec<Line>,
}

#[derive(Debug)]
enum Line {
    Match {
        number: u64,
        text: String,
    },
    Context {
        number: u64,
        text: String,
        after: bool,
    },
    /// A gap between groups of context.
    Break,
}

/// Receives one file's search. Keeps the text of at most `limit` matches (and their context):
/// no more can be shown.
struct FileSink {
    mode: OutputMode,
    limit: usize,
    hits: FileHits,
    binary: bool,
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.hits.matches += 1;
        match self.mode {
            // One match is enough to list the file.
            OutputMode::Files => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                if self.hits.matches <= self.limit {
                    self.hits.lines.push(Line::Match {
                        number: found.line_number().unwrap_or(0),
                        text: display_line(found.bytes()),
                    });
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        let after = matches!(context.kind(), SinkContextKind::After);
        if self.hits.matches < self.limit || (after && self.hits.matches == self.limit) {
            self.hits.lines.push(Line::Context {
                number: context.line_number().unwrap_or(0),
                text: display_line(context.bytes()),
                after,
            });
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        if self.hits.matches < self.limit && !self.hits.lines.is_empty() {
            self.hits.lines.push(Line::Break);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

fn display_line(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!(
            "{}… [line cut: {} chars in all]",
            &text[..cut],
            text.chars().count()
        ),
        None => text.into_owned(),
    }
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
