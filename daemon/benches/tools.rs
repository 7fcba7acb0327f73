//! Search and read benchmarks (SPEC §11), each run beside its reference in the same process run:
//!
//! - the `grep` tool, called through `Registry::standard()`, against `rg` on the same tree and
//!   regex (target within 1.5× of rg). The tree is `$CWCODE_BENCH_TREE`, or else cargo's
//!   extracted crate sources (`$CARGO_HOME/registry/src`, filled on any machine that built this
//!   project). Files mode and count mode do the same work in both (every file searched, one line
//!   per file out); content mode is shown too, though it is not like for like: the tool keeps at
//!   most `max_results` lines while rg prints every match.
//! - `read_file` of a 100,000-line file with hashes (target under 30 ms), against
//!   `std::fs::read_to_string` and a count of its lines.
//!
//! - `bash` of a command that does nothing, through the registry and the sandbox (bubblewrap where
//!   it works, else Landlock; environment allow-list, tagged process group and its sweep), against
//!   the same `bash -c true` spawned bare: what the sandbox costs per command.
//!
//! Run: `cargo bench -p cwcoded --bench tools` (needs `rg`: `apt-get install -y ripgrep`).
//! `cargo bench -p cwcoded --bench tools -- grep`, `-- read_file` or `-- bash` runs one part.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cwcoded::sandbox::Workspace;
use cwcoded::tools::hashline::{parse_formatted_line, push_formatted_line};
use cwcoded::tools::{Registry, ToolContext};
use tokio::runtime::Runtime;

const GREP_ROUNDS: usize = 11;
const READ_ROUNDS: usize = 21;
const WINDOWED_ROUNDS: usize = 5;
const GREP_TARGET_RATIO: f64 = 1.5;
const READ_TARGET: Duration = Duration::from_millis(30);
const FILE_LINES: usize = 100_000;
/// A regex with a literal start, and a plain literal: the two shapes models search for most.
const PATTERNS: [&str; 2] = [r"impl<[^>]*> \w+ for \w+", "unsafe fn"];
/// The most lines the grep tool shows (its cap), so that it keeps as much as it can.
const MAX_RESULTS: usize = 5000;

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let wants = |part: &str| only.is_empty() || only.iter().any(|name| name == part);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if wants("grep") {
        grep_against_rg(&runtime);
    }
    if wants("read_file") {
        read_a_large_file(&runtime);
    }
    if wants("bash") {
        bash_in_the_sandbox(&runtime);
    }
}

const BASH_ROUNDS: usize = 41;

fn bash_in_the_sandbox(runtime: &Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let context = context(dir.path());
    let registry = Registry::standard();
    let arguments = serde_json::json!({"command": "true"}).to_string();
    let mut sandboxed = Vec::with_capacity(BASH_ROUNDS);
    let mut bare = Vec::with_capacity(BASH_ROUNDS);
    for _ in 0..BASH_ROUNDS {
        let started = Instant::now();
        let result = runtime
            .block_on(registry.call("bash", &arguments, &context))
            .unwrap()
            .text;
        sandboxed.push(started.elapsed());
        assert!(result.ends_with("exit code 0"), "{result}");

        let started = Instant::now();
        let status = Command::new("bash")
            .args(["-c", "true"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        bare.push(started.elapsed());
        assert!(status.success());
    }
    let layers = match cwcoded::sandbox::isolation::namespaces() {
        cwcoded::sandbox::isolation::Namespaces::Bubblewrap { .. } => "bubblewrap",
        cwcoded::sandbox::isolation::Namespaces::Unavailable { .. } => "Landlock only",
    };
    let (sandboxed, bare) = (median(sandboxed), median(bare));
    println!("\n## bash `true` in the sandbox ({layers}), median of {BASH_ROUNDS}");
    println!("| what | median | reference (bare `bash -c true`) | ratio |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| bash tool call | {} | {} | {:.2}× |",
        ms(sandboxed),
        ms(bare),
        ratio(sandboxed, bare)
    );
}

/// A context as a session has one, on a fresh workspace with nothing read yet.
fn context(root: &Path) -> ToolContext {
    ToolContext::standalone(Workspace::new(root).unwrap())
}

fn bench_tree() -> PathBuf {
    if let Some(tree) = std::env::var_os("CWCODE_BENCH_TREE") {
        return PathBuf::from(tree);
    }
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"),
        PathBuf::from,
    );
    cargo_home.join("registry").join("src")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Files,
    Count,
    Content,
}

impl Mode {
    fn tool_name(self) -> &'static str {
        match self {
            Self::Files => "files",
            Self::Count => "count",
            Self::Content => "content",
        }
    }

    fn rg_flag(self) -> &'static str {
        match self {
            Self::Files => "--files-with-matches",
            Self::Count => "--count",
            Self::Content => "--line-number",
        }
    }
}

fn grep_against_rg(runtime: &Runtime) {
    let tree = bench_tree();
    let rg_version = Command::new("rg").arg("--version").output();
    let Some(rg_version) = rg_version.ok().filter(|output| output.status.success()) else {
        println!("grep vs rg: skipped, `rg` is not installed (apt-get install -y ripgrep)");
        return;
    };
    let rg_version = String::from_utf8_lossy(&rg_version.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let (all_files, all_bytes) = tree_size(&tree);
    let searched = rg(&tree, &["--files"]);
    let searched: Vec<&str> = searched.lines().collect();
    let searched_bytes: u64 = searched
        .iter()
        .filter_map(|path| fs::metadata(tree.join(path)).ok())
        .map(|metadata| metadata.len())
        .sum();
    println!("grep tool vs {rg_version}, {GREP_ROUNDS} rounds each, interleaved");
    println!(
        "  tree {}: {all_files} files, {} in all; {} files, {} searched (not ignored, not hidden)",
        tree.display(),
        mib(all_bytes),
        searched.len(),
        mib(searched_bytes)
    );

    let context = context(&tree);
    let registry = Registry::standard();
    for pattern in PATTERNS {
        println!("  pattern `{pattern}`");
        for mode in [Mode::Files, Mode::Count, Mode::Content] {
            let arguments = serde_json::json!({
                "pattern": pattern,
                "output": mode.tool_name(),
                "max_results": MAX_RESULTS,
            })
            .to_string();
            let rg_arguments = ["--no-require-git", mode.rg_flag(), "-e", pattern, "."];
            let mut tool_times = Vec::new();
            let mut rg_times = Vec::new();
            let mut tool_text = String::new();
            let mut rg_text = String::new();
            // One unmeasured round of each first, for the page cache.
            for round in 0..=GREP_ROUNDS {
                let started = Instant::now();
                rg_text = rg(&tree, &rg_arguments);
                let rg_time = started.elapsed();
                let started = Instant::now();
                tool_text = runtime
                    .block_on(registry.call("grep", &arguments, &context))
                    .unwrap()
                    .text;
                let tool_time = started.elapsed();
                if round > 0 {
                    rg_times.push(rg_time);
                    tool_times.push(tool_time);
                }
            }
            let (tool_time, rg_time) = (median(tool_times), median(rg_times));
            println!(
                "    {:<8} tool {:>9}  rg {:>9}  ratio {:.2}x  {}; {}",
                mode.tool_name(),
                ms(tool_time),
                ms(rg_time),
                ratio(tool_time, rg_time),
                verdict(ratio(tool_time, rg_time) <= GREP_TARGET_RATIO),
                agreement(mode, &tool_text, &rg_text)
            );
        }
    }
}

/// rg run in the tree as a user would from its root, `.gitignore` honoured outside a git
/// repository as the tool does; its output is read whole, as the tool's is.
fn rg(tree: &Path, arguments: &[&str]) -> String {
    let output = Command::new("rg")
        .args(arguments)
        .current_dir(tree)
        .output()
        .unwrap();
    // 1 is rg's "no match".
    assert!(
        output.status.code().is_some_and(|code| code <= 1),
        "rg {arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What both found, so that a ratio is never of different work.
fn agreement(mode: Mode, tool: &str, rg: &str) -> String {
    let rg_lines = rg.lines().count();
    match mode {
        Mode::Files => {
            let (shown, total) = shown_and_total(tool, "files");
            format!("{total} files (tool shows {shown}), rg lists {rg_lines}")
        }
        Mode::Count => {
            let rg_matches: usize = rg
                .lines()
                .filter_map(|line| line.rsplit_once(':'))
                .filter_map(|(_, count)| count.parse::<usize>().ok())
                .sum();
            let summary = tool
                .lines()
                .rev()
                .find(|line| line.contains("matching lines in"))
                .unwrap_or("no summary");
            format!("tool {summary}, rg [{rg_matches} matching lines in {rg_lines} files]")
        }
        Mode::Content => {
            let (shown, total) = shown_and_total(tool, "matching lines");
            format!(
                "{total} matching lines (tool shows {shown}, {}), rg prints {rg_lines} ({})",
                kib(tool.len()),
                kib(rg.len())
            )
        }
    }
}

/// The tool's `[S of T unit shown: ...]` note, or every line when there is none.
fn shown_and_total(tool: &str, unit: &str) -> (usize, usize) {
    let marker = format!(" {unit} shown");
    let note = tool
        .lines()
        .rev()
        .find(|line| line.starts_with('[') && line.contains(&marker));
    match note {
        Some(note) => {
            let numbers: Vec<usize> = note
                .trim_start_matches('[')
                .split(' ')
                .filter_map(|word| word.parse().ok())
                .take(2)
                .collect();
            (numbers[0], numbers[1])
        }
        None => {
            let lines = tool.lines().filter(|line| !line.starts_with('[')).count();
            (lines, lines)
        }
    }
}

/// Every file under the tree and their bytes, nothing skipped.
fn tree_size(tree: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for entry in ignore::WalkBuilder::new(tree)
        .standard_filters(false)
        .build()
        .flatten()
    {
        if entry.file_type().is_some_and(|kind| kind.is_file()) {
            files += 1;
            bytes += entry.metadata().map_or(0, |metadata| metadata.len());
        }
    }
    (files, bytes)
}

fn read_a_large_file(runtime: &Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.rs");
    let text = code_like_lines(FILE_LINES);
    fs::write(&path, &text).unwrap();
    let context = context(dir.path());
    let registry = Registry::standard();
    let default_call = r#"{"path": "large.rs"}"#;
    let whole_limit = format!(r#"{{"path": "large.rs", "limit": {FILE_LINES}}}"#);

    let mut reference = Vec::new();
    let mut default_times = Vec::new();
    let mut limit_times = Vec::new();
    let mut format_all = Vec::new();
    let (mut default_text, mut limit_text) = (String::new(), String::new());
    let mut formatted_bytes = 0;
    for round in 0..=READ_ROUNDS {
        let started = Instant::now();
        let lines = fs::read_to_string(&path).unwrap().lines().count();
        let reference_time = started.elapsed();
        assert_eq!(lines, FILE_LINES);

        let started = Instant::now();
        default_text = runtime
            .block_on(registry.call("read_file", default_call, &context))
            .unwrap()
            .text;
        let default_time = started.elapsed();

        let started = Instant::now();
        limit_text = runtime
            .block_on(registry.call("read_file", &whole_limit, &context))
            .unwrap()
            .text;
        let limit_time = started.elapsed();

        // What showing every line with its anchor costs, were there no 64 KiB bound.
        let started = Instant::now();
        let text = fs::read_to_string(&path).unwrap();
        let mut out = String::with_capacity(text.len() + FILE_LINES * 10);
        for (index, line) in text.split_inclusive('\n').enumerate() {
            if index > 0 {
                out.push('\n');
            }
            push_formatted_line(&mut out, index + 1, line);
        }
        let format_time = started.elapsed();
        formatted_bytes = out.len();

        if round > 0 {
            reference.push(reference_time);
            default_times.push(default_time);
            limit_times.push(limit_time);
            format_all.push(format_time);
        }
    }

    // Every line through read_file as a model must get it: window after window.
    let mut windowed = Vec::new();
    let mut calls = 0;
    for _ in 0..WINDOWED_ROUNDS {
        let started = Instant::now();
        calls = 0;
        let mut shown = 0;
        let mut offset = 1;
        loop {
            let arguments = format!(r#"{{"path": "large.rs", "offset": {offset}}}"#);
            let window = runtime
                .block_on(registry.call("read_file", &arguments, &context))
                .unwrap()
                .text;
            calls += 1;
            shown += anchored_lines(&window);
            match continuation(&window) {
                Some(next) => offset = next,
                None => break,
            }
        }
        windowed.push(started.elapsed());
        assert_eq!(shown, FILE_LINES);
    }

    let reference = median(reference);
    println!(
        "read_file of a {FILE_LINES}-line file ({}), {READ_ROUNDS} rounds",
        kib(text.len())
    );
    println!(
        "  reference: fs::read_to_string + lines().count()  {:>9}",
        ms(reference)
    );
    for (what, times, output) in [
        ("default call (no limit)", default_times, &default_text),
        ("limit=100000", limit_times, &limit_text),
    ] {
        let time = median(times);
        println!(
            "  read_file, {what:<24} {:>9}  ratio {:.2}x  {}; shows {} lines, {} (+ note: {})",
            ms(time),
            ratio(time, reference),
            verdict(time < READ_TARGET),
            anchored_lines(output),
            kib(output.len()),
            output.lines().last().unwrap_or("")
        );
    }
    let format_time = median(format_all);
    println!(
        "  every line read and formatted with its anchor (hashline, in process, unbounded) {:>9}  \
         ratio {:.2}x; {}",
        ms(format_time),
        ratio(format_time, reference),
        kib(formatted_bytes)
    );
    let windowed = median(windowed);
    println!(
        "  every line through read_file, window after window: {calls} calls, {:>9} in all, {} per call",
        ms(windowed),
        ms(windowed / calls)
    );
}

fn anchored_lines(output: &str) -> usize {
    output
        .lines()
        .filter(|line| parse_formatted_line(line).is_some())
        .count()
}

/// The offset in read_file's "call read_file with offset=N to continue" note.
fn continuation(output: &str) -> Option<usize> {
    let note = output.lines().last()?;
    let (_, rest) = note.split_once("offset=")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Lines shaped like source code, from a fixed seed: indentation, a few words, some blank.
fn code_like_lines(count: usize) -> String {
    const WORDS: [&str; 24] = [
        "let",
        "mut",
        "value",
        "self",
        "fn",
        "return",
        "match",
        "Some(x)",
        "None",
        "=>",
        "if",
        "else",
        "&str",
        "String::new()",
        "Vec<u8>",
        "result?",
        ".iter()",
        ".map(|x| x + 1)",
        "{",
        "}",
        "// note",
        "config.path",
        "Ok(())",
        "42",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let mut text = String::with_capacity(count * 40);
    for _ in 0..count {
        if next(10) == 0 {
            text.push('\n');
            continue;
        }
        let indent = next(5) as usize * 4;
        text.extend(std::iter::repeat_n(' ', indent));
        let words = 1 + next(8);
        for word in 0..words {
            if word > 0 {
                text.push(' ');
            }
            text.push_str(WORDS[next(WORDS.len() as u64) as usize]);
        }
        text.push_str(";\n");
    }
    text
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ratio(time: Duration, reference: Duration) -> f64 {
    time.as_secs_f64() / reference.as_secs_f64()
}

fn verdict(met: bool) -> &'static str {
    if met { "target met" } else { "target missed" }
}

fn ms(time: Duration) -> String {
    format!("{:.2} ms", time.as_secs_f64() * 1000.0)
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
