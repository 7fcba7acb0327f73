//! Memory through the real daemon: a note the model remembers outlives the daemon and is what a
//! later session's recall finds first among fifty, and the CLI's verbs round-trip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use std::sync::{Arc, Mutex};

use cwcode_protocol::methods::MemoryRemember;
use cwcode_protocol::{MemoryNote, MemoryRecallResult, MemoryRememberParams};
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use serde_json::{Value, json};

const TARGET: &str = "Staging deploys go through the bastion: ssh -J bastion.internal staging-1";

/// Forty-nine notes sharing words with the target and with each other.
fn distractors() -> Vec<String> {
    let topics = [
        "database", "frontend", "logging", "testing", "caching", "auth", "billing",
    ];
    (0..49)
        .map(|index| {
            let topic = topics[index % topics.len()];
            match index % 3 {
                0 => format!("the {topic} staging data is reset every night ({index})"),
                1 => format!("deploy the {topic} service with the usual script ({index})"),
                _ => format!("the {topic} code follows the team conventions ({index})"),
            }
        })
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn cli_here(home: &Home, args: &[&str]) -> Output {
    home.command("cwcode-cli")
        .current_dir(&home.workspace)
        .args(args)
        .output()
        .unwrap()
}

fn cli_here_ok(home: &Home, args: &[&str]) -> String {
    let output = cli_here(home, args);
    assert!(
        output.status.success(),
        "cwcode-cli {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_note_survives_a_restart_and_ranks_first_among_fifty() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let workspace = home.workspace.display().to_string();
    let client = home.client().await;
    for (index, note) in distractors().into_iter().enumerate() {
        // Half in this workspace, half elsewhere: the target must beat both.
        let workspace = if index % 2 == 0 {
            workspace.clone()
        } else {
            "/srv/other-project".to_owned()
        };
        client
            .call::<MemoryRemember>(&MemoryRememberParams {
                text: note,
                tags: Vec::new(),
                workspace,
            })
            .await
            .unwrap();
    }
    provider
        .reply(tool_calls(&[(
            "m1",
            "remember",
            json!({"text": TARGET, "tags": ["deploy", "ssh"]}),
        )]))
        .reply(text("noted"));
    let writer = home.new_session("yolo");
    home.cli_ok(&[
        "send",
        &writer,
        "remember how staging deploys work",
        "--wait",
    ]);
    // Every built-in tool, memory's among them, still fits a small first request.
    let first_request = provider.bodies()[0].len();
    println!("first request: {first_request} bytes");
    assert!(
        first_request < 10 * 1024,
        "first request {first_request} bytes"
    );
    let remembered = last_tool_result(&provider.requests()[1]);
    assert!(
        remembered.starts_with("remembered as note #"),
        "{remembered}"
    );
    drop(client);
    assert!(daemon.terminate().success());

    let _daemon = home.start_daemon();
    let recalled = Arc::new(Mutex::new(String::new()));
    let heard = Arc::clone(&recalled);
    provider
        .reply(tool_calls(&[(
            "r1",
            "recall",
            json!({"query": "how do I deploy to staging?"}),
        )]))
        .then(move |request| {
            *heard.lock().unwrap() = last_tool_result(request);
            text("use the bastion")
        });
    let reader = home.new_session("plan");
    home.cli_ok(&["send", &reader, "how do I deploy to staging?", "--wait"]);

    let recalled = recalled.lock().unwrap().clone();
    let first = recalled.lines().next().unwrap();
    assert!(
        first.ends_with(&format!("[deploy, ssh] {TARGET}")),
        "{recalled}"
    );
    assert_eq!(recalled.lines().count(), 5, "{recalled}");
    let plan_tools = tool_names(&provider.requests()[2]);
    assert!(plan_tools.contains(&"recall".to_owned()), "{plan_tools:?}");
    assert!(
        !plan_tools.contains(&"remember".to_owned()),
        "{plan_tools:?}"
    );

    let stored: MemoryNote = serde_json::from_str(&cli_here_ok(
        &home,
        &["--json", "recall", "bastion", "--limit", "1"],
    ))
    .map(|result: MemoryRecallResult| result.notes[0].note.clone())
    .unwrap();
    assert_eq!(stored.session_id.as_deref(), Some(writer.as_str()));
    assert_eq!(stored.workspace, workspace);
    let mode = std::fs::metadata(home.paths.memory_db())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_remembers_recalls_lists_and_deletes() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();

    let said = cli_here_ok(
        &home,
        &[
            "remember",
            "the tests need a tmpfs",
            "--tag",
            "ci",
            "--tag",
            "tests",
        ],
    );
    let id: i64 = said
        .trim()
        .strip_prefix("remembered as note #")
        .unwrap()
        .parse()
        .unwrap();
    cli_here_ok(&home, &["remember", "lunch is at noon"]);

    let recalled = cli_here_ok(&home, &["recall", "tmpfs tests"]);
    assert!(
        recalled.starts_with(&format!("#{id} "))
            && recalled.contains("[ci, tests] the tests need a tmpfs"),
        "{recalled}"
    );
    assert_eq!(recalled.lines().count(), 1, "{recalled}");

    let listed = cli_here_ok(&home, &["memory", "ls"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert!(lines[0].ends_with("lunch is at noon"), "{listed}");

    assert_eq!(
        cli_here_ok(&home, &["memory", "rm", &id.to_string()]),
        format!("deleted note #{id}\n")
    );
    let again = cli_here(&home, &["memory", "rm", &id.to_string()]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains(&format!("there is no note #{id}")),
        "{again:?}"
    );
    assert_eq!(
        cli_here_ok(&home, &["recall", "tmpfs"]),
        "no note matches\n"
    );

    let empty = cli_here(&home, &["remember", "  "]);
    assert!(!empty.status.success());
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("the note is empty"),
        "{empty:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_embeddings_model_recall_finds_a_note_by_meaning() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["fake"]["embeddings_model"] = json!("fake-embed");
    std::fs::write(home.paths.config(), config.to_string()).unwrap();
    let _daemon = home.start_daemon();
    for index in 0..20 {
        cli_here_ok(
            &home,
            &[
                "remember",
                &format!("build step {index} runs the linter and then the tests"),
            ],
        );
    }
    let recalled = Arc::new(Mutex::new(String::new()));
    let heard = Arc::clone(&recalled);
    provider
        .reply(tool_calls(&[(
            "m1",
            "remember",
            json!({"text": "a cat sleeps on the office keyboard"}),
        )]))
        .reply(tool_calls(&[("r1", "recall", json!({"query": "kitten"}))]))
        .then(move |request| {
            *heard.lock().unwrap() = last_tool_result(request);
            text("the cat")
        });
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "where does the kitten sleep?", "--wait"]);

    let recalled = recalled.lock().unwrap().clone();
    assert!(
        recalled.ends_with("a cat sleeps on the office keyboard"),
        "{recalled}"
    );
    assert_eq!(recalled.lines().count(), 1, "{recalled}");
    let asked = provider.embedding_requests();
    assert_eq!(
        asked.len(),
        22,
        "20 CLI notes, the model's note and its query"
    );
    assert!(asked.iter().all(|request| request["model"] == "fake-embed"));
    assert_eq!(asked[21]["input"], "kitten");
}
