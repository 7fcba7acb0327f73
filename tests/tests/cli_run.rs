//! `cwcode-cli run` (one-shot runs for scripts and CI) and `cwcode-cli wait`, against a real
//! daemon and the fake provider: an approval answered by an `--allow` rule, one nobody answers
//! ending the run after `--timeout`, the `--json` stream, and `wait --for approval`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use cwcode_protocol::{ApprovalDecision, EventKind, TurnOutcome};
use cwcode_tests::fake_provider::{FakeProvider, Gate, Reply, hold_until, text, tool_calls};
use cwcode_tests::{Home, wait_for_event};
use serde_json::{Value, json};

fn bash(call_id: &str, command: &str) -> Reply {
    tool_calls(&[(call_id, "bash", json!({ "command": command }))])
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Waits for a child with a deadline, so a test never hangs on a CLI that waits forever.
fn wait_with_deadline(mut child: std::process::Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("cwcode-cli did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_approves_a_bash_call_its_allow_rule_matches_and_exits_zero() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(bash("b1", "touch made.txt"))
        .reply(text("made it"));
    let workspace = home.workspace.to_str().unwrap();
    let output = home.cli(&[
        "run",
        "--cwd",
        workspace,
        "--mode",
        "code",
        "--allow",
        "edit_lines",
        "--allow",
        "bash:touch *",
        "make the file",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        home.workspace.join("made.txt").exists(),
        "the approved command ran"
    );
    assert_eq!(
        stdout(&output).trim(),
        "made it",
        "the answer alone is on stdout"
    );
    assert!(
        stderr(&output).contains("approved by --allow bash:touch *"),
        "{}",
        stderr(&output)
    );
    let id = home.only_session();
    let resolved = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ApprovalResolved { .. })
    });
    assert!(
        matches!(
            resolved.kind,
            EventKind::ApprovalResolved {
                decision: ApprovalDecision::Approve,
                ..
            }
        ),
        "approved once, not always: {resolved:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_cancels_the_turn_and_exits_7_when_an_approval_goes_unanswered() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // Chained onto an allowed command: the rule's `*` must not span the `;`.
    provider.reply(bash("b1", "touch made.txt; touch sneaked.txt"));
    let workspace = home.workspace.to_str().unwrap();
    let started = Instant::now();
    let output = home.cli(&[
        "run",
        "--cwd",
        workspace,
        "--mode",
        "code",
        "--allow",
        "bash:touch *",
        "--timeout",
        "500ms",
        "make the file",
    ]);
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        stderr(&output).contains("had no answer within 500 ms: the turn was cancelled"),
        "{}",
        stderr(&output)
    );
    assert!(!home.workspace.join("made.txt").exists(), "nothing ran");
    let id = home.only_session();
    let finished = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    assert!(
        matches!(
            finished.kind,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Cancelled,
                ..
            }
        ),
        "{finished:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_streams_one_event_per_line_and_reads_the_prompt_from_stdin() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider.reply(text("hello from the fake"));
    let workspace = home.workspace.to_str().unwrap();
    let mut child = home
        .command("cwcode-cli")
        .args(["run", "--cwd", workspace, "--mode", "plan", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"say hello\n").unwrap();
    }
    let output = wait_with_deadline(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    assert_eq!(lines[0]["type"], "session_created", "{lines:?}");
    let id = lines[0]["session"]["id"].as_str().unwrap();
    assert_eq!(id, home.only_session());
    assert!(
        lines
            .iter()
            .any(|line| line["type"] == "turn_started" && line["prompt"] == "say hello\n"),
        "{lines:?}"
    );
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "turn_finished", "{lines:?}");
    assert_eq!(last["outcome"], "completed");
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_approval_returns_the_request_when_it_is_asked() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(bash("b1", "touch waited.txt"))
        .reply(text("done"));
    let id = home.new_session("code");
    let waiter = home
        .command("cwcode-cli")
        .args([
            "wait",
            &id,
            "--for",
            "approval",
            "--json",
            "--timeout",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    home.cli_ok(&["send", &id, "make the file"]);
    let output = wait_with_deadline(waiter, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let request: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(request["type"], "approval_requested");
    assert_eq!(request["tool"], "bash");
    let request_id = request["requestId"].as_str().unwrap();

    // Asked again while it still waits, `wait` answers at once with the same request.
    let again = home.cli_ok(&["wait", &id, "--for", "approval", "--timeout", "10s"]);
    assert!(again.starts_with(&format!("{request_id} bash")), "{again}");

    home.cli_ok(&["approve", &id, request_id]);
    home.cli_ok(&["wait", &id, "--for", "idle", "--timeout", "30s"]);
    assert!(home.workspace.join("waited.txt").exists());

    // Nothing left to approve: the timeout ends the wait with its own code.
    let timed_out = home.cli(&["wait", &id, "--for", "approval", "--timeout", "300ms"]);
    assert_eq!(timed_out.status.code(), Some(7), "{}", stderr(&timed_out));
    assert!(stderr(&timed_out).contains("still no approval request"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_run_cancels_the_turn_and_exits_130() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let gate = Gate::new();
    provider.reply(hold_until(text("one two three four"), 2, &gate));
    let workspace = home.workspace.to_str().unwrap();
    let mut child = home
        .command("cwcode-cli")
        .args(["run", "--cwd", workspace, "--mode", "plan", "talk"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = [0u8; 16];
    {
        use std::io::Read;
        let read = child.stdout.as_mut().unwrap().read(&mut seen).unwrap();
        assert!(read > 0, "the answer never started");
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let output = wait_with_deadline(child, Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the turn was cancelled"),
        "{}",
        stderr(&output)
    );
    let id = home.only_session();
    let finished = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { .. })
    });
    assert!(
        matches!(
            finished.kind,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Cancelled,
                ..
            }
        ),
        "{finished:?}"
    );
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_goal_returns_the_status_once_the_loop_has_stopped() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // The one cycle is held until the waiter runs: the loop is still going when it starts.
    let gate = Gate::new();
    provider.reply(hold_until(text("Not yet."), 2, &gate));
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "write the docs"]);
    home.cli_ok(&["goal", &id, "on", "--cap", "1"]);
    let still_running = home.cli(&["wait", &id, "--for", "goal", "--timeout", "300ms"]);
    assert_eq!(
        still_running.status.code(),
        Some(7),
        "{}",
        stderr(&still_running)
    );
    let waiter = home
        .command("cwcode-cli")
        .args(["wait", &id, "--for", "goal", "--json", "--timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    gate.open();
    let output = wait_with_deadline(waiter, Duration::from_secs(60));
    // The cap ended it with the goal open: not a success (exit 0 is for `complete`).
    assert_eq!(output.status.code(), Some(8), "{}", stderr(&output));
    let status: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(status["running"], false, "{status}");
    assert_eq!(status["state"], "capped", "{status}");
    assert_eq!(status["left"], 1, "{status}");
    assert!(
        home.journal(&id)
            .iter()
            .any(|event| matches!(event.kind, EventKind::GoalLoopStopped { .. })),
        "`wait` returned before the loop stopped"
    );
}
