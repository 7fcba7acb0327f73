//! The details a daily user notices: leaving at any time, hints that go when they stop being
//! true.

use std::time::Instant;

use crossterm::event::KeyCode;
use cwcode_protocol::{EventKind, SessionStatus, TurnOutcome, Usage};

use super::Exit;
use super::tests::{
    approval_requested, ctrl, press, rewind_result, run_command, transcript_text, type_text,
};
use crate::daemon::{Reply, Request};
use crate::fixtures::{attached_app, checkpoint, custom_commands, feed};

#[test]
fn ctrl_d_detaches_while_an_approval_waits_but_not_over_a_half_typed_reason() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(&mut app, now, [approval_requested("r1")]);
    assert!(app.approval().is_some());
    ctrl(&mut app, 'd', now);
    assert!(
        matches!(app.exit, Some(Exit::Detached(_))),
        "{:?}",
        app.exit
    );
    // Nothing was answered: the approval waits in the daemon for the next client.
    assert!(app.outbox.is_empty(), "{:?}", app.outbox);

    let mut app = attached_app(now);
    feed(&mut app, now, [approval_requested("r1")]);
    press(&mut app, KeyCode::Char('n'), now);
    type_text(&mut app, "not th", now);
    ctrl(&mut app, 'd', now);
    assert!(app.exit.is_none());
    // And the rewind picker, which also hides the input.
    let mut app = attached_app(now);
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
    ctrl(&mut app, 'd', now);
    assert!(matches!(app.exit, Some(Exit::Detached(_))));
}

fn running(app: &mut super::App, now: Instant) {
    feed(
        app,
        now,
        [EventKind::StatusChanged {
            status: SessionStatus::Running,
        }],
    );
}

#[test]
fn the_cancelling_hint_goes_when_the_turn_ends() {
    let now = Instant::now();
    let mut app = attached_app(now);
    running(&mut app, now);
    press(&mut app, KeyCode::Esc, now);
    assert!(matches!(app.outbox[..], [Request::Cancel { .. }]));
    app.on_reply(Reply::Cancelled(true), now);
    assert_eq!(app.flash.as_deref(), Some("cancelling the turn…"));
    feed(
        &mut app,
        now,
        [
            EventKind::TurnFinished {
                turn: 1,
                outcome: TurnOutcome::Cancelled,
                usage: Usage::default(),
                error: None,
            },
            EventKind::StatusChanged {
                status: SessionStatus::Idle,
            },
        ],
    );
    assert_eq!(app.flash, None);
    // An answer to the cancel that arrives after the end brings no hint back.
    app.on_reply(Reply::Cancelled(true), now);
    assert_eq!(app.flash, None);
}

#[test]
fn another_hint_is_not_taken_by_the_end_of_the_turn() {
    let now = Instant::now();
    let mut app = attached_app(now);
    running(&mut app, now);
    press(&mut app, KeyCode::Esc, now);
    // An answer with its own hint replaced the cancel's before the turn ended.
    app.on_reply(Reply::RewindUndone(rewind_result(1, "a")), now);
    feed(
        &mut app,
        now,
        [EventKind::StatusChanged {
            status: SessionStatus::Idle,
        }],
    );
    assert_eq!(
        app.flash.as_deref(),
        Some("rewind to before prompt 1 undone")
    );
}

#[test]
fn the_not_connected_hint_goes_on_reconnecting() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Lost("connection reset".to_owned()), now);
    type_text(&mut app, "hello", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .contains("not connected")
    );
    app.on_reply(Reply::Reconnected { restarted: false }, now);
    assert_eq!(app.flash, None);
    assert_eq!(app.editor.text(), "hello");
}

#[test]
fn a_daemon_this_window_restarted_is_said_so() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(
        Reply::Lost("the connection to cwcoded closed".to_owned()),
        now,
    );
    app.on_reply(Reply::Reconnected { restarted: true }, now);
    let text = transcript_text(&mut app);
    assert!(
        text.contains("cwcoded had stopped unexpectedly: this window started it again"),
        "{text}"
    );
    assert!(text.contains("reconnected to cwcoded"), "{text}");
}

fn sent(app: &super::App) -> Vec<String> {
    app.outbox
        .iter()
        .filter_map(|request| match request {
            Request::Send { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_custom_command_sends_its_file_with_the_arguments_in_place() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.custom = custom_commands();
    run_command(&mut app, "/review src/cart.rs", now);
    assert_eq!(
        sent(&app),
        ["Review src/cart.rs for bugs and missing tests."]
    );
    // The history keeps what was typed, to be run again with other arguments.
    press(&mut app, KeyCode::Up, now);
    assert_eq!(app.editor.text(), "/review src/cart.rs");
    app.editor.take();
    app.outbox.clear();
    // Completed from its first letters: one taking arguments waits for them, one without runs.
    type_text(&mut app, "/rel", now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(sent(&app), ["Draft release notes from git log."]);
    app.outbox.clear();
    type_text(&mut app, "/rev", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(app.outbox.is_empty(), "{:?}", app.outbox);
    assert_eq!(app.editor.text(), "/review ");
}

#[test]
fn help_lists_the_custom_commands_and_what_was_skipped() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.custom = custom_commands();
    app.custom.skipped.push(
        "/work/.cwcode/commands/help.md: /help is a built-in command; rename the file".to_owned(),
    );
    run_command(&mut app, "/help", now);
    let text = transcript_text(&mut app);
    assert!(
        text.contains("Custom commands (.cwcode/commands/NAME.md here"),
        "{text}"
    );
    assert!(
        text.contains(
            "/review ARGS         Review $ARGUMENTS for bugs and missing tests. (workspace)"
        ),
        "{text}"
    );
    assert!(
        text.contains("/release-notes       draft release notes from the log (user)"),
        "{text}"
    );
    assert!(
        text.contains("skipped /work/.cwcode/commands/help.md"),
        "{text}"
    );
}
