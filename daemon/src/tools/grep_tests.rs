//! `grep` over real trees: the `path:line:text` form in path order, context and modes, globs,
//! what is skipped (ignored, hidden, binary), the bounds and the errors.

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
