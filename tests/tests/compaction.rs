//! Context management through the real daemon: older turns summarised on demand and when a
//! request would overflow the profile's context window.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, text};
use cwcode_tests::{Home, wait_for_event};
use serde_json::Value;

fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_on_demand_replaces_older_turns_with_a_summary() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(text("answer one"))
        .reply(text("answer two"))
        .reply(text("SUMMARY: the user asked two things"))
        .reply(text("answer three"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "question one", "--wait"]);
    home.cli_ok(&["send", &id, "question two", "--wait"]);
    home.cli_ok(&["compact", &id]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::Compacted { .. })
    });
    home.cli_ok(&["send", &id, "question three", "--wait"]);

    let requests = provider.requests();
    let summary_request = contents(&requests[2]);
    assert!(
        summary_request.contains(&"question one".to_owned()),
        "the summary request sees the old turns"
    );
    assert!(
        summary_request
            .last()
            .unwrap()
            .contains("Summarise the conversation")
    );
    let after = contents(&requests[3]);
    assert_eq!(after.len(), 3, "system, summary, the new prompt: {after:?}");
    assert!(after[1].contains("SUMMARY: the user asked two things"));
    assert!(!after.contains(&"answer one".to_owned()) && !after.contains(&"answer two".to_owned()));
    assert_eq!(
        requests[3]["messages"][0], requests[0]["messages"][0],
        "the system prompt is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_would_overflow_the_window_compacts_first() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["context_window"] = 4000.into();
    std::fs::write(home.paths.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    let _daemon = home.start_daemon();
    let long_answer = "lorem ipsum dolor sit amet ".repeat(120);
    provider
        .reply(text(&long_answer))
        .reply(text(&long_answer))
        .reply(text("SUMMARY: long answers were given"))
        .reply(text("short"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "talk", "--wait"]);
    home.cli_ok(&["send", &id, "talk more", "--wait"]);
    home.cli_ok(&["send", &id, "and now?", "--wait"]);

    let compacted = home.journal(&id).into_iter().find_map(|e| match e.kind {
        EventKind::Compacted {
            tokens_before,
            tokens_after,
            ..
        } => Some((tokens_before, tokens_after)),
        _ => None,
    });
    let (before, after) = compacted.expect("a compaction happened");
    // The long answers (about 800 tokens each) were folded into a one-line summary.
    assert!(before > 3200 && before - after > 1200, "{before} → {after}");
    let last = contents(provider.requests().last().unwrap());
    assert!(
        last[1].contains("SUMMARY: long answers were given"),
        "{last:?}"
    );
    assert_eq!(last.last().unwrap(), "and now?");
}
