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
use super::{MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
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
            mutates: false,
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
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;
    use crate::tools::test_context;

    #[allow(clippy::unwrap_used)]
    fn write(root: &Path, path: &str, content: &[u8]) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    #[allow(clippy::unwrap_used)]
    async fn grep(root: &Path, arguments: serde_json::Value) -> Result<String, ToolError> {
        Grep.call(
            serde_json::from_value(arguments).unwrap(),
            &test_context(root),
        )
        .await
    }

    #[tokio::test]
    async fn matching_lines_come_as_path_line_text_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "src/b.rs", b"fn beta() {}\nlet x = 1;\n");
        write(dir.path(), "src/a.rs", b"fn alpha() {}\r\n");
        write(dir.path(), "notes.txt", b"nothing here\n");

        let output = grep(dir.path(), json!({"pattern": r"fn \w+"}))
            .await
            .unwrap();

        assert_eq!(output, "src/a.rs:1:fn alpha() {}\nsrc/b.rs:1:fn beta() {}");
    }

    #[tokio::test]
    async fn context_lines_use_dashes_and_groups_are_separated() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        write(dir.path(), "a.txt", lines.as_bytes());
        write(dir.path(), "b.txt", b"zero\nline 1\n");

        let output = grep(
            dir.path(),
            json!({"pattern": "^line (3|10)$", "context": 1}),
        )
        .await
        .unwrap();

        assert_eq!(
            output,
            "a.txt-2-line 2\na.txt:3:line 3\na.txt-4-line 4\n--\na.txt-9-line 9\n\
             a.txt:10:line 10\na.txt-11-line 11"
        );
    }

    #[tokio::test]
    async fn files_and_count_modes() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"todo\nTODO\ntodo\n");
        write(dir.path(), "b.txt", b"todo\n");
        write(dir.path(), "c.txt", b"done\n");

        let files = grep(dir.path(), json!({"pattern": "todo", "output": "files"}))
            .await
            .unwrap();
        assert_eq!(files, "a.txt\nb.txt");

        let counts = grep(
            dir.path(),
            json!({"pattern": "todo", "output": "count", "case_insensitive": true}),
        )
        .await
        .unwrap();
        assert_eq!(counts, "a.txt:3\nb.txt:1\n[4 matching lines in 2 files]");
    }

    #[tokio::test]
    async fn a_glob_filters_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "src/a.rs", b"needle\n");
        write(dir.path(), "src/deep/b.rs", b"needle\n");
        write(dir.path(), "src/c.py", b"needle\n");

        let by_name = grep(
            dir.path(),
            json!({"pattern": "needle", "glob": "*.rs", "output": "files"}),
        )
        .await
        .unwrap();
        assert_eq!(by_name, "src/a.rs\nsrc/deep/b.rs");

        let by_path = grep(
            dir.path(),
            json!({"pattern": "needle", "glob": "*/*.rs", "path": "src", "output": "files"}),
        )
        .await
        .unwrap();
        assert_eq!(by_path, "src/deep/b.rs");

        let bad = grep(dir.path(), json!({"pattern": "x", "glob": "[z"}))
            .await
            .unwrap_err();
        assert!(bad.message.starts_with("invalid glob"), "{bad}");
    }

    #[tokio::test]
    async fn gitignored_hidden_and_binary_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".gitignore", b"target/\n");
        write(dir.path(), "target/out.txt", b"needle\n");
        write(dir.path(), ".env", b"needle\n");
        write(dir.path(), ".git/HEAD", b"needle\n");
        write(dir.path(), "tool.bin", b"needle\n\0\x01\x02");
        write(dir.path(), "src.txt", b"needle\n");

        let output = grep(dir.path(), json!({"pattern": "needle"}))
            .await
            .unwrap();
        assert_eq!(output, "src.txt:1:needle");

        let hidden = grep(dir.path(), json!({"pattern": "needle", "glob": ".*"}))
            .await
            .unwrap();
        assert_eq!(hidden, ".env:1:needle");

        let named = grep(
            dir.path(),
            json!({"pattern": "needle", "path": "target/out.txt"}),
        )
        .await
        .unwrap();
        assert_eq!(named, "target/out.txt:1:needle");
    }

    #[tokio::test]
    async fn results_are_bounded_in_path_order_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        for file in 0..30 {
            let lines: String = (0..10).map(|n| format!("hit {n}\n")).collect();
            write(dir.path(), &format!("f{file:02}.txt"), lines.as_bytes());
        }

        let output = grep(dir.path(), json!({"pattern": "hit", "max_results": 15}))
            .await
            .unwrap();

        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), 16);
        assert_eq!(lines[0], "f00.txt:1:hit 0");
        assert_eq!(lines[14], "f01.txt:5:hit 4");
        assert_eq!(
            lines[15],
            "[15 of 300 matching lines shown: raise max_results, or narrow path, glob or pattern]"
        );

        let files = grep(
            dir.path(),
            json!({"pattern": "hit", "output": "files", "max_results": 2}),
        )
        .await
        .unwrap();
        assert_eq!(
            files,
            "f00.txt\nf01.txt\n[2 of 30 files shown: raise max_results, or narrow path, glob or \
             pattern]"
        );
    }

    #[tokio::test]
    async fn long_output_is_cut_under_the_result_limit() {
        let dir = tempfile::tempdir().unwrap();
        let line = format!("{}\n", "x".repeat(300));
        write(dir.path(), "wide.txt", line.repeat(1000).as_bytes());
        write(
            dir.path(),
            "min.js",
            format!("{}\n", "y".repeat(5000)).as_bytes(),
        );

        let output = grep(dir.path(), json!({"pattern": "x", "max_results": 1000}))
            .await
            .unwrap();
        assert!(output.len() <= MAX_RESULT_BYTES, "{}", output.len());
        assert!(
            output.ends_with("matching lines shown: narrow path, glob or pattern (the output was too long), or use output=files]"),
            "{}",
            &output[output.len() - 200..]
        );

        let minified = grep(dir.path(), json!({"pattern": "y"})).await.unwrap();
        assert!(
            minified.ends_with("… [line cut: 5000 chars in all]"),
            "{minified}"
        );
    }

    #[tokio::test]
    async fn bad_inputs_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"x\n");

        let regex = grep(dir.path(), json!({"pattern": "fn ("}))
            .await
            .unwrap_err();
        assert!(
            regex.message.starts_with("invalid regex `fn (`:"),
            "{regex}"
        );
        assert!(
            regex.message.contains("Escape special characters"),
            "{regex}"
        );
        let zero = grep(dir.path(), json!({"pattern": "x", "max_results": 0}))
            .await
            .unwrap_err();
        assert!(
            zero.message.contains("max_results must be at least 1"),
            "{zero}"
        );
        let missing = grep(dir.path(), json!({"pattern": "x", "path": "nope"}))
            .await
            .unwrap_err();
        assert!(
            missing.message.contains("`nope` does not exist"),
            "{missing}"
        );
        let mode = Grep
            .call(
                serde_json::from_value(json!({"pattern": "x"})).unwrap(),
                &test_context(dir.path()),
            )
            .await
            .unwrap();
        assert_eq!(mode, "a.txt:1:x");
        assert!(
            serde_json::from_value::<GrepArgs>(json!({"pattern": "x", "output": "lines"})).is_err()
        );
    }

    #[tokio::test]
    async fn no_match_says_what_was_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"x\n");
        let output = grep(dir.path(), json!({"pattern": "absent"}))
            .await
            .unwrap();
        assert_eq!(
            output,
            "No matches for `absent` in `.` (gitignored, hidden and binary files are skipped)."
        );
    }

    #[tokio::test]
    async fn escapes_are_refused_and_symlinks_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        write(&outside, "secret.txt", b"needle\n");
        write(&root, "inside.txt", b"needle\n");
        symlink(&outside, root.join("dir-link")).unwrap();
        symlink(outside.join("secret.txt"), root.join("file-link")).unwrap();

        let output = grep(&root, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(output, "inside.txt:1:needle");
        for path in ["..", "dir-link", "file-link", "/etc"] {
            let error = grep(&root, json!({"pattern": "needle", "path": path}))
                .await
                .unwrap_err();
            assert!(error.message.starts_with("refused"), "{path}: {error}");
        }
    }

    #[test]
    fn memory_holds_only_what_can_be_shown() {
        let mut collected = Collected::new(OutputMode::Content, 3);
        let hits = |matches: usize| FileHits {
            matches,
            lines: Vec::new(),
        };
        collected.add("c".to_owned(), hits(2));
        collected.add("a".to_owned(), hits(2));
        collected.add("b".to_owned(), hits(5));
        collected.add("d".to_owned(), hits(1));
        let kept: Vec<&str> = collected.files.keys().map(String::as_str).collect();
        assert_eq!(kept, ["a", "b"]);
        assert_eq!(collected.total_matches, 10);
        assert_eq!(collected.total_files, 4);
    }
}
