//! The foundation, end to end: a real cwcoded, its socket API, sessions and agent turns against a
//! fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use cwcode_protocol::{ApprovalDecision, ApprovalRespondParams, EventKind, TurnOutcome};
use cwcode_tests::fake_provider::{
    self, FakeProvider, Gate, anchor, edit_line_as_read, hold_until, last_tool_result, text,
    tool_calls,
};
use cwcode_tests::{Home, events_until_turn_end, wait_for_event};
use serde_json::{Value, json};

const ORIGINAL: &str = "fn main() {\n    println!(\"hello\");\n}\n";

fn kinds(events: &[cwcode_protocol::Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            serde_json::to_value(&event.kind).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Scripts a model that reads main.rs, replaces line 2 through edit_lines, and answers.
fn script_read_then_edit(provider: &FakeProvider) {
    provider
        .reply(tool_calls(&[(
            "call_read",
            "read_file",
            json!({"path": "main.rs"}),
        )]))
        .then(edit_line_as_read("main.rs", 2, "    println!(\"edited\");"))
        .reply(text("I changed the greeting."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_reads_edits_and_answers_with_the_file_changed_on_disk() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    std::fs::write(home.workspace.join("main.rs"), ORIGINAL).unwrap();
    script_read_then_edit(&provider);
    let id = home.new_session("yolo");

    let output = home.cli(&["send", &id, "change the greeting", "--wait"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "I changed the greeting."
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("▶ read_file"),
        "tool activity is shown: {stderr}"
    );
    assert!(stderr.contains("▶ edit_lines"), "{stderr}");

    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        "fn main() {\n    println!(\"edited\");\n}\n"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    // The read result the model saw carries SPEC §7.1 anchors.
    let read = last_tool_result(&requests[1]);
    assert!(read.starts_with("1:"), "{read}");
    assert!(read.contains("|fn main() {"), "{read}");
    // The same system prompt and tools are sent with every request, and history only grows.
    for pair in requests.windows(2) {
        assert_eq!(pair[0]["messages"][0], pair[1]["messages"][0]);
        assert_eq!(pair[0]["tools"], pair[1]["tools"]);
        let before = pair[0]["messages"].as_array().unwrap();
        let after = pair[1]["messages"].as_array().unwrap();
        assert_eq!(&after[..before.len()], &before[..]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_hash_batch_is_rejected_and_nothing_is_written() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    std::fs::write(home.workspace.join("main.rs"), ORIGINAL).unwrap();
    provider
        .reply(tool_calls(&[(
            "r",
            "read_file",
            json!({"path": "main.rs"}),
        )]))
        .then(|request| {
            let (line, hash) = anchor(&last_tool_result(request), 1);
            tool_calls(&[(
                "e",
                "edit_lines",
                json!({"path": "main.rs", "edits": [
                    {"line": line, "hash": hash, "new_text": "fn start() {"},
                    {"line": 2, "hash": "zzz", "new_text": "    stale();"}
                ]}),
            )])
        })
        .reply(text("The anchors were stale."));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "edit", "--wait"]);

    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        ORIGINAL
    );
    let error = last_tool_result(&provider.requests()[2]);
    assert!(
        error.contains("2:"),
        "the error lists the current anchor of line 2: {error}"
    );
    assert!(error.contains("println!(\"hello\");"), "{error}");
    let finished = home
        .journal(&id)
        .into_iter()
        .find_map(|event| match event.kind {
            EventKind::ToolCallFinished { name, is_error, .. } if name == "edit_lines" => {
                Some(is_error)
            }
            _ => None,
        });
    assert_eq!(finished, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_mode_waits_for_approval_and_a_denial_reaches_the_model() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[(
            "b1",
            "bash",
            json!({"command": "echo approved > a.txt"}),
        )]))
        .reply(tool_calls(&[(
            "b2",
            "bash",
            json!({"command": "echo denied > b.txt"}),
        )]))
        .reply(text("done"));
    let id = home.new_session("code");
    let client = home.client().await;
    let mut stream = client.subscribe(&id, None).await.unwrap();
    let sent = client.send(&id, "make two files").await.unwrap();

    let mut decisions = vec![
        (ApprovalDecision::Approve, None),
        (ApprovalDecision::Deny, Some("not that file".to_owned())),
    ]
    .into_iter();
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let EventKind::ApprovalRequested {
            request_id, tool, ..
        } = &event.kind
        {
            assert_eq!(tool, "bash");
            assert_eq!(
                client.get_session(&id).await.unwrap().status,
                cwcode_protocol::SessionStatus::AwaitingApproval
            );
            let (decision, reason) = decisions.next().unwrap();
            client
                .respond_approval(&ApprovalRespondParams {
                    session_id: id.clone(),
                    request_id: request_id.clone(),
                    decision,
                    reason,
                    pattern: None,
                })
                .await
                .unwrap();
        }
        let done = matches!(event.kind, EventKind::TurnFinished { turn, .. } if turn == sent.turn);
        events.push(event);
        if done {
            break;
        }
    }
    assert!(
        home.workspace.join("a.txt").exists(),
        "the approved call ran"
    );
    assert!(
        !home.workspace.join("b.txt").exists(),
        "the denied call did not run"
    );
    let denial = last_tool_result(&provider.requests()[2]);
    assert!(
        denial.contains("denied") && denial.contains("not that file"),
        "{denial}"
    );
    let approvals = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ApprovalResolved { .. }))
        .count();
    assert_eq!(approvals, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yolo_mode_asks_nothing() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[(
            "b1",
            "bash",
            json!({"command": "echo hi > y.txt"}),
        )]))
        .reply(text("ok"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "go", "--wait"]);
    assert!(home.workspace.join("y.txt").exists());
    assert!(
        !home
            .journal(&id)
            .iter()
            .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_watching_one_turn_see_the_same_events() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[(
            "b",
            "bash",
            json!({"command": "printf 'one\\ntwo\\n'"}),
        )]))
        .reply(text("the output was one and two"));
    let id = home.new_session("yolo");
    let first = home.client().await;
    let second = home.client().await;
    let mut stream_a = first.subscribe(&id, None).await.unwrap();
    let mut stream_b = second.subscribe(&id, None).await.unwrap();
    let sent = first.send(&id, "run it").await.unwrap();
    let seen_a = events_until_turn_end(&mut stream_a, sent.turn).await;
    let seen_b = events_until_turn_end(&mut stream_b, sent.turn).await;
    assert_eq!(seen_a, seen_b);
    let kinds = kinds(&seen_a);
    for expected in [
        "turn_started",
        "tool_call_started",
        "tool_output_delta",
        "tool_call_finished",
        "assistant_delta",
        "turn_finished",
    ] {
        assert!(
            kinds.contains(&expected.to_owned()),
            "{expected} missing from {kinds:?}"
        );
    }
    let seqs: Vec<u64> = seen_a.iter().map(|e| e.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap, no duplicate: {seqs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_turn_misses_nothing_after_reattaching() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let words: String = (0..40).map(|n| format!("word{n} ")).collect();
    // The answer stops after its first words until the watcher is gone: it is killed mid-turn.
    let gate = Gate::new();
    provider.reply(hold_until(text(&words), 10, &gate));
    let id = home.new_session("yolo");

    let mut watcher = home
        .command("cwcode-cli")
        .args(["events", &id, "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    home.cli_ok(&["send", &id, "talk slowly"]);
    let mut stdout = watcher.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("\"type\":\"assistant_delta\"") {
        let read = stdout.read(&mut buffer).unwrap();
        assert!(read > 0, "the watcher ended early");
        seen.extend_from_slice(&buffer[..read]);
    }
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    let text_seen = String::from_utf8(seen).unwrap();
    let complete_lines: Vec<&str> = text_seen.lines().filter(|l| l.ends_with('}')).collect();
    let last_seen: u64 = complete_lines
        .iter()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .max()
        .unwrap();
    assert!(
        !home
            .journal(&id)
            .iter()
            .any(|e| matches!(e.kind, EventKind::TurnFinished { .. })),
        "the client was killed while the turn still ran"
    );
    gate.open();

    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    let rest = home.cli_ok(&["events", &id, "--since", &last_seen.to_string(), "--json"]);
    let mut seqs: Vec<u64> = complete_lines
        .iter()
        .chain(rest.lines().collect::<Vec<_>>().iter())
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    seqs.dedup();
    let journal: Vec<u64> = home.journal(&id).iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs, journal,
        "before and after the kill together are the whole journal"
    );
    let turn_finished = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    assert!(matches!(
        turn_finished.kind,
        EventKind::TurnFinished {
            outcome: TurnOutcome::Completed,
            ..
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_history_survive_a_daemon_restart() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(text("first answer"))
        .reply(text("second answer"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "first question", "--wait"]);
    let stopped = home.cli(&["daemon", "stop"]);
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    drop(daemon);
    assert!(!home.paths.socket.exists(), "the socket is removed on stop");

    let _daemon = home.start_daemon();
    let listed = home.cli_ok(&["ls", "--json"]);
    let sessions: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["turns"], 1);
    assert_eq!(sessions[0]["mode"], "code");
    let answer = home.cli_ok(&["send", &id, "second question", "--wait"]);
    assert_eq!(answer.trim(), "second answer");
    let messages = provider.requests()[1]["messages"].clone();
    let contents: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"first question") && contents.contains(&"first answer"),
        "{contents:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_in_flight_at_a_crash_is_marked_interrupted() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[("s", "bash", json!({"command": "sleep 30"}))]))
        .reply(text("after restart"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "sleep"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ToolCallStarted { .. })
    });
    daemon.crash();

    let _daemon = home.start_daemon();
    let journal = home.journal(&id);
    let interrupted = journal.iter().find_map(|e| match &e.kind {
        EventKind::TurnFinished { outcome, .. } => Some(*outcome),
        _ => None,
    });
    assert_eq!(interrupted, Some(TurnOutcome::Interrupted));
    // The unanswered tool call got a result, so the next turn's history is valid.
    assert!(journal.iter().any(|e| matches!(&e.kind, EventKind::ToolCallFinished { call_id, is_error: true, .. } if call_id == "s")));
    assert_eq!(
        home.cli_ok(&["send", &id, "again", "--wait"]).trim(),
        "after restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_running_turn_as_interrupted() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider.reply(tool_calls(&[("s", "bash", json!({"command": "sleep 30"}))]));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "sleep"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ToolCallStarted { .. })
    });
    let started = std::time::Instant::now();
    assert!(daemon.terminate().success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "drain kills the running command"
    );
    assert!(!home.paths.socket.exists());
    assert!(home.journal(&id).iter().any(|e| matches!(
        e.kind,
        EventKind::TurnFinished {
            outcome: TurnOutcome::Interrupted,
            ..
        }
    )));
}

fn http_post(socket: &std::path::Path, body: &str) -> (u16, Value) {
    let mut stream = UnixStream::connect(socket).unwrap();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status: u16 = response[9..12].parse().unwrap();
    let json_start = response.find("\r\n\r\n").unwrap() + 4;
    let body = &response[json_start..];
    // hyper may answer with a chunked body.
    let body = body
        .find('{')
        .map(|start| &body[start..=body.rfind('}').unwrap()])
        .unwrap_or("null");
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_calls_work_and_malformed_requests_get_json_rpc_errors() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let socket = &home.paths.socket;

    let (status, info) = http_post(socket, r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#);
    assert_eq!(status, 200);
    assert_eq!(info["result"]["pid"], _daemon.pid());

    let cases = [
        ("{not json", -32700),
        (r#"{"jsonrpc":"2.0","id":2}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":3,"method":"no/such"}"#, -32601),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"session/get","params":{"wrong":1}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"session/get","params":{"sessionId":"nope"}}"#,
            -33001,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"session/create","params":{"cwd":"/does/not/exist"}}"#,
            -33007,
        ),
    ];
    for (body, code) in cases {
        let (_, answer) = http_post(socket, body);
        assert_eq!(answer["error"]["code"], code, "{body} → {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let (status, _) = http_post(
        socket,
        r#"{"jsonrpc":"2.0","id":7,"method":"session/list"}"#,
    );
    assert_eq!(status, 200, "the daemon still serves after bad input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_and_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let mode = std::fs::metadata(&home.paths.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let home_mode = std::fs::metadata(&home.paths.home)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(home_mode & 0o777, 0o700);

    // A daemon owned by `nobody`, on a socket root can reach: root's connection must be closed
    // by the peer-uid check before any request is read.
    let nobody_dir = tempfile::Builder::new()
        .prefix("cwcode-nobody")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(nobody_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let binary = nobody_dir.path().join("cwcoded");
    std::fs::copy(cwcode_tests::bin("cwcoded"), &binary).unwrap();
    let nobody_home = nobody_dir.path().join("home");
    std::fs::create_dir(&nobody_home).unwrap();
    let chown = std::process::Command::new("chown")
        .args(["nobody", nobody_home.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(chown.success());
    let mut daemon = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&binary)
        .env("CWCODE_HOME", &nobody_home)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = nobody_home.join("cwcoded.sock");
    cwcode_tests::wait_for_socket(&socket);
    let mut stream = UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#;
    let _ = write!(
        stream,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "another user's connection got an answer: {}",
        String::from_utf8_lossy(&answer)
    );
    let _ = daemon.kill();
    let _ = std::process::Command::new("pkill")
        .args(["-u", "nobody", "-f", binary.to_str().unwrap()])
        .status();
    let _ = daemon.wait();

    // And `nobody` cannot even reach root's socket.
    let probe = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "test", "-w"])
        .arg(&home.paths.socket)
        .status()
        .unwrap();
    assert!(!probe.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_starts_the_daemon_when_none_answers() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let listed = home.cli_ok(&["ls"]);
    assert!(listed.contains("no sessions yet"), "{listed}");
    let status = home.cli_ok(&["daemon", "status", "--json"]);
    let info: Value = serde_json::from_str(&status).unwrap();
    assert!(info["pid"].as_u64().is_some());
    home.cli_ok(&["daemon", "stop"]);
    let status = home.cli(&["daemon", "status"]);
    assert!(
        !status.status.success(),
        "status after stop reports not running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_for_the_same_home_is_refused() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let second = home.command("cwcoded").output().unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("already running") && stderr.contains(&daemon.pid().to_string()),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_fails_the_turn_with_the_reason_and_keeps_the_session_usable() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(fake_provider::Reply::Status(
            400,
            r#"{"error":{"message":"model overloaded"}}"#.to_owned(),
        ))
        .reply(text("recovered"));
    let id = home.new_session("code");
    let failed = home.cli(&["send", &id, "hi", "--wait"]);
    assert_eq!(failed.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("model overloaded"));
    assert!(!String::from_utf8_lossy(&failed.stderr).contains("sk-test-secret-key"));
    assert_eq!(
        home.cli_ok(&["send", &id, "again", "--wait"]).trim(),
        "recovered"
    );
    let log = std::fs::read_dir(home.paths.logs_dir())
        .unwrap()
        .flatten()
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .collect::<String>();
    assert!(
        !log.contains("sk-test-secret-key"),
        "the key never reaches the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_changes_are_stored_and_journalled() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let id = home.new_session("code");
    home.cli_ok(&["mode", &id, "plan"]);
    let info: Value = serde_json::from_str(&home.cli_ok(&["show", &id, "--json"])).unwrap();
    assert_eq!(info["mode"], "plan");
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(home.paths.session_dir(&id).join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored["mode"], "plan");
    assert!(home.journal(&id).iter().any(|e| matches!(
        e.kind,
        EventKind::ModeChanged {
            mode: cwcode_protocol::Mode::Plan
        }
    )));
    let bad = home.cli(&["mode", &id, "reckless"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("plan, code or yolo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_shows_usage_and_the_shared_prefix_per_turn() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[("l", "ls", json!({}))]))
        .reply(text("listed"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "list", "--wait"]);
    let report: Value = serde_json::from_str(&home.cli_ok(&["cache", &id, "--json"])).unwrap();
    let turn = &report["turns"][0];
    assert_eq!(turn["requests"], 2);
    assert_eq!(
        turn["promptTokens"], 200,
        "the fake reports 100 prompt tokens a request"
    );
    assert_eq!(turn["cachedTokens"], 128);
    let bytes = turn["lastRequestBytes"].as_u64().unwrap();
    let shared = turn["lastSharedPrefixBytes"].as_u64().unwrap();
    let first = report["firstRequestBytes"].as_u64().unwrap();
    assert!(shared > 0 && shared < bytes, "{report}");
    assert!(
        first - 2 <= shared,
        "the second request repeats the first up to its last message: {report}"
    );
    let human = home.cli_ok(&["cache", &id]);
    assert!(human.contains("64.0%"), "{human}");
    let cost = home.cli_ok(&["cost", &id]);
    assert!(cost.contains("no price table"), "{cost}");
}
