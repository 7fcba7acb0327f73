//! The terminal client as a daily driver, end to end in tmux: Ctrl+D leaves while an approval
//! waits (and the approval is still there on return), and a daemon that died is started again
//! by the window that lost it, while one stopped on purpose stays stopped. Needs tmux.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, text, tool_calls};
use cwcode_tests::tmux::Tmux;
use cwcode_tests::{Home, tui_bin, wait_for_event};
use serde_json::json;

const WINDOW: &str = "daily:0";

/// Stops whatever daemon runs in the home when the test ends, also one the TUI started (the
/// harness only knows the one it started itself).
struct StopDaemonAtEnd<'a>(&'a Home);

impl Drop for StopDaemonAtEnd<'_> {
    fn drop(&mut self) {
        let _ = self.0.cli(&["daemon", "stop"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_d_leaves_while_an_approval_waits_and_the_approval_is_there_on_return() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    provider
        .reply(tool_calls(&[(
            "call_echo",
            "bash",
            json!({"command": "echo approved-after-the-detach"}),
        )]))
        .reply(text("Ran it once you came back."));

    let tmux = Tmux::start(&home, "daily", &home.workspace);
    tmux.type_line(WINDOW, cwcode);
    tmux.wait_for(WINDOW, &["● connected", " CODE "]).await;
    tmux.type_line(WINDOW, "run the echo");
    tmux.wait_for(WINDOW, &["? allow bash", "waiting for your approval"])
        .await;
    let session = home.only_session();

    // Ctrl+D with the approval prompt up: the program leaves at once, answering nothing.
    tmux.keys(WINDOW, &["C-d"]);
    tmux.wait_for(WINDOW, &["detached: session", "keeps running in cwcoded"])
        .await;
    let journal = home.journal(&session);
    assert!(
        !journal
            .iter()
            .any(|event| matches!(event.kind, EventKind::ApprovalResolved { .. })),
        "leaving answered the approval: {journal:?}"
    );

    // Back in the session, the same approval asks again and `y` lets the call run.
    tmux.type_line(WINDOW, &format!("{cwcode} --continue"));
    tmux.wait_for(WINDOW, &["? allow bash", "waiting for your approval"])
        .await;
    tmux.keys(WINDOW, &["y"]);
    tmux.wait_for(
        WINDOW,
        &["Ran it once you came back.", "✓ turn 1 completed"],
    )
    .await;
    let finished = wait_for_event(&home, &session, |kind| {
        matches!(
            kind,
            EventKind::ToolCallFinished {
                is_error: false,
                ..
            }
        )
    });
    let EventKind::ToolCallFinished { output, .. } = finished.kind else {
        unreachable!()
    };
    assert!(output.contains("approved-after-the-detach"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_died_is_started_again_and_one_stopped_on_purpose_is_not() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _stop_at_end = StopDaemonAtEnd(&home);
    let daemon = home.start_daemon();
    provider
        .reply(text("Before the crash."))
        .reply(text("After the restart."));

    let tmux = Tmux::start(&home, "daily", &home.workspace);
    tmux.type_line(WINDOW, cwcode);
    tmux.wait_for(WINDOW, &["● connected", " CODE "]).await;
    tmux.type_line(WINDOW, "first");
    tmux.wait_for(WINDOW, &["Before the crash.", "✓ turn 1 completed"])
        .await;

    // SIGKILL: the daemon leaves its socket and pid files behind, as a crash does.
    daemon.crash();
    tmux.wait_for(
        WINDOW,
        &[
            "lost the connection to cwcoded",
            "cwcoded had stopped unexpectedly: this window started it again",
            "reconnected to cwcoded",
        ],
    )
    .await;
    let screen = tmux
        .wait_until(WINDOW, "● connected in the status line", |screen| {
            screen
                .trim_end()
                .lines()
                .last()
                .unwrap_or_default()
                .contains("● connected")
        })
        .await;
    assert!(!screen.contains("✗ daemon lost"), "{screen}");
    // The session goes on in the new daemon: a prompt is answered, the transcript kept.
    tmux.type_line(WINDOW, "second");
    let screen = tmux
        .wait_for(WINDOW, &["After the restart.", "✓ turn 2 completed"])
        .await;
    assert!(screen.contains("Before the crash."), "{screen}");

    // Stopped on purpose: the window says how to bring it back and leaves that to the user.
    home.cli_ok(&["daemon", "stop"]);
    tmux.wait_for(
        WINDOW,
        &["cwcoded was stopped: `cwcode-cli daemon start` brings it back"],
    )
    .await;
    assert!(
        !home.paths.socket.exists(),
        "the window started the daemon that was stopped on purpose"
    );
    home.cli_ok(&["daemon", "start"]);
    tmux.wait_until(WINDOW, "a second reconnection", |screen| {
        screen.matches("reconnected to cwcoded").count() == 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_command_file_is_the_prompt_with_its_arguments_in_place() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let commands = home.workspace.join(".cwcode/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("review.md"),
        "Review $ARGUMENTS for bugs and missing tests.\n",
    )
    .unwrap();
    provider.reply(text("Reviewed."));

    let tmux = Tmux::start(&home, "daily", &home.workspace);
    tmux.type_line(WINDOW, cwcode);
    tmux.wait_for(WINDOW, &["● connected", " CODE "]).await;
    tmux.run(&["send-keys", "-t", WINDOW, "-l", "/rev"]);
    tmux.wait_for(WINDOW, &["/review ARGS", "Review $ARGUMENTS for bugs"])
        .await;
    tmux.keys(WINDOW, &["Tab"]);
    tmux.type_line(WINDOW, "src/cart.rs");
    tmux.wait_for(WINDOW, &["Reviewed.", "✓ turn 1 completed"])
        .await;
    let requests = provider.requests();
    let sent = requests.last().unwrap()["messages"].to_string();
    assert!(
        sent.contains("Review src/cart.rs for bugs and missing tests."),
        "{sent}"
    );
    assert!(!sent.contains("$ARGUMENTS"), "{sent}");
}
