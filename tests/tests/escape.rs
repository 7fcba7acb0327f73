//! The model's shell against the daemon that runs it: it cannot call the API, read the home, keep
//! processes alive past their owner, or leave a crash unaccounted for (issue 10, SPEC §4, §7.3).
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::time::{Duration, Instant};

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, last_tool_result, text, tool_calls};
use cwcode_tests::{Home, bin, wait_for_event};
use serde_json::json;

/// Whether bubblewrap works here; without it the home stays readable (the daemon's doctor says
/// so), which CI must not accept.
fn namespaces_available() -> bool {
    let works = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "bubblewrap must be installed in CI (.ci/run installs it)"
        );
        eprintln!("bubblewrap does not work here: skipping the home-hiding checks");
    }
    works
}

/// The pids of live processes whose command line contains `marker` (the shell running a command
/// that names it counts too).
fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let zombie = stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'));
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (text.contains(marker) && !zombie).then_some(pid)
        })
        .collect()
}

fn wait_until_gone(marker: &str) {
    let start = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "`{marker}` outlived its owner: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_until_running(marker: &str) {
    let start = Instant::now();
    while processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "`{marker}` never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bash(id: &str, command: &str) -> cwcode_tests::fake_provider::Reply {
    tool_calls(&[(id, "bash", json!({ "command": command }))])
}

fn background(id: &str, command: &str) -> cwcode_tests::fake_provider::Reply {
    tool_calls(&[(
        id,
        "bash_background",
        json!({ "action": "start", "command": command }),
    )])
}

/// What a hostile model tries from its shell: call the API with the CLI, read the config and
/// encode the key past the redactor, list other sessions.
fn escape_attempt(home: &Home) -> String {
    let cli = bin("cwcode-cli");
    let home_dir = home.paths.home.display();
    let socket = home.paths.socket.display();
    format!(
        "env | grep -c '^CWCODE_' ; \
         {cli} --json ls 2>&1; echo cli-exit=$?; \
         CWCODE_HOME={home_dir} CWCODE_SOCKET={socket} {cli} new --cwd / --mode yolo 2>&1; \
         echo new-exit=$?; \
         base64 {home_dir}/config.json 2>&1; rev {home_dir}/config.json 2>&1; \
         ls {home_dir}/sessions 2>&1; echo done",
        cli = cli.display()
    )
}

fn assert_escape_refused(home: &Home, output: &str) {
    let secret = "sk-test-secret-key";
    let encoded = "c2stdGVzdC1zZWNyZXQta2V5"; // base64 of the key
    let reversed: String = secret.chars().rev().collect();
    for leaked in [secret, encoded, &reversed[..], "api_key", "default_profile"] {
        assert!(!output.contains(leaked), "{leaked} leaked:\n{output}");
    }
    assert!(
        output.starts_with("0\n"),
        "CWCODE_ variables reached the tool:\n{output}"
    );
    assert!(!output.contains("cli-exit=0"), "{output}");
    assert!(!output.contains("new-exit=0"), "{output}");
    assert!(output.contains("done"), "{output}");
    let sessions = home.cli_ok(&["ls", "--json"]);
    let sessions: serde_json::Value = serde_json::from_str(&sessions).unwrap();
    assert_eq!(
        sessions.as_array().unwrap().len(),
        1,
        "the tool created a session:\n{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_shell_cannot_call_the_api_or_read_the_home() {
    if !namespaces_available() {
        return;
    }
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let attempt = escape_attempt(&home);
    provider
        .reply(bash("c1", &attempt))
        .reply(text("tried"))
        .reply(background(
            "c2",
            &format!("( {attempt} ) > escape.log 2>&1"),
        ))
        .reply(text("tried again"));
    let id = home.new_session("yolo");

    home.cli_ok(&["send", &id, "escape", "--wait"]);
    let from_bash = last_tool_result(&provider.requests()[1]);
    assert_escape_refused(&home, &from_bash);

    home.cli_ok(&["send", &id, "escape in the background", "--wait"]);
    let from_background = last_tool_result(&provider.requests()[3]);
    assert!(from_background.contains("started background process 1"));
    // The background command may still be running its attempts: wait for its last word.
    let log = home.workspace.join("escape.log");
    let start = Instant::now();
    let output = loop {
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        if output.contains("done") {
            break output;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{output}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_escape_refused(&home, &output);

    // Exits 1 here: the test's config.json holds a key and is not 0600.
    let doctor = String::from_utf8(home.cli(&["doctor"]).stdout).unwrap();
    assert!(doctor.contains("own namespaces"), "{doctor}");
    assert!(
        doctor.contains("tool processes refused as API clients"),
        "{doctor}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_its_call_session_or_daemon() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    let id = home.new_session("yolo");

    // Left the group with setsid, and ran past the command's exit.
    provider
        .reply(bash(
            "c1",
            "setsid sleep 301.25 </dev/null >/dev/null 2>&1 & echo left",
        ))
        .reply(text("ok"));
    home.cli_ok(&["send", &id, "leave one behind", "--wait"]);
    wait_until_gone("sleep 301.25");

    // A cancelled call.
    provider.reply(bash(
        "c2",
        "setsid sleep 302.25 </dev/null >/dev/null 2>&1 & sleep 302.5",
    ));
    home.cli_ok(&["send", &id, "run long"]);
    wait_until_running("sleep 302.5");
    home.cli_ok(&["cancel", &id]);
    wait_until_gone("sleep 302.25");
    wait_until_gone("sleep 302.5");
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { turn: 2, .. })
    });

    // A background process of a deleted session.
    provider
        .reply(background(
            "c3",
            "setsid sleep 303.25 </dev/null >/dev/null 2>&1 & sleep 303.5",
        ))
        .reply(text("started"));
    home.cli_ok(&["send", &id, "serve", "--wait"]);
    wait_until_running("sleep 303.25");
    home.cli_ok(&["rm", &id]);
    wait_until_gone("sleep 303.25");
    wait_until_gone("sleep 303.5");

    // A background process of a daemon that stops.
    let id = home.new_session("yolo");
    provider
        .reply(background(
            "c4",
            "setsid sleep 304.25 </dev/null >/dev/null 2>&1 & sleep 304.5",
        ))
        .reply(text("started"));
    home.cli_ok(&["send", &id, "serve", "--wait"]);
    wait_until_running("sleep 304.25");
    assert!(daemon.terminate().success());
    wait_until_gone("sleep 304.25");
    wait_until_gone("sleep 304.5");

    // And of one that is killed: the next daemon of this home kills the leftovers.
    let daemon = home.start_daemon();
    provider
        .reply(background(
            "c5",
            "setsid sleep 305.25 </dev/null >/dev/null 2>&1 & sleep 305.5",
        ))
        .reply(text("started"));
    home.cli_ok(&["send", &id, "serve", "--wait"]);
    wait_until_running("sleep 305.25");
    daemon.crash();
    assert!(!processes_with("sleep 305.25").is_empty());
    let _daemon = home.start_daemon();
    wait_until_gone("sleep 305.25");
    wait_until_gone("sleep 305.5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_command_is_reported_as_interrupted_and_rewind_covers_it() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let file = home.workspace.join("notes.txt");
    std::fs::write(&file, "original\n").unwrap();
    let daemon = home.start_daemon();
    let id = home.new_session("yolo");
    provider.reply(bash(
        "c1",
        "echo changed > notes.txt; echo new > created.txt; sleep 306.5",
    ));

    home.cli_ok(&["send", &id, "change and hang"]);
    let start = Instant::now();
    while !home.workspace.join("created.txt").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "changed\n");
    daemon.crash();

    let _daemon = home.start_daemon();
    wait_until_gone("sleep 306.5");
    let finished = wait_for_event(
        &home,
        &id,
        |kind| matches!(kind, EventKind::ToolCallFinished { call_id, .. } if call_id == "c1"),
    );
    let EventKind::ToolCallFinished { output, .. } = finished.kind else {
        unreachable!()
    };
    assert!(output.starts_with("interrupted:"), "{output}");
    assert!(output.contains("notes.txt"), "{output}");
    assert!(output.contains("/rewind 1"), "{output}");

    home.cli_ok(&["rewind", &id, "1"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
    assert!(!home.workspace.join("created.txt").exists());
}
