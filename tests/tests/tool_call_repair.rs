//! Tool calls that models and servers get wrong (issue 15, item 9), fed by the fake provider as
//! real servers send them: a call a parser-less vLLM left in the text is recovered and run, and
//! a call cut off at the output limit is answered with a tool error quoting it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::{EventKind, TurnOutcome};
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{
    FakeProvider, cut_off_tool_call, last_tool_result, text, tool_calls_in_text,
};
use serde_json::json;

/// A home whose profile reads calls from the text, as the built-in `local-vllm` does.
fn recovering_home(provider: &FakeProvider) -> Home {
    let home = Home::new(&provider.url);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["recover_text_tool_calls"] = json!(true);
    std::fs::write(home.paths.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_left_in_the_text_runs_and_a_cut_off_call_gets_an_error_quoting_it() {
    let provider = FakeProvider::start().await;
    let home = recovering_home(&provider);
    std::fs::write(
        home.workspace.join("notes.txt"),
        "the secret word is teapot\n",
    )
    .unwrap();
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls_in_text(
            "I'll read the notes first.",
            &[("read_file", json!({"path": "notes.txt"}))],
        ))
        .then(|request| {
            assert!(
                last_tool_result(request).contains("teapot"),
                "the recovered call ran: {}",
                last_tool_result(request)
            );
            cut_off_tool_call(
                "call_write",
                "write_file",
                r#"{"path": "out.txt", "content": "a very long file that never en"#,
            )
        })
        .then(|request| {
            let result = last_tool_result(request);
            assert!(result.contains("cut at the output limit"), "{result}");
            assert!(
                result.contains("never en"),
                "the error quotes the call: {result}"
            );
            text("done")
        });
    let id = home.new_session("yolo");
    // The CLI prints the stream as it comes, tags included; the journal has the answer.
    let printed = home.cli_ok(&["send", &id, "what is the word?", "--wait"]);
    assert!(printed.trim().ends_with("done"), "{printed}");
    assert_eq!(provider.requests().len(), 3);
    assert!(
        !home.workspace.join("out.txt").exists(),
        "nothing is written from cut-off arguments"
    );

    let journal = home.journal(&id);
    let recovered: Vec<&Vec<String>> = journal
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolCallsRecovered { call_ids } => Some(call_ids),
            _ => None,
        })
        .collect();
    assert_eq!(recovered.len(), 1, "journalled as recovered once");
    assert_eq!(recovered[0].len(), 1);
    let first_answer = journal
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::AssistantMessage {
                content,
                tool_calls,
                ..
            } => Some((content.clone(), tool_calls.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        first_answer.0, "I'll read the notes first.",
        "tags left the text"
    );
    assert_eq!(first_answer.1[0].name, "read_file");
    assert_eq!(first_answer.1[0].id, recovered[0][0]);
    let finished: Vec<(String, bool)> = journal
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolCallFinished { name, is_error, .. } => Some((name.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            ("read_file".to_owned(), false),
            ("write_file".to_owned(), true)
        ]
    );
    assert!(journal.iter().any(|event| matches!(
        event.kind,
        EventKind::TurnFinished {
            outcome: TurnOutcome::Completed,
            ..
        }
    )));

    // The next request sends the recovered call back as a real one, with its id.
    let second = &provider.requests()[1];
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "assistant")
        .unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], recovered[0][0].as_str());
    assert!(
        !assistant["content"]
            .as_str()
            .unwrap_or("")
            .contains("<tool_call>")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_profile_flag_the_text_is_left_as_the_answer() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider.reply(tool_calls_in_text("Here:", &[("ls", json!({"path": "."}))]));
    let id = home.new_session("code");
    let answer = home.cli_ok(&["send", &id, "list", "--wait"]);
    assert!(answer.contains("<tool_call>"), "{answer}");
    assert_eq!(provider.requests().len(), 1, "no call was run");
    assert!(
        !home
            .journal(&id)
            .iter()
            .any(|event| matches!(event.kind, EventKind::ToolCallsRecovered { .. }))
    );
}
