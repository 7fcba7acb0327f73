//! The checkpoint store as a rewind uses it: what is saved before a change, what a rewind and
//! its undo put back, and what survives a crash or a damaged ledger.

use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;
use crate::store::ObjectId;

/// Every entry under `root`: kind, content (or link target) and permission bits.
#[allow(clippy::unwrap_used)]
fn tree(root: &Path) -> BTreeMap<String, (&'static str, Vec<u8>, u32)> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let key = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let metadata = fs::symlink_metadata(&path).unwrap();
            let mode = metadata.permissions().mode() & 0o7777;
            let value = if metadata.file_type().is_symlink() {
                let target = fs::read_link(&path).unwrap();
                ("link", target.to_str().unwrap().as_bytes().to_vec(), 0)
            } else if metadata.is_dir() {
                pending.push(path);
                ("dir", Vec::new(), mode)
            } else {
                ("file", fs::read(&path).unwrap(), mode)
            };
            entries.insert(key, value);
        }
    }
    entries
}

#[allow(clippy::unwrap_used)]
fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A workspace with a script, a file to edit, one to delete, a link and an ignored build
/// directory, and a store for it in a separate session directory.
#[allow(clippy::unwrap_used)]
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let session = dir.path().join("home/sessions/s1");
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(root.join("target")).unwrap();
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
    fs::write(root.join("target/app"), "ignored build output").unwrap();
    fs::write(root.join("notes.txt"), "line 1\nline 2\nline 3\n").unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\necho old\n").unwrap();
    set_mode(&root.join("run.sh"), 0o750);
    fs::write(root.join("doomed.txt"), "delete me\n").unwrap();
    set_mode(&root.join("doomed.txt"), 0o600);
    fs::write(root.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    symlink("src/lib.rs", root.join("lib-link")).unwrap();
    (dir, root, session)
}

/// `sed -i`: a new file renamed over the old one, keeping its mode.
#[allow(clippy::unwrap_used)]
fn sed_in_place(path: &Path, from: &str, to: &str) {
    let content = fs::read_to_string(path).unwrap().replace(from, to);
    let mode = fs::metadata(path).unwrap().permissions().mode();
    let temp = path.with_extension("sed-tmp");
    fs::write(&temp, content).unwrap();
    set_mode(&temp, mode);
    fs::rename(&temp, path).unwrap();
}

fn keys(paths: &[PathBuf]) -> Vec<&str> {
    paths.iter().filter_map(|path| path.to_str()).collect()
}

#[test]
fn two_prompts_one_editing_files_one_using_the_shell_rewind_byte_for_byte() {
    let (_dir, root, session) = setup();
    let original = tree(&root);
    let mut store = CheckpointStore::open(&session, &root).unwrap();

    // Prompt 1: the file tools (edit_lines, write_file) declare their paths.
    store.begin(1, "edit the notes").unwrap();
    store
        .record_before(&["notes.txt", "docs/guide/new.md"])
        .unwrap();
    fs::write(root.join("notes.txt"), "line 1\nline two\nline 3\n").unwrap();
    fs::create_dir_all(root.join("docs/guide")).unwrap();
    fs::write(root.join("docs/guide/new.md"), "# Guide\n").unwrap();
    // A second edit of the same file in the same prompt: the first state still counts.
    store.record_before(&[root.join("notes.txt")]).unwrap();
    fs::write(root.join("notes.txt"), "line 1\nline two\nline three\n").unwrap();
    store.sync().unwrap();
    let after_prompt_1 = tree(&root);

    // Prompt 2: bash edits a script in place, creates a file and a directory, deletes a
    // file, and replaces the link; the build output it writes is ignored.
    store.begin(2, "fix the script").unwrap();
    let snapshot = store.snapshot().unwrap();
    sed_in_place(&root.join("run.sh"), "old", "new");
    fs::write(root.join("generated.txt"), "fresh\n").unwrap();
    fs::create_dir(root.join("out")).unwrap();
    fs::write(root.join("out/report.txt"), "report\n").unwrap();
    fs::remove_file(root.join("doomed.txt")).unwrap();
    fs::remove_file(root.join("lib-link")).unwrap();
    symlink("notes.txt", root.join("lib-link")).unwrap();
    fs::write(root.join("target/app"), "rebuilt").unwrap();
    let changes = store.after_command(snapshot).unwrap();
    assert_eq!(keys(&changes.changed), ["lib-link", "run.sh"]);
    assert_eq!(
        keys(&changes.created),
        ["generated.txt", "out", "out/report.txt"]
    );
    assert_eq!(keys(&changes.deleted), ["doomed.txt"]);
    assert!(changes.not_checkpointed.is_empty());
    store.sync().unwrap();
    let after_prompt_2 = tree(&root);

    let listed = store.list();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].prompt, "edit the notes");
    assert_eq!(
        keys(&listed[0].files),
        ["docs", "docs/guide", "docs/guide/new.md", "notes.txt"]
    );
    assert_eq!(listed[1].files.len(), 6);

    let report = store.restore_to_before(2).unwrap();
    assert!(report.is_complete(), "{:?}", report.failed);
    assert_eq!((report.turn, report.prompt.as_str()), (2, "fix the script"));
    assert_eq!(
        keys(&report.removed),
        ["generated.txt", "out", "out/report.txt"]
    );
    assert_eq!(keys(&report.restored), ["doomed.txt", "lib-link", "run.sh"]);
    let mut expected = after_prompt_1.clone();
    expected.insert(
        "target/app".to_owned(),
        after_prompt_2["target/app"].clone(),
    );
    assert_eq!(tree(&root), expected);
    assert_eq!(store.list().len(), 1);

    let report = store.restore_to_before(1).unwrap();
    assert!(report.is_complete(), "{:?}", report.failed);
    assert_eq!(report.prompt, "edit the notes");
    let mut expected = original.clone();
    expected.insert(
        "target/app".to_owned(),
        after_prompt_2["target/app"].clone(),
    );
    assert_eq!(tree(&root), expected);
    assert!(store.list().is_empty());

    // Undo goes back one rewind at a time, and brings the checkpoints back.
    assert_eq!(store.undoable(), Some(1));
    store.undo_restore().unwrap();
    assert_eq!(tree(&root)["notes.txt"], after_prompt_1["notes.txt"]);
    assert_eq!(store.list().len(), 1);
    let report = store.undo_restore().unwrap();
    assert!(report.is_complete(), "{:?}", report.failed);
    assert_eq!(tree(&root), after_prompt_2);
    assert_eq!(store.list().len(), 2);
    assert!(matches!(
        store.undo_restore(),
        Err(StoreError::NothingToUndo)
    ));
}

#[test]
fn a_rewind_survives_a_restart_and_is_committed_by_the_next_prompt() {
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "first").unwrap();
    store.record_before(&["notes.txt"]).unwrap();
    fs::write(root.join("notes.txt"), "v1\n").unwrap();
    store.begin(2, "second").unwrap();
    let snapshot = store.snapshot().unwrap();
    fs::remove_file(root.join("doomed.txt")).unwrap();
    store.after_command(snapshot).unwrap();
    store.restore_to_before(2).unwrap();
    assert_eq!(fs::read(root.join("doomed.txt")).unwrap(), b"delete me\n");
    drop(store);

    // A restarted daemon can still undo the rewind.
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    assert_eq!(store.undoable(), Some(2));
    store.undo_restore().unwrap();
    assert!(!root.join("doomed.txt").exists());
    store.restore_to_before(2).unwrap();

    // The next prompt commits it: no undo, and what only the rewound prompt needed is
    // collected (the deleted file's content lives in the workspace again).
    store.begin(2, "second, again").unwrap();
    assert!(matches!(
        store.undo_restore(),
        Err(StoreError::NothingToUndo)
    ));
    let turns: Vec<u32> = store.list().iter().map(|c| c.turn).collect();
    assert_eq!(turns, [1, 2]);
    assert!(!store.objects.contains(&ObjectId::of(b"delete me\n")));
    assert!(
        store
            .objects
            .contains(&ObjectId::of(b"line 1\nline 2\nline 3\n"))
    );
    let reopened = CheckpointStore::open(&session, &root).unwrap();
    assert_eq!(reopened.list(), store.list());
    assert_eq!(reopened.list()[1].prompt, "second, again");
    store.restore_to_before(1).unwrap();
    assert_eq!(
        fs::read(root.join("notes.txt")).unwrap(),
        b"line 1\nline 2\nline 3\n"
    );
}

#[test]
fn identical_content_is_stored_once() {
    let (_dir, root, session) = setup();
    for name in ["a.txt", "b.txt", "src/c.txt"] {
        fs::write(root.join(name), "the same bytes\n").unwrap();
    }
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "p").unwrap();
    store.snapshot().unwrap();
    store.record_before(&["a.txt", "b.txt"]).unwrap();
    let id = ObjectId::of(b"the same bytes\n");
    let hex = id.to_string();
    let fan_out = session.join("objects").join(&hex[..2]);
    let matching: Vec<_> = fs::read_dir(fan_out)
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy() == hex[2..])
        .collect();
    assert_eq!(matching.len(), 1);
}

#[test]
fn a_torn_ledger_line_loses_only_that_record() {
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "first").unwrap();
    store.record_before(&["notes.txt"]).unwrap();
    drop(store);
    let ledger = session.join(CHECKPOINTS_FILE);
    let mut bytes = fs::read(&ledger).unwrap();
    bytes.extend_from_slice(br#"{"type":"begin","turn":2,"prompt":"cut sh"#);
    fs::write(&ledger, bytes).unwrap();

    let mut store = CheckpointStore::open(&session, &root).unwrap();
    assert_eq!(store.list().len(), 1);
    assert_eq!(keys(&store.list()[0].files), ["notes.txt"]);
    store.begin(2, "second").unwrap();
    let reopened = CheckpointStore::open(&session, &root).unwrap();
    assert_eq!(reopened.list().len(), 2);
    assert_eq!(reopened.list()[1].prompt, "second");
}

#[test]
fn big_files_are_not_kept_for_the_shell_and_the_rewind_says_so() {
    let (_dir, root, session) = setup();
    let options = StoreOptions {
        max_snapshot_file_bytes: 16,
        ..StoreOptions::default()
    };
    fs::write(root.join("big.log"), "more than sixteen bytes\n").unwrap();
    let mut store = CheckpointStore::open_with(&session, &root, options).unwrap();
    store.begin(1, "p").unwrap();
    let snapshot = store.snapshot().unwrap();
    assert_eq!(snapshot.skipped().len(), 3, "{:?}", snapshot.skipped());
    fs::write(root.join("big.log"), "changed\n").unwrap();
    let changes = store.after_command(snapshot).unwrap();
    assert_eq!(changes.not_checkpointed.len(), 1);
    assert_eq!(changes.not_checkpointed[0].path, Path::new("big.log"));
    assert!(
        changes.not_checkpointed[0]
            .reason
            .contains("24 bytes is over the 16 bytes bound")
    );

    let report = store.restore_to_before(1).unwrap();
    assert_eq!(report.failed.len(), 1);
    assert!(
        report.failed[0].reason.contains("not recorded"),
        "{:?}",
        report.failed
    );
    assert_eq!(fs::read(root.join("big.log")).unwrap(), b"changed\n");
}

#[test]
fn the_session_directory_inside_the_workspace_is_not_walked() {
    let (_dir, root, _) = setup();
    let session = root.join(".cwcode/sessions/s1");
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "p").unwrap();
    let snapshot = store.snapshot().unwrap();
    // Objects and ledger lines written during the command are the store's own.
    store.record_before(&["notes.txt"]).unwrap();
    let changes = store.after_command(snapshot).unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn a_new_session_directory_reached_through_a_symlink_is_not_walked_either() {
    let (dir, root, _) = setup();
    fs::create_dir(root.join(".home")).unwrap();
    symlink(root.join(".home"), dir.path().join("home-link")).unwrap();
    let session = dir.path().join("home-link/sessions/s1");
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    let snapshot = store.snapshot().unwrap();
    store.begin(1, "p").unwrap();
    store.record_before(&["notes.txt"]).unwrap();
    let changes = store.after_command(snapshot).unwrap();
    assert_eq!(keys(&changes.created), [".home/sessions"]);
}

#[test]
fn misuse_is_reported_plainly() {
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    let error = store.record_before(&["notes.txt"]).unwrap_err();
    assert!(matches!(error, StoreError::NoTurn), "{error}");
    store.begin(3, "p").unwrap();
    store.begin(3, "p").unwrap();
    let error = store.begin(2, "p").unwrap_err();
    assert_eq!(
        error.to_string(),
        "prompt 2 cannot begin after prompt 3: turn numbers only increase"
    );
    let error = store.restore_to_before(1).unwrap_err();
    assert_eq!(
        error.to_string(),
        "there is no checkpoint for prompt 1 (checkpoints exist for prompts 3)"
    );
}

#[test]
fn a_file_in_the_way_of_the_store_fails_cleanly_and_corrupts_nothing() {
    // Root ignores permission bits, so a read-only home is imitated by a regular file
    // where the store needs its `objects` directory: creating anything under it fails
    // (ENOTDIR) as it would on a read-only or full disk.
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "p").unwrap();
    store.record_before(&["src/lib.rs"]).unwrap();
    let ledger_before = fs::read(session.join(CHECKPOINTS_FILE)).unwrap();
    let objects = session.join(OBJECTS_DIR);
    fs::rename(&objects, session.join("objects.moved")).unwrap();
    fs::write(&objects, "in the way").unwrap();

    let error = store.record_before(&["notes.txt"]).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&objects.display().to_string()),
        "{message}"
    );
    assert!(message.contains("move it aside"), "{message}");
    assert_eq!(
        fs::read(session.join(CHECKPOINTS_FILE)).unwrap(),
        ledger_before
    );
    let error = store.restore_to_before(1).unwrap_err();
    assert!(error.to_string().contains("move it aside"), "{error}");
    assert_eq!(
        fs::read(root.join("src/lib.rs")).unwrap(),
        b"pub fn f() {}\n"
    );
    assert_eq!(
        fs::read(session.join(CHECKPOINTS_FILE)).unwrap(),
        ledger_before
    );

    // Once the way is clear, the store carries on where it was.
    fs::remove_file(&objects).unwrap();
    fs::rename(session.join("objects.moved"), &objects).unwrap();
    store.record_before(&["notes.txt"]).unwrap();
    assert_eq!(keys(&store.list()[0].files), ["notes.txt", "src/lib.rs"]);
}

#[test]
fn a_full_disk_fails_with_the_path_and_the_fix_and_keeps_the_ledger_whole() {
    // /dev/full answers every write with ENOSPC: the ledger is pointed at it for a while.
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "p").unwrap();
    let ledger = session.join(CHECKPOINTS_FILE);
    let saved = session.join("checkpoints.saved");
    fs::rename(&ledger, &saved).unwrap();
    symlink("/dev/full", &ledger).unwrap();

    let error = store.begin(2, "q").unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&ledger.display().to_string()), "{message}");
    assert!(message.contains("free some space"), "{message}");
    assert_eq!(store.list().len(), 1, "memory follows the disk");

    fs::remove_file(&ledger).unwrap();
    fs::rename(&saved, &ledger).unwrap();
    store.begin(2, "q").unwrap();
    let turns: Vec<u32> = CheckpointStore::open(&session, &root)
        .unwrap()
        .list()
        .iter()
        .map(|c| c.turn)
        .collect();
    assert_eq!(turns, [1, 2]);
}

#[test]
fn paths_are_keyed_relative_to_the_workspace_however_they_are_given() {
    let (_dir, root, session) = setup();
    let mut store = CheckpointStore::open(&session, &root).unwrap();
    store.begin(1, "p").unwrap();
    store
        .record_before(&[
            root.join("src/lib.rs"),
            PathBuf::from("./src/../notes.txt"),
            PathBuf::from("."),
        ])
        .unwrap();
    assert_eq!(keys(&store.list()[0].files), ["notes.txt", "src/lib.rs"]);
}
