//! The CLI details a daily user notices: JSON errors, the same status words in `show` and `ls`,
//! an empty prompt refused, `events` keeping the transcript on stdout and failing when the
//! daemon goes away, Ctrl+C during `send --wait` leaving the turn running, and `todo ID`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::Read;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use cwcode_protocol::{EventKind, TurnOutcome};
use cwcode_tests::fake_provider::{FakeProvider, Gate, hold_until, text, tool_calls};
use cwcode_tests::{Home, wait_for_event};
use serde_json::{Value, json};

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn json_error(output: &Output) -> Value {
    let text = stderr(output);
    let error: Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not one JSON line: {text}"));
    error["error"].clone()
}

/// Reads a child's stream until `wanted` appears in it.
fn read_until(stream: &mut impl Read, wanted: &str) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains(wanted) {
        let read = stream.read(&mut buffer).unwrap();
        assert!(
            read > 0,
            "ended before `{wanted}`: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

fn exit_within(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("cwcode-cli did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_json_errors_are_json_on_stderr_and_keep_the_daemons_data() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();

    let missing = home.cli(&["show", "no-such-session", "--json"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(missing.stdout.is_empty());
    let error = json_error(&missing);
    assert_eq!(error["code"], -33001, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session")
    );

    let bad_params = home.cli(&["rpc", "session/get", r#"{"sessionId": 5}"#, "--json"]);
    assert_eq!(bad_params.status.code(), Some(1));
    let error = json_error(&bad_params);
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["data"]
            .as_str()
            .unwrap()
            .contains("expected a string"),
        "the daemon's data is kept: {error}"
    );
    // In words too.
    let human = home.cli(&["rpc", "session/get", r#"{"sessionId": 5}"#]);
    assert!(stderr(&human).contains("data: "), "{}", stderr(&human));

    let usage = home.cli(&["run", "--allow", "bash:", "go", "--json"]);
    assert_eq!(usage.status.code(), Some(2));
    let error = json_error(&usage);
    assert_eq!(error["code"], "usage");
    assert!(error["message"].as_str().unwrap().contains("empty pattern"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_prompt_is_refused_before_anything_is_sent() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let id = home.new_session("code");
    for args in [
        vec!["send", &id, "  "],
        vec!["run", ""],
        vec!["send", &id, "-"],
    ] {
        let output = home.cli(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains("empty"), "{}", stderr(&output));
    }
    assert!(provider.requests().is_empty());
    let sessions: Value = serde_json::from_str(&home.cli_ok(&["ls", "--json"])).unwrap();
    assert_eq!(
        sessions.as_array().unwrap().len(),
        1,
        "`run` made no session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_and_ls_say_awaiting_approval_and_events_prints_the_transcript_on_stdout() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[(
            "b1",
            "bash",
            json!({"command": "touch shown.txt"}),
        )]))
        .reply(text("the file is there"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "make the file"]);
    let asked = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let shown = home.cli_ok(&["show", &id]);
    assert!(shown.contains("status   awaiting approval\n"), "{shown}");
    let listed = home.cli_ok(&["ls"]);
    assert!(listed.contains("awaiting approval"), "{listed}");

    let EventKind::ApprovalRequested { request_id, .. } = asked.kind else {
        unreachable!()
    };
    home.cli_ok(&["approve", &id, &request_id]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    let events = home.cli(&["events", &id]);
    assert!(events.status.success());
    let transcript = String::from_utf8(events.stdout).unwrap();
    for part in [
        "› [1] make the file",
        "▶ bash",
        "needs approval",
        "the file is there",
        "· turn 1 completed",
    ] {
        assert!(
            transcript.contains(part),
            "`{part}` not on stdout:\n{transcript}"
        );
    }
    assert!(
        events.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&events.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_exits_5_when_the_daemon_goes_away() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider.reply(text("first answer"));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "hello", "--wait"]);
    let mut follower = home
        .command("cwcode-cli")
        .args(["events", &id, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the replay shows, the follower is attached to this daemon.
    read_until(follower.stdout.as_mut().unwrap(), "first answer");
    assert!(daemon.terminate().success());
    let status = exit_within(&mut follower, Duration::from_secs(20));
    assert_eq!(status.code(), Some(5));
    let mut said = String::new();
    follower
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(said.contains("connection to cwcoded closed"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_send_wait_leaves_the_turn_running_and_says_how_to_cancel_it() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let gate = Gate::new();
    provider.reply(hold_until(text("one two three four"), 2, &gate));
    let id = home.new_session("yolo");
    let mut sender = home
        .command("cwcode-cli")
        .args(["send", &id, "talk", "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_until(sender.stdout.as_mut().unwrap(), "one");
    let pid = rustix::process::Pid::from_raw(sender.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = exit_within(&mut sender, Duration::from_secs(10));
    assert_eq!(status.code(), Some(130));
    let mut said = String::new();
    sender
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(said.contains("turn 1 goes on"), "{said}");
    assert!(said.contains(&format!("cwcode-cli cancel {id}")), "{said}");

    gate.open();
    let finished = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    assert!(
        matches!(
            finished.kind,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Completed,
                ..
            }
        ),
        "the turn went on: {finished:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todo_shows_the_list_the_model_last_wrote() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let id = home.new_session("yolo");
    assert!(home.cli_ok(&["todo", &id]).contains("no todo list"));
    provider
        .reply(tool_calls(&[(
            "t1",
            "todo_write",
            json!({"todos": [
                {"content": "read the code", "status": "completed"},
                {"content": "fix the bug", "status": "in_progress"},
                {"content": "run the tests", "status": "pending"}
            ]}),
        )]))
        .reply(text("planned"));
    home.cli_ok(&["send", &id, "plan it", "--wait"]);
    let shown = home.cli_ok(&["todo", &id]);
    assert_eq!(
        shown, "  [x] read the code\n  [~] fix the bug\n  [ ] run the tests\n",
        "{shown}"
    );
    let listed: Value = serde_json::from_str(&home.cli_ok(&["todo", &id, "--json"])).unwrap();
    assert_eq!(listed[1]["status"], "in_progress", "{listed}");
}
