//! Modes and the storm-breaker through the real daemon: what the model is offered in each mode,
//! what it is told when the mode changes, and how a loop of identical failures ends.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_offers_only_read_only_tools_and_says_so_in_a_message() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(text("plan: edit main.rs"))
        .reply(text("done"));
    let id = home.new_session("plan");
    home.cli_ok(&["send", &id, "plan it", "--wait"]);
    home.cli_ok(&["mode", &id, "code"]);
    home.cli_ok(&["send", &id, "do it", "--wait"]);

    let requests = provider.requests();
    let plan_tools = tool_names(&requests[0]);
    for mutating in ["bash", "edit_lines", "write_file", "edit_file"] {
        assert!(
            !plan_tools.contains(&mutating.to_owned()),
            "{mutating} offered in plan mode: {plan_tools:?}"
        );
    }
    for read_only in ["read_file", "grep", "glob", "ls"] {
        assert!(
            plan_tools.contains(&read_only.to_owned()),
            "{read_only} missing: {plan_tools:?}"
        );
    }
    let code_tools = tool_names(&requests[1]);
    assert!(
        code_tools.contains(&"bash".to_owned()) && code_tools.contains(&"edit_lines".to_owned())
    );

    // The system prompt is byte-identical in both modes; the mode is told as messages.
    assert_eq!(requests[0]["messages"][0], requests[1]["messages"][0]);
    let last_user = |request: &Value| {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(last_user(&requests[0]).contains("Plan mode is on"));
    assert!(last_user(&requests[1]).contains("Plan mode is off"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_repeating_a_failing_call_is_stopped_after_exactly_three() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    for _ in 0..5 {
        provider.reply(tool_calls(&[(
            "r",
            "read_file",
            json!({"path": "missing.rs"}),
        )]));
    }
    let id = home.new_session("yolo");
    let output = home.cli(&["send", &id, "read missing.rs", "--wait"]);
    assert_eq!(
        output.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = String::from_utf8_lossy(&output.stdout);
    assert!(answer.contains("`read_file` failed 3 times"), "{answer}");
    assert!(
        answer.contains("missing.rs"),
        "the answer names what was asked: {answer}"
    );

    assert_eq!(
        provider.requests().len(),
        3,
        "no fourth request after the third failure"
    );
    let failure = last_tool_result(&provider.requests()[2]);
    assert!(
        answer.contains(failure.lines().next().unwrap()),
        "the answer quotes the error"
    );
    let journal = home.journal(&id);
    let calls = journal
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ToolCallFinished { .. }))
        .count();
    assert_eq!(calls, 3);
    assert!(
        journal
            .iter()
            .any(|e| matches!(e.kind, EventKind::StormBroken { .. }))
    );

    // The explanation is in the history, so a follow-up has the context.
    provider.reply(text("ok"));
    home.cli_ok(&["send", &id, "it is in src/", "--wait"]);
    let messages = provider.requests()[3]["messages"].clone();
    let explained = messages.as_array().unwrap().iter().any(|m| {
        m["role"] == "assistant"
            && m["content"]
                .as_str()
                .unwrap_or("")
                .contains("I stopped here")
    });
    assert!(explained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_by_another_hand_is_announced_and_a_stale_edit_says_so() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let file = home.workspace.join("notes.txt");
    std::fs::write(&file, "first\nsecond\n").unwrap();
    let edited_by_user = file.clone();
    provider
        .reply(tool_calls(&[("r", "read_file", json!({"path": "notes.txt"}))]))
        .then(move |request| {
            // Someone edits the file while the model is thinking.
            std::fs::write(&edited_by_user, "first\nSECOND, by hand\n").unwrap();
            assert!(last_tool_result(request).contains("2:"), "the model saw the anchors");
            tool_calls(&[("l", "ls", json!({}))])
        })
        .then(|_| {
            tool_calls(&[(
                "e",
                "edit_lines",
                json!({"path": "notes.txt", "edits": [{"line": 2, "hash": "aaa", "new_text": "mine"}]}),
            )])
        })
        .reply(text("I will read it again."));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "edit notes", "--wait"]);

    let requests = provider.requests();
    let notice = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        notice.contains("Changed on disk") && notice.contains("notes.txt"),
        "{notice}"
    );
    let stale = last_tool_result(&requests[3]);
    assert!(
        stale.contains("changed on disk since you last read it"),
        "{stale}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "first\nSECOND, by hand\n",
        "the hand edit is kept"
    );
    assert!(
        home.journal(&id)
            .iter()
            .any(|e| matches!(e.kind, EventKind::FilesChanged { .. }))
    );
}
