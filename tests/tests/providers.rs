//! Provider behaviour through the real daemon: the reasoning switch of SPEC §6.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::{EventKind, TurnOutcome};
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, Reply, text};

/// What DeepSeek answers a thinking-mode request whose history dropped the reasoning.
const REASONING_REQUIRED: &str = r#"{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_demands_its_reasoning_back_gets_it_for_the_rest_of_the_session() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(text("first"))
        .reply(Reply::Status(400, REASONING_REQUIRED.to_owned()))
        .reply(text("second"))
        .reply(text("third"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "one", "--wait"]);
    assert_eq!(
        home.cli_ok(&["send", &id, "two", "--wait"]).trim(),
        "second",
        "retried once"
    );
    home.cli_ok(&["send", &id, "three", "--wait"]);

    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    let assistant = |request: &serde_json::Value| {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .cloned()
            .unwrap()
    };
    assert!(
        assistant(&requests[1]).get("reasoning_content").is_none(),
        "stripped by default"
    );
    assert_eq!(
        assistant(&requests[2])["reasoning_content"],
        "",
        "kept, empty, after the 400"
    );
    assert_eq!(
        assistant(&requests[3])["reasoning_content"],
        "",
        "and for the rest of the session"
    );

    // Journalled: a restarted daemon keeps replaying it, with no second 400.
    home.cli_ok(&["daemon", "stop"]);
    drop(daemon);
    let _daemon = home.start_daemon();
    provider.reply(text("fourth"));
    assert_eq!(
        home.cli_ok(&["send", &id, "four", "--wait"]).trim(),
        "fourth"
    );
    let after_restart = provider.requests();
    assert_eq!(after_restart.len(), 5);
    let kinds: Vec<String> = home
        .journal(&id)
        .iter()
        .map(|e| {
            serde_json::to_value(&e.kind).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        assistant(&after_restart[4])["reasoning_content"],
        "",
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_a_sessions_profile_sends_the_next_turn_to_the_new_provider() {
    let first = FakeProvider::start().await;
    let second = FakeProvider::start().await;
    let home = Home::new(&first.url);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["other"] =
        serde_json::json!({"base_url": second.url, "model": "other-model"});
    std::fs::write(home.paths.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    let _daemon = home.start_daemon();
    first.reply(text("from the first"));
    second.reply(text("from the second"));
    let id = home.new_session("code");
    assert_eq!(
        home.cli_ok(&["send", &id, "one", "--wait"]).trim(),
        "from the first"
    );
    home.cli_ok(&["profile", &id, "other"]);
    assert_eq!(
        home.cli_ok(&["send", &id, "two", "--wait"]).trim(),
        "from the second"
    );
    assert_eq!(second.requests()[0]["model"], "other-model");
    let info: serde_json::Value =
        serde_json::from_str(&home.cli_ok(&["show", &id, "--json"])).unwrap();
    assert_eq!(info["profile"], "other");
    let unknown = home.cli(&["profile", &id, "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nope"));
}

/// A provider that takes the request and never says a word: the profile's idle timeout ends each
/// attempt, every retry is an event the user sees, and the turn fails plainly within seconds.
#[test]
fn a_provider_that_never_answers_fails_the_turn_fast_and_says_it_retried() {
    use std::io::Read;
    // Accepts, reads the request, and holds the connection open in silence.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in silent.incoming().flatten() {
            let mut buffer = [0; 4096];
            let _ = stream.read(&mut buffer);
            held.push(stream);
        }
    });
    let home = Home::new(&url);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["idle_timeout_secs"] = 1.into();
    config["profiles"]["fake"]["max_attempts"] = 2.into();
    std::fs::write(home.paths.config(), config.to_string()).unwrap();
    let _daemon = home.start_daemon();
    let id = home.new_session("code");

    let started = std::time::Instant::now();
    let output = home.cli(&["send", &id, "hello?", "--wait"]);
    let waited = started.elapsed();
    let shown = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "the turn failed: {shown}");
    assert!(
        waited < std::time::Duration::from_secs(8),
        "took {waited:?}: {shown}"
    );
    assert!(
        shown.contains("retrying in ")
            && shown.contains(": the provider sent nothing for 1 s (attempt 2 of 2)"),
        "the retry is not shown: {shown}"
    );

    let journal = home.journal(&id);
    let retries: Vec<_> = journal
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ProviderRetrying {
                attempt,
                max_attempts,
                reason,
                ..
            } => Some((*attempt, *max_attempts, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [(2, 2, "the provider sent nothing for 1 s".to_owned())]
    );
    let error = journal
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::TurnFinished {
                outcome: TurnOutcome::Failed,
                error,
                ..
            } => error.clone(),
            _ => None,
        })
        .expect("the turn failed");
    assert!(
        error.contains("the provider sent nothing for 1 s")
            && error.contains("gave up after 2 attempts"),
        "{error}"
    );
}
