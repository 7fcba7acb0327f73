//! New sessions: created with their first prompt and titled from it, so quitting before that
//! leaves nothing behind.

use std::time::Instant;

use crossterm::event::KeyCode;
use cwcode_protocol::{Mode, ProfileInfo};

use super::tests::{ctrl, press, run_command, type_text};
use super::{App, Exit, Startup, title_from};
use crate::daemon::{Action, Open, Reply, Request};
use crate::fixtures::{CWD, session};

fn new_app(now: Instant) -> App {
    let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![ProfileInfo {
            name: "deepseek".to_owned(),
            base_url: "https://api.deepseek.com".to_owned(),
            model: "deepseek-chat".to_owned(),
            has_key: true,
            is_default: true,
            context_window: None,
            prices: None,
            key_env: None,
        }]),
        now,
    );
    app.outbox.clear();
    app
}

fn creations(app: &App) -> Vec<(Option<String>, Option<Mode>, String)> {
    app.outbox
        .iter()
        .filter_map(|request| match request {
            Request::Open(Open::New { params, prompt }) => {
                Some((params.title.clone(), params.mode, prompt.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_first_prompt_creates_the_session_titled_from_its_first_line() {
    let now = Instant::now();
    let mut app = new_app(now);
    assert!(app.is_draft());
    assert_eq!(
        app.session.as_ref().map(|s| s.profile.as_str()),
        Some("deepseek"),
        "the status line shows the profile the session will get"
    );
    // Shift+Tab before the first prompt sets the mode the session is created in.
    press(&mut app, KeyCode::BackTab, now);
    assert_eq!(app.intended_mode(), Mode::Plan);
    assert!(app.outbox.is_empty(), "{:?}", app.outbox);

    type_text(&mut app, "fix the coupon rounding", now);
    app.editor.newline();
    type_text(&mut app, "and add a test", now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(
        creations(&app),
        [(
            Some("fix the coupon rounding".to_owned()),
            Some(Mode::Plan),
            "fix the coupon rounding\nand add a test".to_owned()
        )]
    );
    assert!(app.editor.is_empty());

    app.on_reply(
        Reply::Attached(session("0198a1b2c3d4e5f6", CWD, "fix the coupon rounding")),
        now,
    );
    assert!(!app.is_draft());
    app.outbox.clear();
    type_text(&mut app, "thanks", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(
        matches!(app.outbox.as_slice(), [Request::Send { session_id, text, .. }]
            if session_id == "0198a1b2c3d4e5f6" && text == "thanks"),
        "{:?}",
        app.outbox
    );
}

#[test]
fn leaving_before_the_first_prompt_creates_nothing() {
    let now = Instant::now();
    let mut app = new_app(now);
    run_command(&mut app, "/mode yolo", now);
    assert_eq!(app.intended_mode(), Mode::Yolo);
    ctrl(&mut app, 'c', now);
    ctrl(&mut app, 'c', now);
    assert_eq!(app.exit, Some(Exit::Quit));
    assert!(app.outbox.is_empty(), "{:?}", app.outbox);

    let mut app = new_app(now);
    run_command(&mut app, "/detach", now);
    assert_eq!(app.exit, Some(Exit::Quit));
}

#[test]
fn a_failed_creation_gives_the_prompt_back() {
    let now = Instant::now();
    let mut app = new_app(now);
    type_text(&mut app, "hello", now);
    press(&mut app, KeyCode::Enter, now);
    app.on_reply(
        Reply::Failed {
            action: Action::Open,
            message: "the workspace /gone does not exist".to_owned(),
            code: None,
        },
        now,
    );
    assert!(app.is_draft());
    assert_eq!(app.editor.text(), "hello");
    app.outbox.clear();
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(creations(&app).len(), 1, "it can be sent again");
}

#[test]
fn titles_are_the_first_line_shortened() {
    assert_eq!(title_from("  fix it\nplease "), "fix it");
    let long = "a".repeat(80);
    assert_eq!(title_from(&long), format!("{}…", "a".repeat(60)));
    assert_eq!(title_from("é".repeat(61).as_str()).chars().count(), 61);
}

#[test]
fn a_preview_is_the_last_answer_or_before_one_the_last_prompt() {
    use crate::daemon::preview_of;
    use cwcode_protocol::{Event, EventKind};
    let event = |kind| Event {
        seq: 1,
        time: String::new(),
        parent_call_id: None,
        kind,
    };
    let answer = |content: &str| {
        event(EventKind::AssistantMessage {
            content: content.to_owned(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: None,
        })
    };
    let started = event(EventKind::TurnStarted {
        turn: 1,
        prompt: "fix the cart\nplease".to_owned(),
    });
    assert_eq!(
        preview_of(std::slice::from_ref(&started)).as_deref(),
        Some("› fix the cart")
    );
    let events = [
        started,
        answer("Rounded per line now.\n\nDetails…"),
        answer(""),
    ];
    assert_eq!(
        preview_of(&events).as_deref(),
        Some("Rounded per line now."),
        "an answer with only tool calls is skipped"
    );
    assert_eq!(preview_of(&[]), None);
}

#[test]
fn init_sends_the_prompt_that_drafts_agents_md() {
    let now = Instant::now();
    let mut app = crate::fixtures::attached_app(now);
    run_command(&mut app, "/init we use pnpm, not npm", now);
    let [Request::Send { text, .. }] = app.outbox.as_slice() else {
        panic!("{:?}", app.outbox);
    };
    assert!(
        text.starts_with("Draft an AGENTS.md for this workspace"),
        "{text}"
    );
    assert!(text.contains("build, test"), "{text}");
    assert!(
        text.ends_with("Also, from the user: we use pnpm, not npm"),
        "{text}"
    );
    assert!(app.editor.is_empty());

    // Before the first prompt it creates the session, like any prompt.
    let mut app = new_app(now);
    run_command(&mut app, "/init", now);
    let created = creations(&app);
    assert_eq!(created.len(), 1, "{:?}", app.outbox);
    assert_eq!(
        created[0].0.as_deref(),
        Some("Draft an AGENTS.md for this workspace, for coding agents tha…")
    );
}

#[test]
fn a_bang_command_runs_here_and_its_output_goes_with_the_next_prompt() {
    use crate::shell::ShellRun;
    let now = Instant::now();
    let mut app = crate::fixtures::attached_app(now);
    type_text(&mut app, "!cargo test", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(
        matches!(app.outbox.as_slice(), [Request::Shell { command, cwd }]
            if command == "cargo test" && cwd == CWD),
        "{:?}",
        app.outbox
    );
    app.outbox.clear();
    app.on_reply(
        Reply::Shell(ShellRun {
            command: "cargo test".to_owned(),
            output: "test result: FAILED. 1 failed\n".to_owned(),
            outcome: "exit 101".to_owned(),
        }),
        now,
    );
    assert!(super::tests::transcript_text(&mut app).contains("test result: FAILED. 1 failed"));
    assert!(app.outbox.is_empty(), "nothing goes to the model by itself");

    type_text(&mut app, "fix it", now);
    press(&mut app, KeyCode::Enter, now);
    let [
        Request::Send {
            text, workspace, ..
        },
    ] = app.outbox.as_slice()
    else {
        panic!("{:?}", app.outbox);
    };
    assert_eq!(
        text,
        "I ran `cargo test` in the workspace (exit 101):\n```\ntest result: FAILED. 1 failed\n```\n\nfix it"
    );
    assert_eq!(workspace, CWD);
    app.outbox.clear();
    type_text(&mut app, "and again", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(
        matches!(app.outbox.as_slice(), [Request::Send { text, .. }] if text == "and again"),
        "the output went once: {:?}",
        app.outbox
    );
}

#[test]
fn at_completes_a_workspace_file_and_tab_or_enter_takes_it() {
    let now = Instant::now();
    let mut app = crate::fixtures::attached_app(now);
    app.files = vec!["src/cart.rs".to_owned(), "src/main.rs".to_owned()];
    type_text(&mut app, "why is @car", now);
    let shown: Vec<String> = app.completions().into_iter().map(|c| c.label).collect();
    assert_eq!(shown, ["@src/cart.rs"]);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(app.editor.text(), "why is @src/cart.rs ");
    assert!(
        app.outbox.is_empty(),
        "Enter took the file, it did not send"
    );
    assert!(app.completions().is_empty());
}
