//! `read_file` against real files: anchored lines and windows, the notes on what was left out,
//! binary, empty and invalid files, the result bound, and a large file read quickly.

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
