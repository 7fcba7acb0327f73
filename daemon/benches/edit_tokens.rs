//! Output tokens of `edit_lines` against `edit_file` on real edits, and the input cost of the
//! `N:HHH|` anchors (SPEC §7.1, §11: output ≥ 25% fewer with ranges, batched alike; anchors ≤ 5
//! tokens per displayed line).
//!
//! The edits are the differences between two published versions of well-known crates, as cargo
//! downloads them (`.crate` archives in cargo's cache; fetched with `cargo fetch` in a scratch
//! project when missing). Each file present in both versions is diffed by line (`similar`,
//! Myers) into hunks, and for each hunk the bench builds the argument JSON each tool needs:
//!
//! - `edit_file`: the smallest unique `old_string` of whole lines (context lines added, before
//!   or after, until the string occurs once in the file), and its `new_string`. A "tight" variant
//!   also lets the strings start and end inside lines (the changed characters, grown by words
//!   until unique), as a model trimming its copy would write them.
//! - `edit_lines`: one entry per hunk in the range form (`line`/`hash`, `end_line`/`end_hash`
//!   for more than one line), `op` `insert_after`/`insert_before` for pure insertions and
//!   `delete` for deletions.
//!
//! Both are built one call per hunk (against the file as read) and one call per file (`edits`
//! batched: edit_lines anchors all refer to the file as read; edit_file edits apply in order, so
//! each is unique in the text its predecessors left). Every call is checked by running it
//! through `Registry::standard()` on a copy of the file (read with read_file first, as a model
//! would) and comparing the result with the expected lines. Tokens are counted on the argument
//! JSON (compact, as models emit it) with tiktoken's o200k_base, and cl100k_base for the totals;
//! the per-call framing (tool name, call id) is the same for both tools and left out.
//!
//! Run: `cargo bench -p cwcoded --bench edit_tokens`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;

use cwcoded::sandbox::Workspace;
use cwcoded::tools::hashline::{line_content, line_hash, parse_formatted_line};
use cwcoded::tools::{Registry, ToolContext};
use serde::Serialize;
use similar::{Algorithm, DiffOp};
use tiktoken_rs::CoreBPE;
use tokio::runtime::Runtime;

/// Crate, older version, newer version: minor releases of widely used crates, about 1,500 hunks.
const PAIRS: [(&str, &str, &str); 8] = [
    ("regex", "1.10.0", "1.11.0"),
    ("ignore", "0.4.22", "0.4.23"),
    ("axum", "0.7.5", "0.7.9"),
    ("serde_json", "1.0.120", "1.0.128"),
    ("tokio", "1.40.0", "1.41.0"),
    ("clap_builder", "4.5.20", "4.5.23"),
    ("hyper", "1.4.1", "1.5.0"),
    ("reqwest", "0.12.7", "0.12.9"),
];
/// Written by `cargo package`, not by the crate's authors.
const GENERATED: [&str; 2] = ["Cargo.toml", ".cargo_vcs_info.json"];
/// Word steps a tight `old_string` may grow by before the whole-line one is used instead.
const MAX_TIGHT_STEPS: usize = 24;
const SAVING_TARGET: f64 = 25.0;
const ANCHOR_TARGET: f64 = 5.0;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tokens = Tokens::new();
    let sources = tempfile::tempdir().unwrap();
    let archives = crate_archives();
    let mut files = Vec::new();
    let mut skipped = Skipped::default();
    for (name, old, new) in PAIRS {
        let old_dir = extract(&archives[&(name, old)], sources.path());
        let new_dir = extract(&archives[&(name, new)], sources.path());
        files.extend(changed_files(
            &format!("{name} {old} → {new}"),
            &old_dir,
            &new_dir,
            &mut skipped,
        ));
    }

    let registry = Registry::standard();
    let mut hunks = Vec::new();
    let mut calls = Vec::new();
    let mut reads = ReadCost::default();
    let mut checks = Checks::default();
    for file in &files {
        let workspace = tempfile::tempdir().unwrap();
        let checker = Checker {
            runtime: &runtime,
            registry: &registry,
            context: context(workspace.path()),
            root: workspace.path(),
            file,
        };
        reads.add(&tokens, &checker.read_all());
        let (file_hunks, file_calls) = measure_file(file, &tokens, &checker, &mut checks);
        hunks.extend(file_hunks);
        calls.push(file_calls);
    }

    report(&files, &hunks, &calls, &reads, &checks, &skipped);
}

fn report(
    files: &[FileDiff],
    hunks: &[HunkTokens],
    calls: &[FileCalls],
    reads: &ReadCost,
    checks: &Checks,
    skipped: &Skipped,
) {
    println!("edit_lines vs edit_file, output tokens of the argument JSON (o200k_base)");
    println!(
        "  {} crate version pairs, {} changed files, {} hunks (left out: {} files not UTF-8 \
         text, {} differing only in line endings, {} added or removed whole)",
        PAIRS.len(),
        files.len(),
        hunks.len(),
        skipped.binary,
        skipped.endings_only,
        skipped.added_or_removed
    );
    println!(
        "  every call checked through the registry: {} calls, {} failed{}",
        checks.calls,
        checks.failures.len(),
        checks
            .failures
            .iter()
            .take(5)
            .fold(String::new(), |mut out, failure| {
                let _ = write!(out, "\n    {failure}");
                out
            })
    );

    println!();
    println!("  one call per hunk (saving = 1 - edit_lines / edit_file):");
    print_table(hunks, |hunk| hunk.single);
    let sum = |pick: fn(&FileCalls) -> [usize; 2], index: usize| -> usize {
        calls.iter().map(|call| pick(call)[index]).sum()
    };
    let single = |pick: fn(&Costs) -> [usize; 2], index: usize| -> usize {
        hunks.iter().map(|hunk| pick(&hunk.single)[index]).sum()
    };
    for (encoding, index) in [("o200k_base", 0), ("cl100k_base", 1)] {
        println!(
            "  {encoding:<11} {} calls: edit_file {} tokens, edit_lines {} ({:+.1}%); tight \
             edit_file {} ({:+.1}%)",
            hunks.len(),
            single(|costs| costs.edit_file, index),
            single(|costs| costs.edit_lines, index),
            saving(
                single(|costs| costs.edit_file, index),
                single(|costs| costs.edit_lines, index)
            ),
            single(|costs| costs.tight, index),
            saving(
                single(|costs| costs.tight, index),
                single(|costs| costs.edit_lines, index)
            )
        );
    }

    println!();
    println!("  one call per file, edits batched:");
    for (encoding, index) in [("o200k_base", 0), ("cl100k_base", 1)] {
        let (edit_file, edit_lines) = (
            sum(|call| call.edit_file, index),
            sum(|call| call.edit_lines, index),
        );
        println!(
            "  {encoding:<11} {} calls: edit_file {edit_file} tokens, edit_lines {edit_lines} \
             ({:+.1}%, target ≥ {SAVING_TARGET}%: {}); tight edit_file {} ({:+.1}%)",
            calls.len(),
            saving(edit_file, edit_lines),
            verdict(saving(edit_file, edit_lines) >= SAVING_TARGET),
            sum(|call| call.tight, index),
            saving(sum(|call| call.tight, index), edit_lines)
        );
    }
    println!(
        "  by kind and size, each batched entry's own tokens (they add up to the calls less their \
         path and brackets):"
    );
    print_table(hunks, |hunk| hunk.batched);

    println!();
    println!("  batched, by crate:");
    let mut by_crate: BTreeMap<&str, Vec<&FileCalls>> = BTreeMap::new();
    for call in calls {
        by_crate.entry(call.pair.as_str()).or_default().push(call);
    }
    for (pair, calls) in by_crate {
        let sum = |pick: fn(&FileCalls) -> [usize; 2]| -> usize {
            calls.iter().map(|call| pick(call)[0]).sum()
        };
        let hunks: usize = calls.iter().map(|call| call.hunks).sum();
        println!(
            "    {pair:<30} {:>3} files {:>4} hunks: edit_file {:>6}, edit_lines {:>6} ({:+.1}%), \
             tight {:>6} ({:+.1}%)",
            calls.len(),
            hunks,
            sum(|call| call.edit_file),
            sum(|call| call.edit_lines),
            saving(sum(|call| call.edit_file), sum(|call| call.edit_lines)),
            sum(|call| call.tight),
            saving(sum(|call| call.tight), sum(|call| call.edit_lines)),
        );
    }

    println!();
    println!("  where edit_lines loses (one call per hunk, against whole-line edit_file):");
    let mut losses: Vec<&HunkTokens> = hunks
        .iter()
        .filter(|hunk| hunk.single.edit_lines[0] > hunk.single.edit_file[0])
        .collect();
    println!(
        "    {} of {} hunks ({:.1}%); against tight edit_file {} ({:.1}%)",
        losses.len(),
        hunks.len(),
        percent(losses.len(), hunks.len()),
        hunks
            .iter()
            .filter(|hunk| hunk.single.edit_lines[0] > hunk.single.tight[0])
            .count(),
        percent(
            hunks
                .iter()
                .filter(|hunk| hunk.single.edit_lines[0] > hunk.single.tight[0])
                .count(),
            hunks.len()
        )
    );
    let mut by_group: BTreeMap<(Kind, Bucket), usize> = BTreeMap::new();
    for hunk in &losses {
        *by_group.entry((hunk.kind, hunk.bucket)).or_default() += 1;
    }
    for ((kind, bucket), count) in by_group {
        println!("    {count:>5}  {} {}-line", kind.name(), bucket.name());
    }
    losses.sort_by_key(|hunk| {
        std::cmp::Reverse(hunk.single.edit_lines[0] - hunk.single.edit_file[0])
    });
    for hunk in losses.iter().take(3) {
        println!(
            "    e.g. {} ({} {}-line {}): edit_file {} tokens, edit_lines {}\n      edit_file  {}\n      edit_lines {}",
            hunk.at,
            hunk.kind.name(),
            hunk.size,
            hunk.bucket.name(),
            hunk.single.edit_file[0],
            hunk.single.edit_lines[0],
            clip(&hunk.edit_file_json),
            clip(&hunk.edit_lines_json)
        );
    }

    println!();
    println!(
        "  read_file input cost of the anchors ({} reads of the {} changed files as they were, \
         {} lines displayed):",
        reads.calls, reads.files, reads.lines
    );
    for (encoding, index) in [("o200k_base", 0), ("cl100k_base", 1)] {
        let per_line = (reads.anchored[index] - reads.plain[index]) as f64 / reads.lines as f64;
        println!(
            "    {encoding:<11} anchored {} tokens, plain text {} (+{:.0}%), `N|` numbered {}: \
             {per_line:.3} tokens per line over plain (target ≤ {ANCHOR_TARGET}: {}), {:.3} over \
             numbered",
            reads.anchored[index],
            reads.plain[index],
            percent(
                reads.anchored[index] - reads.plain[index],
                reads.plain[index]
            ),
            reads.numbered[index],
            verdict(per_line <= ANCHOR_TARGET),
            (reads.anchored[index] - reads.numbered[index]) as f64 / reads.lines as f64,
        );
    }
}

/// Rows by kind and size, then by kind, by size, and all.
fn print_table(hunks: &[HunkTokens], pick: fn(&HunkTokens) -> Costs) {
    println!(
        "  {:<8} {:<6} {:>6} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8}",
        "kind",
        "lines",
        "hunks",
        "edit_file",
        "edit_lines",
        "saving",
        "tight ef",
        "saving",
        "el loses"
    );
    let mut groups: BTreeMap<(Kind, Bucket), Vec<&HunkTokens>> = BTreeMap::new();
    for hunk in hunks {
        groups
            .entry((hunk.kind, hunk.bucket))
            .or_default()
            .push(hunk);
    }
    for ((kind, bucket), group) in &groups {
        print_hunk_row(kind.name(), bucket.name(), group, pick);
    }
    for kind in [Kind::Replace, Kind::Insert, Kind::Delete] {
        let group: Vec<&HunkTokens> = hunks.iter().filter(|hunk| hunk.kind == kind).collect();
        print_hunk_row(kind.name(), "all", &group, pick);
    }
    for bucket in [Bucket::One, Bucket::Few, Bucket::Many] {
        let group: Vec<&HunkTokens> = hunks.iter().filter(|hunk| hunk.bucket == bucket).collect();
        print_hunk_row("all", bucket.name(), &group, pick);
    }
    let all: Vec<&HunkTokens> = hunks.iter().collect();
    print_hunk_row("all", "all", &all, pick);
}

fn print_hunk_row(kind: &str, bucket: &str, group: &[&HunkTokens], pick: fn(&HunkTokens) -> Costs) {
    if group.is_empty() {
        return;
    }
    let (mut edit_file, mut edit_lines, mut tight, mut loses) = (0, 0, 0, 0);
    for hunk in group {
        let costs = pick(hunk);
        edit_file += costs.edit_file[0];
        edit_lines += costs.edit_lines[0];
        tight += costs.tight[0];
        loses += usize::from(costs.edit_lines[0] > costs.edit_file[0]);
    }
    println!(
        "  {kind:<8} {bucket:<6} {:>6} {edit_file:>10} {edit_lines:>10} {:>+7.1}% {tight:>10} \
         {:>+7.1}% {:>7.1}%",
        group.len(),
        saving(edit_file, edit_lines),
        saving(tight, edit_lines),
        percent(loses, group.len())
    );
}

fn saving(reference: usize, tokens: usize) -> f64 {
    100.0 * (1.0 - tokens as f64 / reference as f64)
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole as f64
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

fn clip(text: &str) -> String {
    const MAX: usize = 160;
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MAX).collect();
    format!("{kept}… ({} chars)", text.chars().count())
}

struct Tokens {
    o200k: CoreBPE,
    cl100k: CoreBPE,
}

impl Tokens {
    fn new() -> Self {
        Self {
            o200k: tiktoken_rs::o200k_base().unwrap(),
            cl100k: tiktoken_rs::cl100k_base().unwrap(),
        }
    }

    /// o200k_base only, for choosing between candidates.
    fn o200k(&self, text: &str) -> usize {
        self.o200k.encode_ordinary(text).len()
    }

    /// o200k_base, cl100k_base.
    fn count(&self, text: &str) -> [usize; 2] {
        [
            self.o200k.encode_ordinary(text).len(),
            self.cl100k.encode_ordinary(text).len(),
        ]
    }
}

// ---------------------------------------------------------------------------------------------
// The edits: crate archives, their changed files, hunks.

/// Each needed `.crate` archive in cargo's cache, fetched first if missing.
fn crate_archives() -> BTreeMap<(&'static str, &'static str), PathBuf> {
    let cache = cargo_home().join("registry").join("cache");
    let wanted: Vec<(&str, &str)> = PAIRS
        .iter()
        .flat_map(|&(name, old, new)| [(name, old), (name, new)])
        .collect();
    let find = || -> BTreeMap<(&'static str, &'static str), PathBuf> {
        let registries: Vec<PathBuf> = fs::read_dir(&cache)
            .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
            .unwrap_or_default();
        wanted
            .iter()
            .filter_map(|&(name, version)| {
                registries
                    .iter()
                    .map(|registry| registry.join(format!("{name}-{version}.crate")))
                    .find(|path| path.is_file())
                    .map(|path| ((name, version), path))
            })
            .collect()
    };
    let found = find();
    if found.len() == wanted.len() {
        return found;
    }
    // Two scratch projects, since one cannot depend on two semver-compatible versions.
    let scratch = tempfile::tempdir().unwrap();
    for (side, pick) in [("older", 1), ("newer", 2)] {
        let project = scratch.path().join(side);
        fs::create_dir_all(project.join("src")).unwrap();
        fs::write(project.join("src").join("lib.rs"), "").unwrap();
        let mut manifest = format!(
            "[package]\nname = \"edit-pairs-{side}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n"
        );
        for pair in PAIRS {
            let (name, version) = (pair.0, if pick == 1 { pair.1 } else { pair.2 });
            let _ = writeln!(manifest, "{name} = \"={version}\"");
        }
        fs::write(project.join("Cargo.toml"), manifest).unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .arg("fetch")
            .arg("--manifest-path")
            .arg(project.join("Cargo.toml"))
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cargo fetch of the {side} versions failed"
        );
    }
    let found = find();
    assert_eq!(
        found.len(),
        wanted.len(),
        "archives missing after cargo fetch"
    );
    found
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"),
        PathBuf::from,
    )
}

/// Unpacks a `.crate` (a gzipped tar of `name-version/`) and returns that directory.
fn extract(archive: &Path, into: &Path) -> PathBuf {
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success(), "tar -xzf {}", archive.display());
    let name = archive.file_name().unwrap().to_string_lossy();
    into.join(name.trim_end_matches(".crate"))
}

#[derive(Default)]
struct Skipped {
    binary: usize,
    endings_only: usize,
    /// Whole files added or removed: written with write_file or deleted, by neither tool.
    added_or_removed: usize,
}

struct FileDiff {
    pair: String,
    /// Relative to the crate's root, as the model would name it.
    path: String,
    old: Text,
    new: Text,
    hunks: Vec<Hunk>,
}

/// A file as the tools match it: line contents (without `\n` or a trailing `\r`).
#[derive(Clone)]
struct Text {
    lines: Vec<String>,
    ends_with_newline: bool,
    /// The bytes on disk, for the copy the tools edit.
    raw: String,
}

impl Text {
    fn new(raw: String) -> Self {
        let lines = raw
            .split_inclusive('\n')
            .map(|line| line_content(line).to_owned())
            .collect();
        Self {
            lines,
            ends_with_newline: raw.ends_with('\n'),
            raw,
        }
    }

    /// What edit_file matches against: CRLF read as LF.
    fn joined(&self) -> String {
        let mut text = self.lines.join("\n");
        if self.ends_with_newline {
            text.push('\n');
        }
        text
    }
}

#[derive(Debug, Clone)]
struct Hunk {
    old: Range<usize>,
    new: Range<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Replace,
    Insert,
    Delete,
}

impl Kind {
    fn of(hunk: &Hunk) -> Self {
        if hunk.old.is_empty() {
            Self::Insert
        } else if hunk.new.is_empty() {
            Self::Delete
        } else {
            Self::Replace
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Replace => "replace",
            Self::Insert => "insert",
            Self::Delete => "delete",
        }
    }
}

/// A hunk's size: the larger of the lines it removes and the lines it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bucket {
    One,
    Few,
    Many,
}

impl Bucket {
    fn of(size: usize) -> Self {
        match size {
            0 | 1 => Self::One,
            2..=5 => Self::Few,
            _ => Self::Many,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::One => "1",
            Self::Few => "2-5",
            Self::Many => "6+",
        }
    }
}

fn changed_files(
    pair: &str,
    old_dir: &Path,
    new_dir: &Path,
    skipped: &mut Skipped,
) -> Vec<FileDiff> {
    let mut files = Vec::new();
    for entry in ignore::WalkBuilder::new(old_dir)
        .standard_filters(false)
        .sort_by_file_path(Path::cmp)
        .build()
        .flatten()
    {
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        let relative = entry.path().strip_prefix(old_dir).unwrap();
        let path = relative.to_string_lossy().into_owned();
        if GENERATED.contains(&path.as_str()) {
            continue;
        }
        let (Ok(old), Ok(new)) = (fs::read(entry.path()), fs::read(new_dir.join(relative))) else {
            skipped.added_or_removed += 1;
            continue;
        };
        if old == new {
            continue;
        }
        let (Some(old), Some(new)) = (text(old), text(new)) else {
            skipped.binary += 1;
            continue;
        };
        let (old, new) = (Text::new(old), Text::new(new));
        let hunks = hunks(&old.lines, &new.lines);
        if hunks.is_empty() {
            skipped.endings_only += 1;
            continue;
        }
        files.push(FileDiff {
            pair: pair.to_owned(),
            path,
            old,
            new,
            hunks,
        });
    }
    skipped.added_or_removed += ignore::WalkBuilder::new(new_dir)
        .standard_filters(false)
        .build()
        .flatten()
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .filter(|entry| {
            !old_dir
                .join(entry.path().strip_prefix(new_dir).unwrap())
                .exists()
        })
        .count();
    files
}

/// UTF-8 without NUL bytes, which both tools require.
fn text(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) || bytes.is_empty() {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Runs of changed lines, separated by at least one unchanged line.
fn hunks(old: &[String], new: &[String]) -> Vec<Hunk> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    for op in similar::capture_diff_slices(Algorithm::Myers, old, new) {
        if let DiffOp::Equal { len, .. } = op {
            if len > 0 {
                hunks.extend(current.take());
            }
            continue;
        }
        let (_, old_range, new_range) = op.as_tag_tuple();
        current = Some(match current {
            None => Hunk {
                old: old_range,
                new: new_range,
            },
            Some(hunk) => Hunk {
                old: hunk.old.start..old_range.end,
                new: hunk.new.start..new_range.end,
            },
        });
    }
    hunks.extend(current);
    hunks
}

// ---------------------------------------------------------------------------------------------
// The calls each tool needs.

#[derive(Serialize)]
struct LinesCall<'a> {
    path: &'a str,
    edits: Vec<LineEntry>,
}

#[derive(Serialize)]
struct LineEntry {
    line: usize,
    hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    op: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    new_text: Option<String>,
}

#[derive(Serialize)]
struct ReplaceCall<'a> {
    path: &'a str,
    old_string: &'a str,
    new_string: &'a str,
}

#[derive(Serialize)]
struct ReplaceBatch<'a> {
    path: &'a str,
    edits: &'a [Replacement],
}

#[derive(Debug, Clone, Serialize)]
struct Replacement {
    old_string: String,
    new_string: String,
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap()
}

/// The range-form entry for a hunk, anchored in the file as read.
fn line_entry(old: &Text, new: &Text, hunk: &Hunk) -> LineEntry {
    let anchor = |line: usize| (line, line_hash(&old.lines[line - 1]));
    let new_text = Some(new_text(&new.lines[hunk.new.clone()]));
    match Kind::of(hunk) {
        Kind::Insert => {
            let (op, (line, hash)) = if hunk.old.start == 0 {
                ("insert_before", anchor(1))
            } else {
                ("insert_after", anchor(hunk.old.start))
            };
            LineEntry {
                line,
                hash,
                end_line: None,
                end_hash: None,
                op: Some(op),
                new_text,
            }
        }
        kind => {
            let (line, hash) = anchor(hunk.old.start + 1);
            let end = (hunk.old.len() > 1).then(|| anchor(hunk.old.end));
            let delete = kind == Kind::Delete;
            LineEntry {
                line,
                hash,
                end_line: end.as_ref().map(|(line, _)| *line),
                end_hash: end.map(|(_, hash)| hash),
                op: delete.then_some("delete"),
                new_text: if delete { None } else { new_text },
            }
        }
    }
}

/// edit_lines drops one final newline of new_text, so a block ending in an empty line needs one
/// more.
fn new_text(lines: &[String]) -> String {
    let mut text = lines.join("\n");
    if lines.last().is_some_and(String::is_empty) {
        text.push('\n');
    }
    text
}

/// Occurrences of `needle` in `haystack`, overlapping ones included, stopping at two.
fn occurs_once(haystack: &str, needle: &str) -> bool {
    let Some(first) = haystack.find(needle) else {
        return false;
    };
    let next = first + haystack[first..].chars().next().map_or(1, char::len_utf8);
    !haystack[next..].contains(needle)
}

/// The smallest unique whole-line replacement for lines `start..end` of `text` becoming `new`:
/// context lines are added (before, after, or both) until the old string occurs once; of the
/// candidates at the first size that works, the one with fewest tokens.
fn whole_line_replacement(
    text: &Text,
    joined: &str,
    start: usize,
    end: usize,
    new: &[String],
    tokens: &Tokens,
) -> Replacement {
    let total = text.lines.len();
    for level in 0..=total {
        let mut best: Option<(usize, Replacement)> = None;
        for before in 0..=level {
            let after = level - before;
            if before > start || end + after > total || (start == end && level == 0) {
                continue;
            }
            let old_chunk = &text.lines[start - before..end + after];
            let new_chunk: Vec<&str> = text.lines[start - before..start]
                .iter()
                .chain(new)
                .chain(&text.lines[end..end + after])
                .map(String::as_str)
                .collect();
            let candidate = if new_chunk.is_empty() {
                // Lines deleted with no context: the old string takes a newline with it.
                let lines = old_chunk.join("\n");
                let old_string = if end < total {
                    format!("{lines}\n")
                } else if start > 0 {
                    format!("\n{lines}")
                } else {
                    joined.to_owned()
                };
                Replacement {
                    old_string,
                    new_string: String::new(),
                }
            } else {
                Replacement {
                    old_string: old_chunk.join("\n"),
                    new_string: new_chunk.join("\n"),
                }
            };
            if !occurs_once(joined, &candidate.old_string) {
                continue;
            }
            let cost = tokens.o200k(&json(&candidate));
            if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
                best = Some((cost, candidate));
            }
        }
        if let Some((_, replacement)) = best {
            return replacement;
        }
    }
    unreachable!("the whole file is unique in itself")
}

/// The smallest unique replacement whose strings may start and end inside lines: the changed
/// characters, grown a word at a time on either side until the old string occurs once.
fn tight_replacement(before: &str, after: &str, tokens: &Tokens) -> Option<Replacement> {
    let mut prefix = before
        .bytes()
        .zip(after.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !before.is_char_boundary(prefix) || !after.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let longest_suffix = before.len().min(after.len()) - prefix;
    let mut suffix = before
        .bytes()
        .rev()
        .zip(after.bytes().rev())
        .take(longest_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    while !before.is_char_boundary(before.len() - suffix)
        || !after.is_char_boundary(after.len() - suffix)
    {
        suffix -= 1;
    }
    // The changed span of `before` is start..end; the same span of `after` ends `suffix` early.
    let (start, end) = (prefix, before.len() - suffix);
    let lefts = word_steps_left(before, start, MAX_TIGHT_STEPS);
    let rights = word_steps_right(before, end, MAX_TIGHT_STEPS);
    for level in 0..=2 * MAX_TIGHT_STEPS {
        let mut best: Option<(usize, Replacement)> = None;
        for (left_steps, &from) in lefts.iter().enumerate().take(level + 1) {
            let Some(&to) = rights.get(level - left_steps) else {
                continue;
            };
            let old_string = &before[from..to];
            if old_string.is_empty() || !occurs_once(before, old_string) {
                continue;
            }
            let candidate = Replacement {
                old_string: old_string.to_owned(),
                new_string: after[from..after.len() - (before.len() - to)].to_owned(),
            };
            let cost = tokens.o200k(&json(&candidate));
            if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
                best = Some((cost, candidate));
            }
        }
        if let Some((_, replacement)) = best {
            return Some(replacement);
        }
    }
    None
}

fn word_kind(character: char) -> u8 {
    if character.is_alphanumeric() || character == '_' {
        0
    } else if character == ' ' || character == '\t' {
        1
    } else {
        2
    }
}

/// Positions reached by stepping left a word (a run of word characters, a run of blanks, or one
/// other character) at a time: `[at, …]`.
fn word_steps_left(text: &str, at: usize, steps: usize) -> Vec<usize> {
    let mut positions = vec![at];
    let mut position = at;
    while positions.len() <= steps && position > 0 {
        let mut chars = text[..position].char_indices().rev();
        let (index, first) = chars.next().unwrap();
        position = index;
        if word_kind(first) < 2 {
            for (index, character) in chars {
                if word_kind(character) != word_kind(first) {
                    break;
                }
                position = index;
            }
        }
        positions.push(position);
    }
    positions
}

fn word_steps_right(text: &str, at: usize, steps: usize) -> Vec<usize> {
    let mut positions = vec![at];
    let mut position = at;
    while positions.len() <= steps && position < text.len() {
        let mut chars = text[position..].chars();
        let first = chars.next().unwrap();
        position += first.len_utf8();
        if word_kind(first) < 2 {
            for character in chars {
                if word_kind(character) != word_kind(first) {
                    break;
                }
                position += character.len_utf8();
            }
        }
        positions.push(position);
    }
    positions
}

/// `text` with lines `start..end` replaced by `new`.
fn applied(text: &Text, start: usize, end: usize, new: &[String]) -> Text {
    let mut lines = text.lines.clone();
    lines.splice(start..end, new.iter().cloned());
    Text {
        lines,
        ends_with_newline: text.ends_with_newline,
        raw: String::new(),
    }
}

/// Both forms of edit_file for a hunk at `start..end` of `text` (whole lines, and tight).
fn replacements(
    text: &Text,
    start: usize,
    end: usize,
    new: &[String],
    tokens: &Tokens,
) -> (Replacement, Replacement) {
    let joined = text.joined();
    let whole = whole_line_replacement(text, &joined, start, end, new, tokens);
    let after = applied(text, start, end, new).joined();
    let tight = tight_replacement(&joined, &after, tokens)
        .filter(|tight| tokens.o200k(&json(tight)) < tokens.o200k(&json(&whole)))
        .unwrap_or_else(|| whole.clone());
    (whole, tight)
}

// ---------------------------------------------------------------------------------------------
// Measuring and checking.

#[derive(Debug, Clone, Copy, Default)]
struct Costs {
    edit_file: [usize; 2],
    edit_lines: [usize; 2],
    tight: [usize; 2],
}

struct HunkTokens {
    at: String,
    kind: Kind,
    size: usize,
    bucket: Bucket,
    /// Its own call.
    single: Costs,
    /// Its entry in the file's batched call.
    batched: Costs,
    edit_file_json: String,
    edit_lines_json: String,
}

struct FileCalls {
    pair: String,
    hunks: usize,
    edit_file: [usize; 2],
    edit_lines: [usize; 2],
    tight: [usize; 2],
}

#[derive(Default)]
struct Checks {
    calls: usize,
    failures: Vec<String>,
}

fn measure_file(
    file: &FileDiff,
    tokens: &Tokens,
    checker: &Checker<'_>,
    checks: &mut Checks,
) -> (Vec<HunkTokens>, FileCalls) {
    let path = file.path.as_str();
    let mut hunks = Vec::new();
    let mut entries = Vec::new();
    let mut whole_batch = Vec::new();
    let mut tight_batch = Vec::new();
    // edit_file's batch applies in order: each replacement is found in what the earlier ones left.
    let mut current = file.old.clone();
    let mut shift: isize = 0;
    for hunk in &file.hunks {
        let new_lines = &file.new.lines[hunk.new.clone()];
        let entry = line_entry(&file.old, &file.new, hunk);
        let lines_json = json(&LinesCall {
            path,
            edits: vec![entry_clone(&entry)],
        });
        let (whole, tight) =
            replacements(&file.old, hunk.old.start, hunk.old.end, new_lines, tokens);
        let whole_json = json(&ReplaceCall {
            path,
            old_string: &whole.old_string,
            new_string: &whole.new_string,
        });
        let tight_json = json(&ReplaceCall {
            path,
            old_string: &tight.old_string,
            new_string: &tight.new_string,
        });
        let expected = applied(&file.old, hunk.old.start, hunk.old.end, new_lines).lines;
        for (tool, arguments) in [
            ("edit_lines", &lines_json),
            ("edit_file", &whole_json),
            ("edit_file", &tight_json),
        ] {
            checks.record(checker.check(tool, arguments, &expected), path, tool);
        }

        let start = hunk.old.start.checked_add_signed(shift).unwrap();
        let end = hunk.old.end.checked_add_signed(shift).unwrap();
        let (whole_in_batch, tight_in_batch) =
            replacements(&current, start, end, new_lines, tokens);
        current = applied(&current, start, end, new_lines);
        shift += hunk.new.len() as isize - hunk.old.len() as isize;

        let size = hunk.old.len().max(hunk.new.len());
        hunks.push(HunkTokens {
            at: format!("{} {path}:{}", file.pair, hunk.old.start + 1),
            kind: Kind::of(hunk),
            size,
            bucket: Bucket::of(size),
            single: Costs {
                edit_file: tokens.count(&whole_json),
                edit_lines: tokens.count(&lines_json),
                tight: tokens.count(&tight_json),
            },
            batched: Costs {
                edit_file: tokens.count(&json(&whole_in_batch)),
                edit_lines: tokens.count(&json(&entry)),
                tight: tokens.count(&json(&tight_in_batch)),
            },
            edit_file_json: whole_json,
            edit_lines_json: lines_json,
        });
        entries.push(entry);
        whole_batch.push(whole_in_batch);
        tight_batch.push(tight_in_batch);
    }

    let lines_json = json(&LinesCall {
        path,
        edits: entries,
    });
    // One replacement goes in the plain form, as a model would write it.
    let batch_json = |batch: &[Replacement]| match batch {
        [only] => json(&ReplaceCall {
            path,
            old_string: &only.old_string,
            new_string: &only.new_string,
        }),
        _ => json(&ReplaceBatch { path, edits: batch }),
    };
    let (whole_json, tight_json) = (batch_json(&whole_batch), batch_json(&tight_batch));
    for (tool, arguments) in [
        ("edit_lines", &lines_json),
        ("edit_file", &whole_json),
        ("edit_file", &tight_json),
    ] {
        checks.record(checker.check(tool, arguments, &file.new.lines), path, tool);
    }
    let calls = FileCalls {
        pair: file.pair.clone(),
        hunks: file.hunks.len(),
        edit_file: tokens.count(&whole_json),
        edit_lines: tokens.count(&lines_json),
        tight: tokens.count(&tight_json),
    };
    (hunks, calls)
}

fn entry_clone(entry: &LineEntry) -> LineEntry {
    LineEntry {
        line: entry.line,
        hash: entry.hash.clone(),
        end_line: entry.end_line,
        end_hash: entry.end_hash.clone(),
        op: entry.op,
        new_text: entry.new_text.clone(),
    }
}

impl Checks {
    fn record(&mut self, result: Result<(), String>, path: &str, tool: &str) {
        self.calls += 1;
        if let Err(problem) = result {
            self.failures.push(format!("{tool} on {path}: {problem}"));
        }
    }
}

fn context(root: &Path) -> ToolContext {
    ToolContext::standalone(Workspace::new(root).unwrap())
}

/// Runs calls on a copy of one file, in a workspace of its own.
struct Checker<'a> {
    runtime: &'a Runtime,
    registry: &'a Registry,
    context: ToolContext,
    root: &'a Path,
    file: &'a FileDiff,
}

impl Checker<'_> {
    fn call(&self, tool: &str, arguments: &str) -> Result<String, String> {
        self.runtime
            .block_on(self.registry.call(tool, arguments, &self.context))
            .map(|output| output.text)
            .map_err(|error| error.message)
    }

    /// Puts the older version in place and reads it whole, window after window, as a model
    /// must before anchoring a range in it; returns what each read showed.
    fn read_all(&self) -> Vec<String> {
        let path = self.root.join(&self.file.path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &self.file.old.raw).unwrap();
        let mut outputs = Vec::new();
        let mut offset = 1;
        loop {
            let arguments = serde_json::json!({ "path": self.file.path, "offset": offset });
            let output = self.call("read_file", &arguments.to_string()).unwrap();
            let next = output
                .lines()
                .last()
                .and_then(|note| note.split_once("offset="))
                .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|number| number.parse().ok());
            outputs.push(output);
            match next {
                Some(next) => offset = next,
                None => return outputs,
            }
        }
    }

    /// Applies one call to a fresh copy of the older version and compares the lines.
    fn check(&self, tool: &str, arguments: &str, expected: &[String]) -> Result<(), String> {
        self.read_all();
        self.call(tool, arguments)?;
        let written = fs::read_to_string(self.root.join(&self.file.path)).unwrap();
        let lines: Vec<&str> = written.split_inclusive('\n').map(line_content).collect();
        if lines == expected {
            Ok(())
        } else {
            let first = lines
                .iter()
                .zip(expected)
                .position(|(line, wanted)| line != wanted)
                .unwrap_or(lines.len().min(expected.len()));
            Err(format!(
                "result differs from line {} ({} lines, {} expected): {arguments:.200}",
                first + 1,
                lines.len(),
                expected.len()
            ))
        }
    }
}

/// Tokens of what read_file displayed, with anchors and without.
#[derive(Default)]
struct ReadCost {
    files: usize,
    calls: usize,
    lines: usize,
    anchored: [usize; 2],
    plain: [usize; 2],
    numbered: [usize; 2],
}

impl ReadCost {
    fn add(&mut self, tokens: &Tokens, outputs: &[String]) {
        self.files += 1;
        for output in outputs {
            self.calls += 1;
            let (mut anchored, mut plain, mut numbered) = (Vec::new(), Vec::new(), Vec::new());
            for line in output.lines() {
                // The notes after the lines are the same either way.
                let Some((anchor, content)) = parse_formatted_line(line) else {
                    continue;
                };
                anchored.push(line.to_owned());
                plain.push(content.to_owned());
                numbered.push(format!("{}|{content}", anchor.line));
            }
            self.lines += anchored.len();
            for (sum, lines) in [
                (&mut self.anchored, anchored),
                (&mut self.plain, plain),
                (&mut self.numbered, numbered),
            ] {
                let counted = tokens.count(&lines.join("\n"));
                sum[0] += counted[0];
                sum[1] += counted[1];
            }
        }
    }
}
