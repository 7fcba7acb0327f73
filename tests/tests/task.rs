//! `task` through the real daemon and a provider streaming real SSE: the sub-agent reads a file
//! in a context of its own, the parent's next request holds only its answer, its events are
//! journalled under the parent's call, and its tokens are in the session's `/cache` and `/cost`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

/// What the fake bills each request: 100 prompt tokens (64 of them cached) and 10 completion.
const PER_REQUEST: f64 = (64.0 * 1.0 + 36.0 * 10.0 + 10.0 * 20.0) / 1e6;

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_reads_files_and_its_tokens_count_in_the_sessions_cost() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let config = json!({
        "default_profile": "fake",
        "profiles": {"fake": {
            "base_url": provider.url,
            "model": "fake-model",
            "api_key": "sk-test-secret-key",
            "pricing": {"input_hit": 1.0, "input_miss": 10.0, "output": 20.0}
        }}
    });
    std::fs::write(home.paths.config(), config.to_string()).unwrap();
    std::fs::write(home.workspace.join("notes.txt"), "secret-number 4711\n").unwrap();
    provider
        .reply(tool_calls(&[(
            "t1",
            "task",
            json!({"description": "find the number", "prompt": "What number is in notes.txt?"}),
        )]))
        .reply(tool_calls(&[(
            "s1",
            "read_file",
            json!({"path": "notes.txt"}),
        )]))
        .reply(text("notes.txt holds 4711."))
        .reply(text("The number is 4711."));
    let _daemon = home.start_daemon();
    let id = home.new_session("code");

    let answer = home.cli_ok(&["send", &id, "find the number", "--wait"]);

    assert!(answer.contains("The number is 4711."), "{answer}");
    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    // The sub-agent has its own short context and no `task` of its own.
    let sub_messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(sub_messages.len(), 2, "{sub_messages:?}");
    assert_eq!(sub_messages[1]["content"], "What number is in notes.txt?");
    assert!(tool_names(&requests[0]).contains(&"task".to_owned()));
    assert!(!tool_names(&requests[1]).contains(&"task".to_owned()));
    assert!(last_tool_result(&requests[2]).contains("secret-number 4711"));
    // The parent sees the answer only.
    assert_eq!(last_tool_result(&requests[3]), "notes.txt holds 4711.");
    assert!(
        !requests[3]["messages"]
            .to_string()
            .contains("secret-number")
    );
    let nested = home
        .journal(&id)
        .into_iter()
        .filter(|event| event.parent_call_id.as_deref() == Some("t1"))
        .count();
    assert!(nested >= 4, "the sub-agent's events are under t1: {nested}");

    let cache: Value = serde_json::from_str(&home.cli_ok(&["cache", &id, "--json"])).unwrap();
    let turn = &cache["turns"][0];
    assert_eq!(turn["promptTokens"], 400, "four requests of 100: {cache}");
    assert_eq!(turn["requests"], 2, "the session's own requests: {cache}");
    let cost: Value = serde_json::from_str(&home.cli_ok(&["cost", &id, "--json"])).unwrap();
    let total = cost["total"].as_f64().unwrap();
    assert!(
        (total - 4.0 * PER_REQUEST).abs() < 1e-9,
        "the sub-agent's two requests are billed too: {cost}"
    );
}
