//! A profile's `edit_tools` (SPEC §7.1) through the real daemon: which edit tool the model is
//! offered, how `read_file` shows lines, and what a call of the tool left out gets.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn read_file_description(request: &Value) -> String {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "read_file")
        .unwrap()["function"]["description"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn set_edit_tools(home: &Home, edit_tools: &str) {
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["profiles"]["fake"]["edit_tools"] = json!(edit_tools);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// Runs a turn of a `read_file` then an `edit_lines` call under `edit_tools`, and returns the
/// requests the model got.
async fn read_and_edit_lines(edit_tools: &str) -> (Vec<Value>, String) {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    set_edit_tools(&home, edit_tools);
    std::fs::write(home.workspace.join("a.txt"), "hello\nworld\n").unwrap();
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[("r", "read_file", json!({"path": "a.txt"}))]))
        .reply(tool_calls(&[(
            "e",
            "edit_lines",
            json!({"path": "a.txt", "edits": [{"line": 1, "hash": "000", "new_text": "bye"}]}),
        )]))
        .reply(text("done"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "edit a.txt", "--wait"]);
    let after = std::fs::read_to_string(home.workspace.join("a.txt")).unwrap();
    (provider.requests(), after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_offers_edit_file_and_plain_lines_and_refuses_edit_lines() {
    let (requests, after) = read_and_edit_lines("replace").await;

    let tools = tool_names(&requests[0]);
    assert!(tools.contains(&"edit_file".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"edit_lines".to_owned()), "{tools:?}");
    assert!(read_file_description(&requests[0]).contains("LINE|content"));
    assert_eq!(last_tool_result(&requests[1]), "1|hello\n2|world");
    assert_eq!(
        last_tool_result(&requests[2]),
        "edit_lines is not offered with this profile's edit tools: use edit_file"
    );
    assert_eq!(after, "hello\nworld\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashline_offers_edit_lines_and_anchored_lines_only() {
    let (requests, _) = read_and_edit_lines("hashline").await;

    let tools = tool_names(&requests[0]);
    assert!(tools.contains(&"edit_lines".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"edit_file".to_owned()), "{tools:?}");
    assert!(read_file_description(&requests[0]).contains("LINE:HASH|content"));
    let read = last_tool_result(&requests[1]);
    assert!(read.starts_with("1:") && read.contains("|hello"), "{read}");
    // The made-up hash is stale, and the error shows the current anchors.
    assert!(last_tool_result(&requests[2]).contains("|hello"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_is_the_default_and_offers_both() {
    let (requests, _) = read_and_edit_lines("both").await;

    let tools = tool_names(&requests[0]);
    assert!(tools.contains(&"edit_lines".to_owned()), "{tools:?}");
    assert!(tools.contains(&"edit_file".to_owned()), "{tools:?}");
}
