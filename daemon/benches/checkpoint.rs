//! Checkpoint benchmarks (SPEC §11), each run beside its reference in the same process:
//!
//! - checkpointing around a bash command in a 10,000-file workspace where nothing changed
//!   (`snapshot` + `after_command`, target under 50 ms), against one plain `ignore` walk with a
//!   stat of every entry, the least any stat-based check must do (the store walks twice: before
//!   and after the command);
//! - rewinding 1,000 changed files (`restore_to_before`, which first keeps the current content
//!   for undo, durably), against writing the same 1,000 files with `fs::write`.
//!
//! Run: `cargo bench -p cwcoded --bench checkpoint`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cwcoded::store::{CheckpointStore, StoreOptions};
use ignore::{WalkBuilder, WalkState};

const FILES: usize = 10_000;
const FILES_PER_DIR: usize = 100;
const IGNORED_FILES: usize = 2_000;
const CHANGED: usize = 1_000;
const WALK_ROUNDS: usize = 31;
const RESTORE_ROUNDS: usize = 7;
const TARGET: Duration = Duration::from_millis(50);

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspace");
    let files = build_workspace(&root);
    // Files written less than the racy window before a snapshot are compared by content, as
    // they would be in real use right after a build; the steady state is measured here.
    std::thread::sleep(StoreOptions::default().racy_window + Duration::from_millis(100));

    let session = dir.path().join("session");
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "benchmark").unwrap();
    let started = Instant::now();
    let snapshot = store.snapshot().unwrap();
    let first_snapshot = started.elapsed();
    assert!(store.after_command(snapshot).unwrap().is_empty());

    let mut reference = Vec::new();
    let mut checkpoint = Vec::new();
    let mut snapshot_only = Vec::new();
    for _ in 0..WALK_ROUNDS {
        let started = Instant::now();
        let entries = plain_walk_with_stat(&root);
        reference.push(started.elapsed());
        // The files, their directories, `src`, `.gitignore` and the root.
        assert_eq!(entries, FILES + FILES / FILES_PER_DIR + 3);

        let started = Instant::now();
        let snapshot = store.snapshot().unwrap();
        let snapshotted = started.elapsed();
        let changes = store.after_command(snapshot).unwrap();
        checkpoint.push(started.elapsed());
        snapshot_only.push(snapshotted);
        assert!(changes.is_empty(), "{changes:?}");
    }
    let (reference, checkpoint) = (median(reference), median(checkpoint));
    println!(
        "checkpoint around a bash command, {FILES} files (+{IGNORED_FILES} ignored), nothing changed"
    );
    println!(
        "  snapshot + after_command     {:>9}  (snapshot alone {})",
        ms(checkpoint),
        ms(median(snapshot_only))
    );
    println!("  reference: one ignore walk + stat {:>9}", ms(reference));
    println!(
        "  ratio {:.2}x the reference; target under {} ms: {}",
        ratio(checkpoint, reference),
        TARGET.as_millis(),
        if checkpoint < TARGET {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "  first snapshot (reads and stores every file once): {}",
        ms(first_snapshot)
    );

    let changed: Vec<PathBuf> = files.iter().step_by(FILES / CHANGED).cloned().collect();
    assert_eq!(changed.len(), CHANGED);
    let originals: Vec<Vec<u8>> = changed.iter().map(|path| fs::read(path).unwrap()).collect();
    let mut restore = Vec::new();
    let mut undo = Vec::new();
    let mut plain_write = Vec::new();
    for round in 0..RESTORE_ROUNDS {
        let turn = u32::try_from(round).unwrap() + 2;
        store.begin(turn, "change a thousand files").unwrap();
        let snapshot = store.snapshot().unwrap();
        for path in &changed {
            fs::write(
                path,
                format!("rewritten in round {round}\n{}", path.display()),
            )
            .unwrap();
        }
        let changes = store.after_command(snapshot).unwrap();
        assert_eq!(changes.changed.len(), CHANGED);
        // The turn boundary, where the session syncs its journal and its checkpoints.
        store.sync().unwrap();

        let started = Instant::now();
        let report = store.restore_to_before(turn).unwrap();
        restore.push(started.elapsed());
        assert_eq!(report.restored.len(), CHANGED);
        assert!(report.is_complete());

        let started = Instant::now();
        store.undo_restore().unwrap();
        undo.push(started.elapsed());
        store.restore_to_before(turn).unwrap();

        let started = Instant::now();
        for (path, content) in changed.iter().zip(&originals) {
            fs::write(path, content).unwrap();
        }
        plain_write.push(started.elapsed());
    }
    let (restore, plain_write) = (median(restore), median(plain_write));
    println!("rewind of {CHANGED} changed files");
    println!(
        "  restore_to_before            {:>9}  (undo of it {})",
        ms(restore),
        ms(median(undo))
    );
    println!(
        "  reference: fs::write of the same files {:>9}",
        ms(plain_write)
    );
    println!("  ratio {:.2}x the reference", ratio(restore, plain_write));
}

/// `FILES` source-like files of 1–3 KiB in directories of `FILES_PER_DIR`, and an ignored
/// build directory; returns the tracked files.
fn build_workspace(root: &Path) -> Vec<PathBuf> {
    fs::create_dir_all(root.join("target/debug")).unwrap();
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for index in 0..IGNORED_FILES {
        fs::write(
            root.join(format!("target/debug/artifact{index}.o")),
            "object",
        )
        .unwrap();
    }
    let mut files = Vec::with_capacity(FILES);
    for index in 0..FILES {
        let dir = root.join(format!("src/module{:03}", index / FILES_PER_DIR));
        if index % FILES_PER_DIR == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        let path = dir.join(format!("file{index:05}.rs"));
        let line = format!("pub fn function_{index}() -> usize {{ {index} }}\n");
        fs::write(&path, line.repeat(25 + index % 50)).unwrap();
        files.push(path);
    }
    files
}

/// The same walk the store makes (hidden files included, .gitignore honoured, `.git` left
/// out, in parallel), with one stat per entry and nothing else.
fn plain_walk_with_stat(root: &Path) -> usize {
    let count = AtomicUsize::new(0);
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .current_dir(root)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder.build_parallel().run(|| {
        let count = &count;
        Box::new(move |entry| {
            if let Ok(entry) = entry
                && entry.metadata().is_ok()
            {
                count.fetch_add(1, Ordering::Relaxed);
            }
            WalkState::Continue
        })
    });
    count.into_inner()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn ratio(measured: Duration, reference: Duration) -> f64 {
    measured.as_secs_f64() / reference.as_secs_f64()
}
