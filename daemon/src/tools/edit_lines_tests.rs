//! `edit_lines` against real files: anchors checked before anything is written, stale anchors
//! and ranges rejecting the batch, line endings and permissions kept, and the errors.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;
use crate::tools::hashline::format_line;
use crate::tools::read_file::{ReadFile, ReadFileArgs};
use crate::tools::test_context;

struct Fixture {
    _dir: tempfile::TempDir,
    context: ToolContext,
    path: PathBuf,
}

impl Fixture {
    /// A workspace holding `f.txt`, read whole (or only `read_limit` lines) by the model.
    #[allow(clippy::unwrap_used)]
    async fn read(content: &str, read_limit: Option<usize>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("f.txt");
        fs::write(&path, content).unwrap();
        let context = test_context(dir.path());
        let args = ReadFileArgs {
            path: "f.txt".to_owned(),
            offset: None,
            limit: read_limit,
        };
        ReadFile.call(args, &context).await.unwrap();
        Self {
            _dir: dir,
            context,
            path,
        }
    }

    #[allow(clippy::unwrap_used)]
    async fn edit(&self, edits: serde_json::Value) -> Result<String, ToolError> {
        let args = serde_json::from_value(json!({"path": "f.txt", "edits": edits})).unwrap();
        EditLines
            .call(args, &self.context)
            .await
            .map(|output| output.text)
    }

    #[allow(clippy::unwrap_used)]
    fn content(&self) -> String {
        fs::read_to_string(&self.path).unwrap()
    }
}

fn anchor(line: usize, content: &str) -> serde_json::Value {
    json!({"line": line, "hash": line_hash(content)})
}

fn with(mut edit: serde_json::Value, fields: serde_json::Value) -> serde_json::Value {
    if let (Some(edit), Some(fields)) = (edit.as_object_mut(), fields.as_object()) {
        edit.extend(fields.clone());
    }
    edit
}

#[tokio::test]
async fn replaces_a_line_and_shows_the_new_anchors() {
    let fixture = Fixture::read("a\nb\nc\nd\n", None).await;

    let result = fixture
        .edit(json!([with(anchor(2, "b"), json!({"new_text": "B1\nB2"}))]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "a\nB1\nB2\nc\nd\n");
    let expected = [
        "Edited `f.txt`: replaced line 2 with 2 lines. Those lines now read:".to_owned(),
        format_line(1, "a"),
        format_line(2, "B1"),
        format_line(3, "B2"),
        format_line(4, "c"),
    ]
    .join("\n");
    assert_eq!(result, expected);
}

#[tokio::test]
async fn a_stale_anchor_rejects_the_whole_batch_and_shows_the_current_lines() {
    let original = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";
    let fixture = Fixture::read(original, None).await;
    fs::write(&fixture.path, original.replace("five", "FIVE")).unwrap();
    let before = fs::read(&fixture.path).unwrap();

    let error = fixture
        .edit(json!([
            with(anchor(1, "one"), json!({"new_text": "1"})),
            with(anchor(5, "five"), json!({"new_text": "5"})),
        ]))
        .await
        .unwrap_err();

    assert_eq!(fs::read(&fixture.path).unwrap(), before);
    let expected = [
        "Nothing was written to `f.txt`: 1 anchor is stale.".to_owned(),
        format!(
            "- edit 2: line 5 is not the line you read (its hash is now {}, not {})",
            line_hash("FIVE"),
            line_hash("five")
        ),
        "Current lines:".to_owned(),
        format_line(3, "three"),
        format_line(4, "four"),
        format_line(5, "FIVE"),
        format_line(6, "six"),
        format_line(7, "seven"),
        "Retry the whole batch with these anchors (read_file the file again if they are not \
         the lines you meant)."
            .to_owned(),
    ]
    .join("\n");
    assert_eq!(error.message, expected);
}

#[tokio::test]
async fn the_anchors_a_rejection_shows_work_on_retry() {
    let fixture = Fixture::read("one\ntwo\nthree\n", None).await;
    fs::write(&fixture.path, "one\nTWO\nthree\n").unwrap();
    assert!(
        fixture
            .edit(json!([with(anchor(2, "two"), json!({"new_text": "2"}))]))
            .await
            .is_err()
    );

    fixture
        .edit(json!([with(anchor(2, "TWO"), json!({"new_text": "2"}))]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "one\n2\nthree\n");
}

#[tokio::test]
async fn every_stale_anchor_is_listed() {
    let fixture = Fixture::read("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", None).await;
    fs::write(&fixture.path, "a\nB\nc\nd\ne\nf\ng\nh\nI\nj\n").unwrap();

    let error = fixture
        .edit(json!([
            with(anchor(2, "b"), json!({"new_text": "x"})),
            with(anchor(9, "i"), json!({"op": "delete"})),
            with(anchor(20, "t"), json!({"new_text": "x"})),
        ]))
        .await
        .unwrap_err();

    assert!(error.message.contains("3 anchors are stale"), "{error}");
    assert!(
        error.message.contains("- edit 1: line 2 is not the line"),
        "{error}"
    );
    assert!(
        error.message.contains("- edit 2: line 9 is not the line"),
        "{error}"
    );
    assert!(
        error
            .message
            .contains("- edit 3: line 20 does not exist (the file has 10 lines)"),
        "{error}"
    );
    assert!(error.message.contains(&format_line(2, "B")), "{error}");
    assert!(error.message.contains(&format_line(9, "I")), "{error}");
    assert!(
        error
            .message
            .contains(&format!("{}\n...\n", format_line(4, "d"))),
        "{error}"
    );
    assert_eq!(fixture.content(), "a\nB\nc\nd\ne\nf\ng\nh\nI\nj\n");
}

#[tokio::test]
async fn a_range_whose_interior_was_never_shown_is_stale() {
    let fixture = Fixture::read("a\nb\nc\nd\ne\nf\ng\n", Some(3)).await;
    let range = with(
        anchor(2, "b"),
        json!({"end_line": 6, "end_hash": line_hash("f"), "new_text": "X"}),
    );

    let error = fixture.edit(json!([range.clone()])).await.unwrap_err();

    assert!(
        error.message.contains(
            "- edit 1: lines 4-5 inside the range 2-6 differ from what you last read, or \
             were never shown to you"
        ),
        "{error}"
    );
    assert_eq!(fixture.content(), "a\nb\nc\nd\ne\nf\ng\n");
    // The rejection displayed those lines, so the same call now goes through.
    fixture.edit(json!([range])).await.unwrap();
    assert_eq!(fixture.content(), "a\nX\ng\n");
}

#[tokio::test]
async fn a_range_whose_interior_changed_on_disk_is_stale() {
    let fixture = Fixture::read("a\nb\nc\nd\ne\n", None).await;
    fs::write(&fixture.path, "a\nb\nC\nd\ne\n").unwrap();

    let error = fixture
        .edit(json!([with(
            anchor(2, "b"),
            json!({"end_line": 4, "end_hash": line_hash("d"), "op": "delete"}),
        )]))
        .await
        .unwrap_err();

    assert!(
        error.message.contains("line 3 inside the range 2-4"),
        "{error}"
    );
    assert_eq!(fixture.content(), "a\nb\nC\nd\ne\n");
}

#[tokio::test]
async fn ranges_replace_and_delete_inclusively() {
    let fixture = Fixture::read("a\nb\nc\nd\ne\nf\n", None).await;

    fixture
        .edit(json!([
            with(
                anchor(1, "a"),
                json!({"end_line": 2, "end_hash": line_hash("b"), "new_text": "AB"}),
            ),
            with(
                anchor(4, "d"),
                json!({"end_line": 6, "end_hash": line_hash("f"), "op": "delete"}),
            ),
        ]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "AB\nc\n");
}

#[tokio::test]
async fn inserts_and_deletes_apply_at_their_anchors() {
    let fixture = Fixture::read("a\nb\nc\nd\n", None).await;

    let result = fixture
        .edit(json!([
            with(
                anchor(1, "a"),
                json!({"op": "insert_before", "new_text": "top"})
            ),
            with(
                anchor(2, "b"),
                json!({"op": "insert_after", "new_text": "b2\nb3\n"})
            ),
            with(anchor(3, "c"), json!({"op": "delete"})),
        ]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "top\na\nb\nb2\nb3\nd\n");
    assert!(
        result.starts_with(
            "Edited `f.txt`: inserted 1 line before line 1; inserted 2 lines after line 2; \
             deleted line 3."
        ),
        "{result}"
    );
}

#[tokio::test]
async fn crlf_files_stay_crlf() {
    let fixture = Fixture::read("a\r\nb\r\nc\r\n", None).await;

    fixture
        .edit(json!([
            with(anchor(2, "b"), json!({"new_text": "x\ny\n"})),
            with(
                anchor(3, "c"),
                json!({"op": "insert_after", "new_text": "z"})
            ),
        ]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "a\r\nx\r\ny\r\nc\r\nz\r\n");
}

#[tokio::test]
async fn a_missing_final_newline_stays_missing() {
    let fixture = Fixture::read("a\nb", None).await;

    fixture
        .edit(json!([with(
            anchor(2, "b"),
            json!({"op": "insert_after", "new_text": "c"})
        )]))
        .await
        .unwrap();
    assert_eq!(fixture.content(), "a\nb\nc");

    fixture
        .edit(json!([with(anchor(3, "c"), json!({"new_text": "C"}))]))
        .await
        .unwrap();
    assert_eq!(fixture.content(), "a\nb\nC");
}

#[tokio::test]
async fn echoed_anchor_prefixes_are_stripped() {
    let fixture = Fixture::read("fn f() {\n    old();\n}\n", None).await;
    let echoed = format!(
        "{}\n{}\n",
        format_line(2, "    new();"),
        format_line(3, "    more();")
    );

    fixture
        .edit(json!([with(
            anchor(2, "    old();"),
            json!({"new_text": echoed})
        )]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "fn f() {\n    new();\n    more();\n}\n");
}

#[tokio::test]
async fn the_hash_may_be_given_as_a_full_anchor() {
    let fixture = Fixture::read("a\nb\n", None).await;
    let hash = format!("2:{}", line_hash("b"));

    fixture
        .edit(json!([{"line": 2, "hash": hash, "new_text": "B"}]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "a\nB\n");
}

#[tokio::test]
async fn overlapping_edits_are_refused() {
    let fixture = Fixture::read("a\nb\nc\nd\n", None).await;

    let error = fixture
        .edit(json!([
            with(
                anchor(1, "a"),
                json!({"end_line": 3, "end_hash": line_hash("c"), "new_text": "x"}),
            ),
            with(
                anchor(2, "b"),
                json!({"op": "insert_after", "new_text": "y"})
            ),
        ]))
        .await
        .unwrap_err();

    assert_eq!(
        error.message,
        "edits 1 and 2 overlap (edit 1 replaces lines 1-3, edit 2 inserts after line 2): \
         combine them into one edit; nothing was written"
    );
    assert_eq!(fixture.content(), "a\nb\nc\nd\n");
}

#[tokio::test]
async fn two_inserts_at_one_place_are_refused() {
    let fixture = Fixture::read("a\nb\n", None).await;
    let error = fixture
        .edit(json!([
            with(
                anchor(1, "a"),
                json!({"op": "insert_after", "new_text": "x"})
            ),
            with(
                anchor(2, "b"),
                json!({"op": "insert_before", "new_text": "y"})
            ),
        ]))
        .await
        .unwrap_err();
    assert!(error.message.contains("overlap"), "{error}");
}

#[tokio::test]
async fn the_result_anchors_allow_chaining_without_a_new_read() {
    let fixture = Fixture::read("a\nb\nc\n", None).await;
    fixture
        .edit(json!([with(
            anchor(2, "b"),
            json!({"new_text": "x\ny\nz"})
        )]))
        .await
        .unwrap();

    fixture
        .edit(json!([with(
            anchor(2, "x"),
            json!({"end_line": 4, "end_hash": line_hash("z"), "new_text": "xyz"}),
        )]))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "a\nxyz\nc\n");
}

#[tokio::test]
async fn permissions_survive_the_atomic_write() {
    let fixture = Fixture::read("#!/bin/sh\necho hi\n", None).await;
    fs::set_permissions(&fixture.path, fs::Permissions::from_mode(0o754)).unwrap();

    fixture
        .edit(json!([with(
            anchor(2, "echo hi"),
            json!({"new_text": "echo bye"})
        )]))
        .await
        .unwrap();

    let mode = fs::metadata(&fixture.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o754);
    assert_eq!(fixture.content(), "#!/bin/sh\necho bye\n");
}

#[tokio::test]
async fn deleting_every_line_leaves_an_empty_file() {
    let fixture = Fixture::read("a\nb\n", None).await;
    let result = fixture
        .edit(json!([with(
            anchor(1, "a"),
            json!({"end_line": 2, "end_hash": line_hash("b"), "op": "delete"}),
        )]))
        .await
        .unwrap();
    assert_eq!(fixture.content(), "");
    assert_eq!(
        result,
        "Edited `f.txt`: deleted lines 1-2. The file is now empty."
    );
}

#[tokio::test]
async fn an_edit_that_changes_nothing_says_so() {
    let fixture = Fixture::read("a\nb\n", None).await;
    let edits = json!([with(anchor(2, "b"), json!({"new_text": "b"}))]);
    let args = serde_json::from_value(json!({"path": "f.txt", "edits": edits})).unwrap();
    let result = EditLines.call(args, &fixture.context).await.unwrap();
    assert!(result.changed_nothing, "{result:?}");
    assert!(result.text.starts_with("No change"), "{result:?}");
    assert_eq!(fixture.content(), "a\nb\n");
}

#[tokio::test]
async fn malformed_edits_are_refused_before_anything_is_written() {
    let fixture = Fixture::read("a\nb\n", None).await;
    let cases = [
        (json!([]), "edits is empty"),
        (json!([anchor(1, "a")]), "new_text is missing"),
        (
            json!([with(
                anchor(1, "a"),
                json!({"end_line": 2, "new_text": "x"})
            )]),
            "needs both end_line and end_hash",
        ),
        (
            json!([with(
                anchor(2, "b"),
                json!({"end_line": 1, "end_hash": line_hash("a"), "new_text": "x"}),
            )]),
            "end_line 1 comes before line 2",
        ),
        (
            json!([with(
                anchor(1, "a"),
                json!({
                    "end_line": 2,
                    "end_hash": line_hash("b"),
                    "op": "insert_after",
                    "new_text": "x",
                }),
            )]),
            "take one anchor, not a range",
        ),
        (
            json!([{"line": 0, "hash": "abc", "new_text": "x"}]),
            "line numbers start at 1",
        ),
    ];
    for (edits, expected) in cases {
        let error = fixture.edit(edits).await.unwrap_err();
        assert!(error.message.contains(expected), "{expected}: {error}");
    }
    assert_eq!(fixture.content(), "a\nb\n");
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let fixture = Fixture::read("a\n", None).await;
    let args = serde_json::from_value(json!({
        "path": "../f.txt",
        "edits": [with(anchor(1, "a"), json!({"new_text": "x"}))],
    }))
    .unwrap();
    let error = EditLines.call(args, &fixture.context).await.unwrap_err();
    assert!(error.message.contains("refused `../f.txt`"), "{error}");
}

#[tokio::test]
async fn touched_paths_name_the_file() {
    let args: EditLinesArgs =
        serde_json::from_value(json!({"path": "src/a.rs", "edits": []})).unwrap();
    assert_eq!(args.touched_paths(), vec![PathBuf::from("src/a.rs")]);
}
