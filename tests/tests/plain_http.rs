//! The API with nothing but `curl` (SPEC §4): the README's example works as printed, a script
//! reads a turn's answer from the journal in pages without a WebSocket, a subscription asked over
//! plain HTTP says what to do instead, and the daemon serves its own JSON Schema.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::process::Command;

use cwcode_protocol::methods;
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, text};
use serde_json::{Value, json};

/// `curl --unix-socket SOCK http://localhost/PATH [-d BODY]`, exactly as the README has it:
/// no `Content-Type`, so curl sends its form type.
fn curl(home: &Home, path: &str, body: Option<&Value>) -> Value {
    let mut command = Command::new("curl");
    command
        .args(["-sS", "--fail-with-body", "--unix-socket"])
        .arg(&home.paths.socket)
        .arg(format!("http://localhost{path}"));
    if let Some(body) = body {
        command.arg("-d").arg(body.to_string());
    }
    let output = command
        .output()
        .expect("curl is installed (.ci/run installs it)");
    assert!(
        output.status.success(),
        "curl {path}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn call(home: &Home, method: &str, params: Value) -> Value {
    curl(
        home,
        "/",
        Some(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_with_curl_alone_runs_a_turn_and_reads_its_answer_in_pages() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider.reply(text("the answer is 42"));

    let info = call(&home, "daemon/info", json!({}));
    assert!(info["result"]["pid"].is_u64(), "{info}");

    let workspace = home.workspace.to_str().unwrap();
    let id = call(&home, "session/create", json!({"cwd": workspace}))["result"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent = call(
        &home,
        "session/send",
        json!({"sessionId": id, "text": "what is it?"}),
    );
    assert!(sent.get("result").is_some(), "{sent}");

    // Page through the journal two events at a time until the turn has finished.
    let mut since = 0;
    let mut events = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !events
        .iter()
        .any(|event: &Value| event["type"] == "turn_finished")
    {
        assert!(std::time::Instant::now() < deadline, "{events:#?}");
        let page = call(
            &home,
            "session/events",
            json!({"sessionId": id, "since": since, "limit": 2}),
        )["result"]
            .clone();
        let batch = page["events"].as_array().unwrap().clone();
        assert!(batch.len() <= 2, "{page}");
        since = page["nextSince"].as_u64().unwrap();
        if batch.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        events.extend(batch);
    }
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "{seqs:?}"
    );
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "assistant_message"
                && event["content"] == "the answer is 42"),
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_over_plain_http_says_it_needs_a_websocket_and_the_schema_is_served() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let answer = call(&home, "session/subscribe", json!({"sessionId": "x"}));
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("needs a WebSocket"), "{answer}");
    assert!(message.contains("session/events"), "{answer}");

    let schema = curl(&home, "/schema", None);
    let served: Vec<&str> = schema["methods"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // An unsubscribe method is described inside its subscription's entry.
    for name in methods::NAMES {
        assert!(
            served.contains(name) || *name == methods::SESSION_UNSUBSCRIBE,
            "{name} is not in the served schema: {served:?}"
        );
    }
}
