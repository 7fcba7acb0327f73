//! Editors over ACP: `cwcode-cli acp` driven by the official TypeScript ACP client
//! (`@agentclientprotocol/sdk`, installed by `npm ci --prefix tests/acp`) against a real daemon
//! and the fake provider. The session an editor makes is an ordinary session: a fresh `acp`
//! process loads it with its history, and the CLI sees the same turns.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, Gate, hold_until, text, tool_calls};
use cwcode_tests::{Home, bin, wait_for_event};
use serde_json::{Value, json};

const SCRIPT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/acp");
/// Longer than any step takes; the script has its own 60 s deadline and reports a hang.
const STEP_TIMEOUT: Duration = Duration::from_secs(90);

/// Whether node and the installed SDK are here. Under CI they must be: the test fails instead of
/// skipping.
fn node_ready() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    let sdk = Path::new(SCRIPT_DIR)
        .join("node_modules/@agentclientprotocol/sdk/package.json")
        .is_file();
    if node && sdk {
        return true;
    }
    let missing = if node {
        "the ACP SDK: run `npm ci --prefix tests/acp`"
    } else {
        "node (Node.js 20 or later)"
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the ACP end-to-end test needs {missing}"
    );
    eprintln!("skipping: the ACP end-to-end test needs {missing}");
    false
}

/// The Node client running one scenario; its JSON lines arrive on a channel.
struct Script {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Script {
    fn start(home: &Home, args: &[&str]) -> Self {
        let mut child = Command::new("node")
            .arg(Path::new(SCRIPT_DIR).join("client.mjs"))
            .arg(bin("cwcode-cli"))
            .arg(&home.workspace)
            .args(args)
            .env("CWCODE_HOME", &home.paths.home)
            .env_remove("CWCODE_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run node");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({"step": "garbage", "line": line}));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line, which must be step `step`.
    fn step(&self, step: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(STEP_TIMEOUT)
            .unwrap_or_else(|_| panic!("the ACP client never reached `{step}`"));
        assert_eq!(line["step"], step, "the ACP client said {line:#}");
        line
    }

    fn finish(mut self) {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the ACP client exited with {status}");
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn of_kind<'a>(updates: &'a Value, kind: &str) -> Vec<&'a Value> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|update| update["sessionUpdate"] == kind)
        .collect()
}

fn joined_text(updates: &Value, kind: &str) -> String {
    of_kind(updates, kind)
        .iter()
        .map(|update| update["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

fn bash(call_id: &str, file: &str) -> cwcode_tests::fake_provider::Reply {
    tool_calls(&[(
        call_id,
        "bash",
        json!({"command": format!("echo ran > {file}")}),
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_drives_a_session_that_other_clients_share() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // Never opened: the third prompt streams until the editor cancels it.
    let gate = Gate::new();
    provider
        .reply(bash("b1", "one.txt"))
        .reply(text("made one.txt"))
        .reply(bash("b2", "two.txt"))
        .reply(text("left two.txt alone"))
        .reply(hold_until(text("a long answer that never ends"), 3, &gate))
        .reply(text("the cli answer"));

    let editor = Script::start(&home, &["main"]);
    let init = editor.step("initialized");
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentInfo"]["name"], "cwcode");
    assert_eq!(init["capabilities"]["loadSession"], true);
    assert_eq!(
        init["capabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );

    let session = editor.step("session");
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(session["modes"]["currentModeId"], "code");
    let modes: Vec<&str> = session["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mode| mode["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["plan", "code", "yolo"]);
    assert_eq!(session["configOptions"][0]["id"], "profile");
    assert_eq!(session["configOptions"][0]["currentValue"], "fake");

    // Granted: the call runs, streams as a tool call, and the turn ends with usage.
    let granted = editor.step("granted");
    assert_eq!(granted["stopReason"], "end_turn");
    let permission = &granted["permission"];
    assert_eq!(permission["toolCall"]["toolCallId"], "b1");
    let kinds: Vec<&str> = permission["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| option["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    let updates = &granted["updates"];
    let call = of_kind(updates, "tool_call");
    assert_eq!(call.len(), 1, "{updates:#}");
    assert_eq!(call[0]["kind"], "execute");
    assert_eq!(call[0]["title"], "bash `echo ran > one.txt`");
    let last = of_kind(updates, "tool_call_update").pop().unwrap().clone();
    assert_eq!(last["status"], "completed", "{updates:#}");
    assert_eq!(joined_text(updates, "agent_message_chunk"), "made one.txt");
    let usage = of_kind(updates, "usage_update");
    assert!(
        usage[0]["_meta"]["cwcode"]["promptTokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{usage:#?}"
    );
    assert!(usage[0]["_meta"]["cwcode"]["cachedTokens"].is_u64());
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("one.txt")).unwrap(),
        "ran\n"
    );

    // Denied: the call fails with the editor's reason and the file is never made.
    let denied = editor.step("denied");
    assert_eq!(denied["stopReason"], "end_turn");
    let last = of_kind(&denied["updates"], "tool_call_update")
        .pop()
        .unwrap()
        .clone();
    assert_eq!(last["status"], "failed", "{denied:#}");
    assert_eq!(
        joined_text(&denied["updates"], "agent_message_chunk"),
        "left two.txt alone"
    );
    assert!(!home.workspace.join("two.txt").exists());

    assert_eq!(editor.step("cancelled")["stopReason"], "cancelled");
    assert_eq!(
        editor.step("mode")["update"]["currentModeId"],
        "plan",
        "set_mode comes back as current_mode_update"
    );

    let listed = editor.step("listed");
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed:#}");
    assert_eq!(sessions[0]["sessionId"], session_id.as_str());
    assert_eq!(sessions[0]["title"], "make one.txt");
    assert_eq!(listed["elsewhere"], json!([]));
    editor.finish();

    // A fresh editor process loads the session and sees its history.
    let again = Script::start(&home, &["load", &session_id]);
    let loaded = again.step("loaded");
    assert_eq!(
        loaded["userText"],
        json!(["make one.txt", "make two.txt", "talk for a long time"])
    );
    let agent_text = loaded["agentText"].as_str().unwrap();
    assert!(agent_text.contains("made one.txt"), "{agent_text}");
    assert!(agent_text.contains("left two.txt alone"), "{agent_text}");
    assert_eq!(loaded["toolCalls"].as_array().unwrap().len(), 2);

    // The CLI attached to the same session: its prompt shows live in the editor...
    let sent = home.cli_ok(&["send", &session_id, "ask from the cli", "--wait"]);
    assert!(sent.contains("the cli answer"), "{sent}");
    let live = again.step("live");
    assert_eq!(
        joined_text(&live["updates"], "user_message_chunk"),
        "ask from the cli"
    );
    assert_eq!(
        joined_text(&live["updates"], "agent_message_chunk"),
        "the cli answer"
    );
    again.finish();

    // ...and it sees the editor's turns as its own.
    let events = home.cli_ok(&["events", &session_id, "--json"]);
    let prompts: Vec<String> = events
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "turn_started")
        .map(|event| event["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        prompts,
        [
            "make one.txt",
            "make two.txt",
            "talk for a long time",
            "ask from the cli"
        ]
    );
}

/// Writes one line to the bridge and reads its one answer.
fn exchange(stdin: &mut ChildStdin, answers: &mpsc::Receiver<Value>, line: &str) -> Value {
    writeln!(stdin, "{line}").unwrap();
    answers
        .recv_timeout(STEP_TIMEOUT)
        .unwrap_or_else(|_| panic!("no answer to {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unknown_messages_get_errors_and_the_bridge_keeps_serving() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let mut bridge = home
        .command("cwcode-cli")
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let stdout = bridge.stdout.take().unwrap();
    let (sender, answers) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    let init = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
    );
    assert_eq!(init["result"]["protocolVersion"], 1);

    let garbage = exchange(&mut stdin, &answers, "this is not json");
    assert_eq!(garbage["error"]["code"], -32700, "{garbage}");
    let unknown = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/teleport","params":{}}"#,
    );
    assert_eq!(unknown["id"], 2);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let bad_params = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":5,"mcpServers":[]}}"#,
    );
    assert_eq!(bad_params["error"]["code"], -32602, "{bad_params}");
    let relative = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"work","mcpServers":[]}}"#,
    );
    assert!(
        relative["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an absolute path"),
        "{relative}"
    );
    let missing = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"no-such-session","prompt":[{"type":"text","text":"hi"}]}}"#,
    );
    assert_eq!(
        missing["error"]["code"],
        cwcode_protocol::ErrorCode::SessionNotFound.code(),
        "{missing}"
    );
    let image = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"image","data":"AA==","mimeType":"image/png"}]}}"#,
    );
    assert!(
        image["error"]["message"]
            .as_str()
            .unwrap()
            .contains("images"),
        "{image}"
    );

    // Still serving.
    let listed = exchange(
        &mut stdin,
        &answers,
        r#"{"jsonrpc":"2.0","id":7,"method":"session/list","params":{}}"#,
    );
    assert_eq!(listed["id"], 7);
    assert_eq!(listed["result"]["sessions"], json!([]));

    // The editor closing stdin ends the bridge.
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while bridge.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the bridge outlived its editor"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_stopping_mid_prompt_ends_the_prompt_with_an_error() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let gate = Gate::new();
    provider.reply(hold_until(text("words and words and words"), 3, &gate));

    let editor = Script::start(&home, &["stop"]);
    editor.step("streaming");
    assert!(daemon.terminate().success());
    let stopped = editor.step("stopped");
    let message = stopped["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cwcoded") && message.contains("interrupted"),
        "{stopped:#}"
    );
    editor.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_elsewhere_is_withdrawn_and_a_mode_change_shows() {
    if !node_ready() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(bash("b3", "three.txt"))
        .reply(text("made three.txt"));

    let editor = Script::start(&home, &["elsewhere"]);
    let session = editor.step("session");
    let session_id = session["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(editor.step("asked")["toolCallId"], "b3");
    let asked = wait_for_event(&home, &session_id, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let EventKind::ApprovalRequested { request_id, .. } = asked.kind else {
        unreachable!()
    };
    home.cli_ok(&["approve", &session_id, &request_id]);
    editor.step("withdrawn");
    assert_eq!(editor.step("done")["stopReason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("three.txt")).unwrap(),
        "ran\n"
    );

    home.cli_ok(&["mode", &session_id, "yolo"]);
    assert_eq!(editor.step("mode")["update"]["currentModeId"], "yolo");
    editor.finish();
}
