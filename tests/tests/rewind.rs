//! Checkpoints and rewind through the real daemon (SPEC §8): edits made with the file tools and
//! with the shell both come back, byte for byte, with the history cut to match.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::collections::BTreeMap;
use std::path::Path;

use cwcode_protocol::{EventKind, TurnOutcome};
use cwcode_tests::fake_provider::{
    FakeProvider, Gate, edit_line_as_read, hold_until, last_tool_result, text, tool_calls,
};
use cwcode_tests::{Home, wait_for_event};
use serde_json::{Value, json};

/// Every file of the workspace and its bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_restores_tool_and_shell_edits_and_can_be_undone() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let work = home.workspace.clone();
    std::fs::write(work.join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(work.join("b.txt"), "one\ntwo\n").unwrap();
    std::fs::write(work.join("c.txt"), "to be deleted\n").unwrap();
    let original = tree(&work);

    provider
        .reply(tool_calls(&[("r", "read_file", json!({"path": "a.txt"}))]))
        .then(edit_line_as_read("a.txt", 2, "BETA"))
        .reply(text("edited a.txt"))
        .reply(tool_calls(&[(
            "sh",
            "bash",
            json!({"command": "sed -i 's/one/ONE/' b.txt && echo fresh > new.txt && rm c.txt"}),
        )]))
        .reply(text("shell work done"))
        .reply(text("after the rewind"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "edit a", "--wait"]);
    let after_prompt_1 = tree(&work);
    home.cli_ok(&["send", &id, "use the shell", "--wait"]);
    let after_prompt_2 = tree(&work);
    assert!(after_prompt_2.contains_key("new.txt") && !after_prompt_2.contains_key("c.txt"));

    let listed: Value = serde_json::from_str(&home.cli_ok(&["rewind", &id, "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[1]["prompt"], "use the shell");
    let files: Vec<&str> = listed[1]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for expected in ["b.txt", "c.txt", "new.txt"] {
        assert!(files.contains(&expected), "{files:?}");
    }

    let rewound: Value =
        serde_json::from_str(&home.cli_ok(&["rewind", &id, "2", "--json"])).unwrap();
    assert_eq!(
        rewound["prompt"], "use the shell",
        "prompt 2 comes back for the input field"
    );
    assert_eq!(
        tree(&work),
        after_prompt_1,
        "rewind to 2 gives the state after prompt 1"
    );

    home.cli_ok(&["rewind", &id, "1"]);
    assert_eq!(
        tree(&work),
        original,
        "rewind to 1 gives the original, byte for byte"
    );

    home.cli_ok(&["rewind", &id, "--undo"]);
    assert_eq!(
        tree(&work),
        after_prompt_1,
        "undo goes back to before the last rewind"
    );

    // The history was cut with the files: the next request knows prompt 1, not prompt 2.
    home.cli_ok(&["send", &id, "what now?", "--wait"]);
    let messages = provider.requests().last().unwrap()["messages"].clone();
    let users: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .filter(|content| !content.starts_with("[cwcode]"))
        .collect();
    assert_eq!(users, ["edit a", "what now?"]);
    let notice = messages.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        notice.contains("a.txt"),
        "the model is told the rewind changed what it read: {notice}"
    );
    let journal = home.journal(&id);
    assert!(
        journal
            .iter()
            .any(|e| matches!(e.kind, EventKind::Rewound { .. }))
    );
    assert!(
        journal
            .iter()
            .any(|e| matches!(e.kind, EventKind::RewindUndone { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_is_refused_while_a_turn_runs() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // The answer stops after its first frame until the rewind has been refused.
    let gate = Gate::new();
    provider.reply(hold_until(
        text("an answer held until the test lets it go"),
        1,
        &gate,
    ));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "talk"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnStarted { .. })
    });
    let refused = home.cli(&["rewind", &id, "1"]);
    gate.open();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("a turn is running"));
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_stream_keeps_every_completed_turn() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let words: String = (0..100).map(|n| format!("w{n} ")).collect();
    provider
        .reply(text("the first answer"))
        // Stops after its first words and is never let go: the crash comes mid-stream.
        .reply(hold_until(text(&words), 5, &Gate::new()))
        .reply(text("after the crash"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "first", "--wait"]);
    home.cli_ok(&["send", &id, "second"]);
    wait_for_event(
        &home,
        &id,
        |kind| matches!(kind, EventKind::AssistantDelta { text } if text.starts_with("w0")),
    );
    daemon.crash();

    let _daemon = home.start_daemon();
    let journal = home.journal(&id);
    let outcomes: Vec<TurnOutcome> = journal
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::TurnFinished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, [TurnOutcome::Completed, TurnOutcome::Interrupted]);
    assert_eq!(
        home.cli_ok(&["send", &id, "third", "--wait"]).trim(),
        "after the crash"
    );
    let messages = provider.requests().last().unwrap()["messages"].clone();
    let contents: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"the first answer"),
        "the completed turn is intact: {contents:?}"
    );
}

/// Whether any file under `dir` holds exactly `bytes`: the checkpoint store keeps contents as
/// plain objects.
fn holds_copy(dir: &Path, bytes: &[u8]) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        if path.is_dir() {
            holds_copy(&path, bytes)
        } else {
            std::fs::metadata(&path).unwrap().len() == bytes.len() as u64
                && std::fs::read(&path).unwrap() == bytes
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remember_takes_no_snapshot_of_the_workspace_while_edits_and_the_shell_still_do() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let work = home.workspace.clone();
    let untouched = format!("a file no call names, {}\n", std::process::id())
        .repeat(2000)
        .into_bytes();
    std::fs::write(work.join("untouched.txt"), &untouched).unwrap();
    std::fs::write(work.join("a.txt"), "alpha\nbeta\n").unwrap();
    provider
        .reply(tool_calls(&[(
            "m",
            "remember",
            json!({"text": "the build runs with make"}),
        )]))
        .reply(text("noted"))
        .reply(tool_calls(&[("r", "read_file", json!({"path": "a.txt"}))]))
        .then(edit_line_as_read("a.txt", 2, "BETA"))
        .reply(text("edited a.txt"))
        .reply(tool_calls(&[("sh", "bash", json!({"command": "true"}))]))
        .reply(text("ran it"));
    let id = home.new_session("yolo");
    let session_dir = home.paths.session_dir(&id);

    home.cli_ok(&["send", &id, "remember how to build", "--wait"]);
    let remembered = last_tool_result(&provider.requests()[1]);
    assert!(remembered.starts_with("remembered"), "{remembered}");
    assert!(
        !holds_copy(&session_dir, &untouched),
        "remember copied the workspace into the checkpoint store"
    );

    home.cli_ok(&["send", &id, "edit a", "--wait"]);
    home.cli_ok(&["send", &id, "run something", "--wait"]);
    let listed: Value = serde_json::from_str(&home.cli_ok(&["rewind", &id, "--json"])).unwrap();
    let files: Vec<(&str, Vec<&str>)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|checkpoint| {
            (
                checkpoint["prompt"].as_str().unwrap(),
                checkpoint["files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|file| file.as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("remember how to build", vec![]),
            ("edit a", vec!["a.txt"]),
            ("run something", vec![]),
        ]
    );
    assert!(
        holds_copy(&session_dir, &untouched),
        "a shell command is still covered by a snapshot of the whole workspace"
    );
}
