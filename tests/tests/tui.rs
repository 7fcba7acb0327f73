//! The terminal client end to end: the real `cwcode` in tmux, driven with `send-keys` and read
//! with `capture-pane`, against a real cwcoded and the fake provider. Needs tmux.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::{EventKind, Mode};
use cwcode_tests::fake_provider::{FakeProvider, edit_line_as_read, text, tool_calls};
use cwcode_tests::tmux::Tmux;
use cwcode_tests::{Home, tui_bin, wait_for_event};
use serde_json::json;

const ORIGINAL: &str = "fn main() {\n    println!(\"hello\");\n}\n";
const EDITED: &str = "fn main() {\n    println!(\"edited\");\n}\n";

/// The status line: the last row of the screen.
fn status_line(screen: &str) -> &str {
    screen.trim_end().lines().last().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_approve_mode_detach_and_reattach_in_tmux() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    std::fs::write(home.workspace.join("main.rs"), ORIGINAL).unwrap();
    provider
        .reply(text("Hello from the fake model."))
        .reply(tool_calls(&[(
            "call_read",
            "read_file",
            json!({"path": "main.rs"}),
        )]))
        .then(edit_line_as_read("main.rs", 2, "    println!(\"edited\");"))
        .reply(text("I changed the greeting."))
        .reply(text("Both windows see this."))
        .reply(text("Still here after the other left."));

    let tmux = Tmux::start(&home, "tui", &home.workspace);
    let first = "tui:0";
    // No session in this directory yet: plain `cwcode` starts one.
    tmux.type_line(first, cwcode);
    let screen = tmux.wait_for(first, &["● connected", " CODE "]).await;
    assert!(screen.contains("fake · fake-model"), "{screen}");
    // The session is created by its first prompt, which titles it: none is left behind by a
    // window that never sent one.
    assert_eq!(
        std::fs::read_dir(home.paths.sessions_dir()).map_or(0, Iterator::count),
        0
    );

    // A prompt, and its answer streamed in.
    tmux.type_text(first, "say hello");
    tmux.keys(first, &["Enter"]);
    let screen = tmux
        .wait_for(first, &["Hello from the fake model.", "✓ turn 1 completed"])
        .await;
    let session = home.only_session();
    assert!(
        screen.contains("· say hello ·"),
        "titled from the prompt: {screen}"
    );
    assert!(screen.contains("› say hello"), "{screen}");
    assert!(status_line(&screen).contains("cache 64%"), "{screen}");

    // An edit waits for approval, its diff on screen; `y` lets it run.
    tmux.type_text(first, "change the greeting");
    tmux.keys(first, &["Enter"]);
    let screen = tmux
        .wait_for(first, &["? allow edit_lines", "waiting for your approval"])
        .await;
    assert!(screen.contains("edit_lines main.rs +1 -1"), "{screen}");
    assert!(
        screen.contains("2 -     println!(\"hello\");"),
        "the old line is shown: {screen}"
    );
    assert!(
        screen.contains("2 +     println!(\"edited\");"),
        "the new line is shown: {screen}"
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        ORIGINAL,
        "nothing is written before the approval"
    );
    tmux.keys(first, &["y"]);
    tmux.wait_for(first, &["I changed the greeting.", "✓ turn 2 completed"])
        .await;
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        EDITED
    );

    // Yolo is asked for by name (Shift+Tab only toggles plan and code); from it Shift+Tab goes
    // to plan, in the daemon too.
    tmux.type_line(first, "/mode yolo");
    tmux.wait_for(first, &[" YOLO ", "mode is now yolo"]).await;
    wait_for_event(&home, &session, |kind| {
        matches!(kind, EventKind::ModeChanged { mode: Mode::Yolo })
    });
    tmux.keys(first, &["BTab"]);
    tmux.wait_for(first, &[" PLAN ", "mode is now plan"]).await;

    // Detach: the program leaves, the session stays.
    tmux.type_line(first, "/detach");
    let screen = tmux
        .wait_for(first, &["detached: session", "keeps running in cwcoded"])
        .await;
    assert!(screen.contains(&session), "{screen}");
    let listed = home.cli_ok(&["ls"]);
    assert!(listed.contains(&session[..12]), "{listed}");

    // A second window reattaches through the picker and sees the whole transcript.
    let second = tmux.new_window(&home, &home.workspace);
    tmux.type_line(&second, cwcode);
    tmux.wait_for(&second, &["Pick a session", &session[..12]])
        .await;
    tmux.keys(&second, &["Enter"]);
    let screen = tmux
        .wait_for(
            &second,
            &[
                "› say hello",
                "Hello from the fake model.",
                "› change the greeting",
                "● edit_lines main.rs +1 -1",
                "I changed the greeting.",
                "mode is now yolo",
                "mode is now plan",
                " PLAN ",
            ],
        )
        .await;
    assert!(
        !screen.contains("waiting for your approval"),
        "the answered approval is not asked again: {screen}"
    );

    // Two terminals on one session see the same live stream.
    tmux.type_line(first, &format!("{cwcode} --continue"));
    tmux.wait_for(first, &["I changed the greeting.", " PLAN "])
        .await;
    tmux.type_text(&second, "are you there?");
    tmux.keys(&second, &["Enter"]);
    tmux.wait_for(&second, &["Both windows see this."]).await;
    tmux.wait_for(first, &["› are you there?", "Both windows see this."])
        .await;

    // Closing one changes nothing for the other.
    tmux.keys(first, &["C-c", "C-c"]);
    tmux.wait_for(first, &["detached: session"]).await;
    tmux.type_text(&second, "and now?");
    tmux.keys(&second, &["Enter"]);
    let screen = tmux
        .wait_for(
            &second,
            &["Still here after the other left.", "✓ turn 4 completed"],
        )
        .await;
    assert!(status_line(&screen).contains("● connected"), "{screen}");

    // Rewind: the picker lists the prompts newest first; going back before prompt 2 puts
    // main.rs back and returns that prompt to the input.
    tmux.type_line(&second, "/rewind");
    tmux.wait_for(&second, &["Rewind to before which prompt?", "›   4  "])
        .await;
    tmux.keys(&second, &["Down", "Down"]);
    tmux.wait_for(&second, &["›   2  "]).await;
    tmux.keys(&second, &["Enter"]);
    let screen = tmux
        .wait_for(
            &second,
            &[
                "rewound to before prompt 2: restored main.rs",
                "is back in the input",
            ],
        )
        .await;
    assert_eq!(
        input_line(&screen),
        "› change the greeting",
        "the prompt is back in the input: {screen}"
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        ORIGINAL
    );
    // And undone: the edit is back on disk.
    tmux.keys(&second, &["C-c"]);
    tmux.type_line(&second, "/rewind undo");
    tmux.wait_for(&second, &["undid the rewind to before prompt 2"])
        .await;
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("main.rs")).unwrap(),
        EDITED
    );
}

/// The input: the row above the status line.
fn input_line(screen: &str) -> &str {
    let lines: Vec<&str> = screen.trim_end().lines().collect();
    lines
        .len()
        .checked_sub(2)
        .map_or("", |index| lines[index].trim_end())
}
