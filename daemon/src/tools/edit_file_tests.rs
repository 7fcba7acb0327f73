//! `edit_file` against real files: unique and repeated matches, CRLF and no-break-space
//! forgiveness, batches that apply whole or not at all, the closest lines on a miss, and the errors.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;
use crate::tools::test_context;

struct Fixture {
    _dir: tempfile::TempDir,
    context: ToolContext,
    path: PathBuf,
}

impl Fixture {
    #[allow(clippy::unwrap_used)]
    fn new(content: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), content).unwrap();
        let context = test_context(dir.path());
        let path = context.workspace.root().join("f.txt");
        Self {
            _dir: dir,
            context,
            path,
        }
    }

    #[allow(clippy::unwrap_used)]
    async fn edit(&self, arguments: serde_json::Value) -> Result<String, ToolError> {
        let mut arguments = arguments;
        arguments["path"] = json!("f.txt");
        EditFile
            .call(serde_json::from_value(arguments).unwrap(), &self.context)
            .await
            .map(|output| output.text)
    }

    #[allow(clippy::unwrap_used)]
    fn content(&self) -> String {
        fs::read_to_string(&self.path).unwrap()
    }
}

#[tokio::test]
async fn replaces_a_unique_string_and_forgets_the_read() {
    let fixture = Fixture::new("fn a() {\n    old();\n}\n");
    fixture.context.reads.lock().unwrap().record(
        fixture.path.clone(),
        3,
        [(2, "    old();".to_owned())],
    );

    let result = fixture
        .edit(json!({"old_string": "old();", "new_string": "new();\n    more();"}))
        .await
        .unwrap();

    assert_eq!(result, "Edited `f.txt`: 1 replacement at line 2.");
    assert_eq!(fixture.content(), "fn a() {\n    new();\n    more();\n}\n");
    assert_eq!(
        fixture
            .context
            .reads
            .lock()
            .unwrap()
            .shown(&fixture.path, 2),
        None
    );
}

#[tokio::test]
async fn an_ambiguous_string_is_refused_with_its_lines() {
    let fixture = Fixture::new("x = 1\ny = 2\nx = 1\n");

    let error = fixture
        .edit(json!({"old_string": "x = 1", "new_string": "x = 3"}))
        .await
        .unwrap_err();

    assert_eq!(
        error.message,
        "old_string matches 2 places in `f.txt` (lines 1, 3): include more surrounding \
         lines to make it unique, or set replace_all to replace every one; nothing was \
         written"
    );
    assert_eq!(fixture.content(), "x = 1\ny = 2\nx = 1\n");
}

#[tokio::test]
async fn replace_all_replaces_every_occurrence() {
    let fixture = Fixture::new("x = 1\ny = 2\nx = 1\n");

    let result = fixture
        .edit(json!({"old_string": "x = 1", "new_string": "x = 3", "replace_all": true}))
        .await
        .unwrap();

    assert_eq!(result, "Edited `f.txt`: 2 replacements at lines 1, 3.");
    assert_eq!(fixture.content(), "x = 3\ny = 2\nx = 3\n");
}

#[tokio::test]
async fn crlf_files_match_lf_text_and_stay_crlf() {
    let fixture = Fixture::new("one\r\ntwo\r\nthree\r\n");

    fixture
        .edit(json!({"old_string": "one\ntwo\n", "new_string": "1\n2\n2.5\n"}))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "1\r\n2\r\n2.5\r\nthree\r\n");
}

#[tokio::test]
async fn crlf_text_matches_an_lf_file_and_writes_lf() {
    let fixture = Fixture::new("one\ntwo\n");
    fixture
        .edit(json!({"old_string": "one\r\ntwo", "new_string": "a\r\nb"}))
        .await
        .unwrap();
    assert_eq!(fixture.content(), "a\nb\n");
}

#[tokio::test]
async fn nbsp_and_space_match_each_other() {
    let fixture = Fixture::new("a\u{a0}=\u{a0}1;\nb = 2;\n");

    fixture
        .edit(json!({"old_string": "b\u{a0}= 2;", "new_string": "b\u{a0}= 3;"}))
        .await
        .unwrap();
    fixture
        .edit(json!({"old_string": "a = 1;", "new_string": "a = 4;"}))
        .await
        .unwrap();

    // The file had no-break spaces, so the one in the first new_string is kept; the second
    // new_string has plain spaces and is written as given.
    assert_eq!(fixture.content(), "a = 4;\nb\u{a0}= 3;\n");
}

#[tokio::test]
async fn nbsp_the_file_never_had_is_written_as_a_space() {
    let fixture = Fixture::new("a b\n");
    fixture
        .edit(json!({"old_string": "a\u{a0}b", "new_string": "a\u{a0}c"}))
        .await
        .unwrap();
    assert_eq!(fixture.content(), "a c\n");
}

#[tokio::test]
async fn a_batch_applies_in_order() {
    let fixture = Fixture::new("alpha\nbeta\ngamma\n");

    let result = fixture
        .edit(json!({"edits": [
            {"old_string": "alpha", "new_string": "ALPHA\nextra"},
            {"old_string": "ALPHA", "new_string": "first"},
            {"old_string": "a\n", "new_string": "A\n", "replace_all": true},
        ]}))
        .await
        .unwrap();

    assert_eq!(fixture.content(), "first\nextrA\nbetA\ngammA\n");
    assert_eq!(
        result,
        "Edited `f.txt`: edit 1: 1 replacement at line 1; edit 2: 1 replacement at line 1; \
         edit 3: 3 replacements at lines 2, 3, 4."
    );
}

#[tokio::test]
async fn one_failing_edit_rejects_the_whole_batch() {
    let fixture = Fixture::new("alpha\nbeta\n");

    let error = fixture
        .edit(json!({"edits": [
            {"old_string": "alpha", "new_string": "a"},
            {"old_string": "delta", "new_string": "d"},
        ]}))
        .await
        .unwrap_err();

    assert!(
        error
            .message
            .starts_with("edit 2 of 2: old_string was not found in `f.txt`"),
        "{error}"
    );
    assert!(error.message.ends_with("; nothing was written"), "{error}");
    assert_eq!(fixture.content(), "alpha\nbeta\n");
}

#[tokio::test]
async fn not_found_names_the_closest_lines() {
    let fixture = Fixture::new(
        "fn main() {\n    let total = compute(1, 2);\n    println!(\"{total}\");\n}\n\
         fn other() {\n    let totals = compute(3);\n}\n",
    );

    let error = fixture
        .edit(json!({
            "old_string": "let total = compute(1,2);\nprintln!(\"{total}\");",
            "new_string": "x",
        }))
        .await
        .unwrap_err();

    assert_eq!(
        error.message,
        "old_string was not found in `f.txt`. Lines most like its first line:\n\
         2|     let total = compute(1, 2);\n\
         3|     println!(\"{total}\");\n\
         6|     let totals = compute(3);\n\
         Copy the text exactly as the file has it, then retry; nothing was written"
    );
}

#[tokio::test]
async fn not_found_without_any_similar_line_says_so() {
    let fixture = Fixture::new("alpha\nbeta\n");
    let error = fixture
        .edit(json!({"old_string": "zzzz qqqq", "new_string": "x"}))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "old_string was not found in `f.txt`. No line resembles its first line `zzzz \
         qqqq`: read the file to find the text; nothing was written"
    );
}

#[tokio::test]
async fn malformed_arguments_are_refused() {
    let fixture = Fixture::new("a\n");
    let cases = [
        (json!({}), "old_string is missing"),
        (json!({"old_string": "a"}), "new_string is missing"),
        (json!({"edits": []}), "edits is empty"),
        (
            json!({"old_string": "a", "new_string": "b", "edits": [
                {"old_string": "a", "new_string": "b"}
            ]}),
            "not both",
        ),
        (
            json!({"old_string": "", "new_string": "b"}),
            "old_string is empty",
        ),
        (
            json!({"old_string": "a", "new_string": "a"}),
            "are the same",
        ),
    ];
    for (arguments, expected) in cases {
        let error = fixture.edit(arguments).await.unwrap_err();
        assert!(error.message.contains(expected), "{expected}: {error}");
    }
    assert_eq!(fixture.content(), "a\n");
}

#[tokio::test]
async fn missing_binary_and_outside_files_are_refused() {
    let fixture = Fixture::new("a\n");
    fs::write(fixture.context.workspace.root().join("bin"), b"a\0b").unwrap();
    let call = |path: &str| {
        let args: EditFileArgs =
            serde_json::from_value(json!({"path": path, "old_string": "a", "new_string": "b"}))
                .unwrap();
        EditFile.call(args, &fixture.context)
    };

    let missing = call("nope.txt").await.unwrap_err();
    assert!(
        missing.message.contains("create the file with write_file"),
        "{missing}"
    );
    let binary = call("bin").await.unwrap_err();
    assert!(binary.message.contains("binary file"), "{binary}");
    let outside = call("../f.txt").await.unwrap_err();
    assert!(outside.message.contains("refused `../f.txt`"), "{outside}");
}

#[tokio::test]
async fn permissions_survive_the_atomic_write() {
    let fixture = Fixture::new("echo hi\n");
    fs::set_permissions(&fixture.path, fs::Permissions::from_mode(0o754)).unwrap();
    fixture
        .edit(json!({"old_string": "hi", "new_string": "bye"}))
        .await
        .unwrap();
    let mode = fs::metadata(&fixture.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o754);
}

#[test]
fn normalised_offsets_map_back_to_the_original() {
    let original = "a\r\n\u{a0}b\r\n";
    let normalised = Normalised::new(original);
    assert_eq!(normalised.text, "a\n b\n");
    assert_eq!(normalised.origin, [0, 1, 3, 5, 6, 8]);
}

#[test]
fn similarity_is_one_for_equal_lines_and_low_for_unrelated_ones() {
    let a = Bigrams::of("let total = compute();");
    assert!((a.similarity(&Bigrams::of("let total = compute();")) - 1.0).abs() < 1e-9);
    assert!(a.similarity(&Bigrams::of("}")) < MIN_SIMILARITY);
    assert!((Bigrams::of("}").similarity(&Bigrams::of("}")) - 1.0).abs() < 1e-9);
}

#[test]
fn touched_paths_name_the_file() {
    let args: EditFileArgs =
        serde_json::from_value(json!({"path": "src/a.rs", "old_string": "a"})).unwrap();
    assert_eq!(args.touched_paths(), vec![PathBuf::from("src/a.rs")]);
}

#[tokio::test]
async fn an_old_string_found_twice_in_overlapping_places_is_not_unique() {
    let fixture = Fixture::new("    }\n    }\n    }\n");
    let error = fixture
        .edit(json!({"old_string": "    }\n    }", "new_string": "}"}))
        .await
        .unwrap_err();
    assert!(
        error.message.contains("matches 2 places"),
        "{}",
        error.message
    );
    assert_eq!(fixture.content(), "    }\n    }\n    }\n");
}
