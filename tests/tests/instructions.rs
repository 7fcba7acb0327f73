//! Project instructions through the real daemon (SPEC §6): AGENTS.md enters a session's first
//! request once, in the system prompt, and a change later is a message at the end, never a
//! rewritten prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, text};
use serde_json::Value;

fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .map(|message| message["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_md_is_in_the_first_request_and_a_change_is_announced_at_the_end() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    std::fs::write(home.paths.home.join("AGENTS.md"), "Answer in haiku.\n").unwrap();
    std::fs::write(
        home.workspace.join("AGENTS.md"),
        "Run `make check` first.\n",
    )
    .unwrap();
    std::fs::write(home.workspace.join("CLAUDE.md"), "Shadowed by AGENTS.md.\n").unwrap();
    let _daemon = home.start_daemon();
    provider
        .reply(text("one"))
        .reply(text("two"))
        .reply(text("three"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "first", "--wait"]);
    home.cli_ok(&["send", &id, "second", "--wait"]);
    std::fs::write(home.workspace.join("AGENTS.md"), "Run `make lint` first.\n").unwrap();
    home.cli_ok(&["send", &id, "third", "--wait"]);

    let requests = provider.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Answer in haiku."), "{system}");
    assert!(system.contains("Run `make check` first."), "{system}");
    assert!(!system.contains("Shadowed"), "{system}");
    for request in &requests[1..] {
        assert_eq!(request["messages"][0], requests[0]["messages"][0]);
    }
    assert!(
        !user_messages(&requests[1])
            .iter()
            .any(|message| message.contains("make"))
    );
    let last = user_messages(&requests[2]);
    assert!(
        last.last().unwrap().contains("Run `make lint` first."),
        "{last:?}"
    );
    let announced: Vec<Vec<String>> = home
        .journal(&id)
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::InstructionsChanged { sources, .. } => Some(sources),
            _ => None,
        })
        .collect();
    assert_eq!(announced, [["~/.cwcode/AGENTS.md", "AGENTS.md"]]);
}
