//! What keys and daemon replies do to the interface, as a user would see it.

use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers, MouseEventKind};
use cwcode_protocol::{
    ApprovalDecision, ApprovalRespondParams, ErrorCode, Event, EventKind, Mode, ProfileInfo,
    RewindResult, SessionInfo, SessionStatus, TurnOutcome, Usage,
};

use super::{App, Exit, Phase, Startup};
use crate::daemon::{Action, Open, Reply, Request};
use crate::fixtures::{CWD, attached_app, feed, session};

pub(super) fn press(app: &mut App, code: KeyCode, now: Instant) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), now);
}

pub(super) fn ctrl(app: &mut App, c: char, now: Instant) {
    app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL), now);
}

pub(super) fn type_text(app: &mut App, text: &str, now: Instant) {
    text.chars().for_each(|c| press(app, KeyCode::Char(c), now));
}

pub(super) fn approval_requested(request_id: &str) -> EventKind {
    EventKind::ApprovalRequested {
        request_id: request_id.to_owned(),
        call_id: format!("call-{request_id}"),
        tool: "bash".to_owned(),
        arguments: r#"{"command":"rm -rf target"}"#.to_owned(),
        suggested_pattern: Some("rm *".to_owned()),
    }
}

/// The approval answer the app queued last.
fn sent_answer(app: &mut App) -> ApprovalRespondParams {
    match app.outbox.pop() {
        Some(Request::Respond(params)) => params,
        other => panic!("expected an approval answer, got {other:?}"),
    }
}

/// The transcript as text, a row a line.
pub(super) fn transcript_text(app: &mut App) -> String {
    let rows = app.transcript.layout(200, false);
    let lines: Vec<String> = app
        .transcript
        .rows(0, rows)
        .iter()
        .map(|line| line.to_string())
        .collect();
    lines.join("\n")
}

pub(super) fn run_command(app: &mut App, command: &str, now: Instant) {
    type_text(app, command, now);
    press(app, KeyCode::Enter, now);
}

pub(super) fn rewind_result(turn: u32, prompt: &str) -> RewindResult {
    RewindResult {
        turn,
        prompt: prompt.to_owned(),
        restored: vec!["main.rs".to_owned()],
        removed: Vec::new(),
        failed: Vec::new(),
    }
}

fn started_app(startup: Startup, sessions: Vec<SessionInfo>, now: Instant) -> App {
    let mut app = App::new(CWD.to_owned(), startup, None, None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(Reply::Sessions(sessions), now);
    app
}

/// The sessions asked for; a new one is a draft until its first prompt.
fn opened(app: &App) -> Vec<String> {
    let mut opened: Vec<String> = app
        .outbox
        .iter()
        .filter_map(|request| match request {
            Request::Open(Open::Existing(id)) => Some(id.clone()),
            Request::Open(Open::New { params, .. }) => Some(format!("created in {}", params.cwd)),
            _ => None,
        })
        .collect();
    if app.is_draft() {
        opened.push(format!("new in {}", app.cwd));
    }
    opened
}

#[test]
fn without_flags_the_picker_opens_only_when_this_directory_has_sessions() {
    let now = Instant::now();
    let app = started_app(
        Startup::Choose,
        vec![session("elsewhere", "/other", "")],
        now,
    );
    assert_eq!(opened(&app), [format!("new in {CWD}")]);
    assert!(app.picker.is_none());

    let mut app = started_app(Startup::Choose, vec![session("mine", CWD, "")], now);
    assert_eq!(app.phase, Phase::Picking);
    assert!(opened(&app).is_empty());
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(opened(&app), ["mine"]);
}

#[test]
fn an_unknown_id_typed_in_the_picker_is_reported_there() {
    let now = Instant::now();
    let mut app = started_app(Startup::Choose, vec![session("mine", CWD, "")], now);
    type_text(&mut app, "zzz", now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(opened(&app), ["zzz"]);
    app.on_reply(
        Reply::Failed {
            action: Action::Open,
            message: "no session matches `zzz`".to_owned(),
            code: Some(ErrorCode::SessionNotFound.code()),
        },
        now,
    );
    assert!(app.exit.is_none());
    let error = app.picker.as_ref().and_then(|picker| picker.error.clone());
    assert_eq!(error.as_deref(), Some("no session matches `zzz`"));
}

#[test]
fn continue_opens_the_latest_session_here_or_says_how_to_start_one() {
    let now = Instant::now();
    let sessions = vec![
        session("other", "/other", ""),
        session("latest", CWD, ""),
        session("older", CWD, ""),
    ];
    let app = started_app(Startup::Continue, sessions, now);
    assert_eq!(opened(&app), ["latest"]);
    let app = started_app(Startup::Continue, Vec::new(), now);
    let Some(Exit::Failed(message)) = &app.exit else {
        panic!("expected a failure, got {:?}", app.exit);
    };
    assert!(
        message.contains("no session has /home/dev/shop"),
        "{message}"
    );
}

#[test]
fn a_session_that_cannot_be_opened_ends_the_program_with_the_reason() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), Startup::Session("nope".into()), None, None);
    app.on_reply(Reply::Connected, now);
    assert_eq!(opened(&app), ["nope"]);
    app.on_reply(
        Reply::Failed {
            action: Action::Open,
            message: "no session matches `nope`".to_owned(),
            code: Some(ErrorCode::SessionNotFound.code()),
        },
        now,
    );
    assert_eq!(
        app.exit,
        Some(Exit::Failed("no session matches `nope`".to_owned()))
    );
}

#[test]
fn enter_sends_the_prompt_and_alt_enter_adds_a_line() {
    let now = Instant::now();
    let mut app = attached_app(now);
    type_text(&mut app, "fix", now);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), now);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT), now);
    type_text(&mut app, "the tests", now);
    press(&mut app, KeyCode::Enter, now);
    let [Request::Send { text, .. }] = &app.outbox[..] else {
        panic!("expected one send: {:?}", app.outbox);
    };
    assert_eq!(text, "fix\n\nthe tests");
    assert!(app.editor.is_empty());
    // Up brings it back.
    press(&mut app, KeyCode::Up, now);
    assert_eq!(app.editor.text(), "fix\n\nthe tests");
}

#[test]
fn a_prompt_typed_while_the_daemon_is_away_is_kept() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Lost("connection reset".to_owned()), now);
    type_text(&mut app, "hello", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(app.outbox.is_empty());
    assert_eq!(app.editor.text(), "hello");
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .contains("not connected")
    );
    app.on_reply(Reply::Reconnected { restarted: false }, now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(app.outbox.len(), 1);
}

#[test]
fn shift_tab_asks_for_the_next_mode() {
    let now = Instant::now();
    let mut app = attached_app(now);
    press(&mut app, KeyCode::BackTab, now);
    assert!(matches!(
        app.outbox[..],
        [Request::SetMode {
            mode: Mode::Plan,
            ..
        }]
    ));
    // The daemon's event, seen by every attached client, is what changes the mode.
    feed(&mut app, now, [EventKind::ModeChanged { mode: Mode::Plan }]);
    assert_eq!(app.mode(), Mode::Plan);
}

fn mode_info(mode: Mode) -> SessionInfo {
    let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
    info.mode = mode;
    info
}

fn requested_modes(app: &App) -> Vec<Mode> {
    app.outbox
        .iter()
        .filter_map(|request| match request {
            Request::SetMode { mode, .. } => Some(*mode),
            _ => None,
        })
        .collect()
}

#[test]
fn shift_tab_toggles_plan_and_code_and_two_quick_presses_move_two_steps() {
    let now = Instant::now();
    let mut app = attached_app(now);
    // Both presses land before the daemon has confirmed the first.
    press(&mut app, KeyCode::BackTab, now);
    press(&mut app, KeyCode::BackTab, now);
    press(&mut app, KeyCode::BackTab, now);
    assert_eq!(requested_modes(&app), [Mode::Plan, Mode::Code, Mode::Plan]);
    assert_eq!(app.intended_mode(), Mode::Plan);
    // The answers to the first two (and their events) do not take the user's last choice back.
    for mode in [Mode::Plan, Mode::Code] {
        app.on_reply(Reply::ModeSet(mode_info(mode)), now);
        feed(&mut app, now, [EventKind::ModeChanged { mode }]);
    }
    assert_eq!(app.mode(), Mode::Code);
    assert_eq!(app.intended_mode(), Mode::Plan);
    app.on_reply(Reply::ModeSet(mode_info(Mode::Plan)), now);
    feed(&mut app, now, [EventKind::ModeChanged { mode: Mode::Plan }]);
    assert_eq!((app.mode(), app.intended_mode()), (Mode::Plan, Mode::Plan));
    app.outbox.clear();
    // Nothing but its name reaches yolo; from there the key goes to plan.
    for _ in 0..4 {
        press(&mut app, KeyCode::BackTab, now);
    }
    assert!(!requested_modes(&app).contains(&Mode::Yolo));
    for _ in 0..4 {
        app.on_reply(Reply::ModeSet(mode_info(Mode::Plan)), now);
    }
    app.outbox.clear();
    run_command(&mut app, "/mode yolo", now);
    assert_eq!(requested_modes(&app), [Mode::Yolo]);
    assert_eq!(app.intended_mode(), Mode::Yolo);
    app.on_reply(Reply::ModeSet(mode_info(Mode::Yolo)), now);
    app.outbox.clear();
    press(&mut app, KeyCode::BackTab, now);
    assert_eq!(requested_modes(&app), [Mode::Plan]);
}

#[test]
fn a_refused_mode_change_is_said_and_the_next_press_starts_from_the_sessions_mode() {
    let now = Instant::now();
    let mut app = attached_app(now);
    press(&mut app, KeyCode::BackTab, now);
    app.on_reply(
        Reply::Failed {
            action: Action::SetMode,
            message: "the session is gone".to_owned(),
            code: None,
        },
        now,
    );
    assert_eq!(app.intended_mode(), Mode::Code);
    assert!(transcript_text(&mut app).contains("the session is gone"));
    app.outbox.clear();
    press(&mut app, KeyCode::BackTab, now);
    assert_eq!(requested_modes(&app), [Mode::Plan]);
}

#[test]
fn esc_cancels_a_running_turn_only() {
    let now = Instant::now();
    let mut app = attached_app(now);
    press(&mut app, KeyCode::Esc, now);
    assert!(app.outbox.is_empty());
    feed(
        &mut app,
        now,
        [EventKind::StatusChanged {
            status: SessionStatus::Running,
        }],
    );
    press(&mut app, KeyCode::Esc, now);
    assert!(matches!(app.outbox[..], [Request::Cancel { .. }]));
}

#[test]
fn approvals_are_answered_with_y_a_or_n_and_a_reason() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [approval_requested("r1"), approval_requested("r2")],
    );
    // Typing is not an answer: nothing is approved by accident.
    press(&mut app, KeyCode::Char('x'), now);
    assert!(app.outbox.is_empty());
    assert!(app.flash.is_some());
    press(&mut app, KeyCode::Char('y'), now);
    let params = sent_answer(&mut app);
    assert_eq!(
        (params.request_id.as_str(), params.decision),
        ("r1", ApprovalDecision::Approve)
    );
    // Answered once: more keys wait for the daemon's word.
    press(&mut app, KeyCode::Char('y'), now);
    assert!(app.outbox.is_empty());
    feed(
        &mut app,
        now,
        [EventKind::ApprovalResolved {
            request_id: "r1".to_owned(),
            decision: ApprovalDecision::Approve,
            reason: None,
            pattern: None,
        }],
    );
    assert_eq!(app.approval().map(|p| p.request_id.as_str()), Some("r2"));
    press(&mut app, KeyCode::Char('n'), now);
    type_text(&mut app, "not target", now);
    press(&mut app, KeyCode::Enter, now);
    let params = sent_answer(&mut app);
    assert_eq!(params.decision, ApprovalDecision::Deny);
    assert_eq!(params.reason.as_deref(), Some("not target"));
}

#[test]
fn a_offers_always_for_the_pattern_and_shift_a_for_the_whole_tool() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [approval_requested("r1"), approval_requested("r2")],
    );
    press(&mut app, KeyCode::Char('a'), now);
    let params = sent_answer(&mut app);
    assert_eq!(params.decision, ApprovalDecision::Always);
    assert_eq!(params.pattern.as_deref(), Some("rm *"));
    feed(
        &mut app,
        now,
        [EventKind::ApprovalResolved {
            request_id: "r1".to_owned(),
            decision: ApprovalDecision::Always,
            reason: None,
            pattern: Some("rm *".to_owned()),
        }],
    );
    assert!(transcript_text(&mut app).contains("`rm *` no longer asks"));
    press(&mut app, KeyCode::Char('A'), now);
    let params = sent_answer(&mut app);
    assert_eq!(
        (params.request_id.as_str(), params.decision, params.pattern),
        ("r2", ApprovalDecision::Always, None)
    );
}

#[test]
fn an_approval_answered_elsewhere_is_no_longer_asked() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(&mut app, now, [approval_requested("r1")]);
    press(&mut app, KeyCode::Char('a'), now);
    app.on_reply(
        Reply::Failed {
            action: Action::Respond {
                request_id: "r1".to_owned(),
            },
            message: "no pending approval r1".to_owned(),
            code: Some(ErrorCode::ApprovalNotFound.code()),
        },
        now,
    );
    assert!(app.approval().is_none());
}

#[test]
fn approvals_in_the_replay_are_asked_only_once_it_is_over() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
    info.last_seq = 2;
    app.on_reply(Reply::Attached(info), now);
    let event = |seq, kind| {
        Reply::Event(Event {
            seq,
            time: String::new(),
            parent_call_id: None,
            kind,
        })
    };
    app.on_reply(event(1, approval_requested("r1")), now);
    assert!(app.approval().is_none());
    app.on_reply(
        event(
            2,
            EventKind::StatusChanged {
                status: SessionStatus::AwaitingApproval,
            },
        ),
        now,
    );
    assert_eq!(app.approval().map(|p| p.request_id.as_str()), Some("r1"));
}

#[test]
fn a_finished_turn_withdraws_its_approvals_and_counts_the_cache() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [
            approval_requested("r1"),
            EventKind::TurnFinished {
                turn: 1,
                outcome: TurnOutcome::Cancelled,
                usage: Usage {
                    prompt_tokens: 1000,
                    completion_tokens: 10,
                    cached_tokens: 250,
                },
                error: None,
            },
            EventKind::TurnFinished {
                turn: 2,
                outcome: TurnOutcome::Completed,
                usage: Usage {
                    prompt_tokens: 1000,
                    completion_tokens: 10,
                    cached_tokens: 750,
                },
                error: None,
            },
        ],
    );
    assert!(app.approval().is_none());
    assert_eq!((app.cached_tokens, app.prompt_tokens), (1000, 2000));
}

#[test]
fn ctrl_c_clears_the_input_then_quits_when_pressed_twice() {
    let start = Instant::now();
    let mut app = attached_app(start);
    type_text(&mut app, "draft", start);
    ctrl(&mut app, 'c', start);
    assert!(app.editor.is_empty());
    assert!(app.exit.is_none());
    ctrl(&mut app, 'c', start);
    assert!(app.exit.is_none());
    // Too slow: it only warns again.
    ctrl(&mut app, 'c', start + Duration::from_secs(3));
    assert!(app.exit.is_none());
    ctrl(&mut app, 'c', start + Duration::from_secs(4));
    assert!(matches!(app.exit, Some(Exit::Detached(_))));
}

#[test]
fn sessions_opens_the_picker_and_choosing_another_attaches_to_it() {
    let now = Instant::now();
    let mut app = attached_app(now);
    type_text(&mut app, "/sessions", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(matches!(app.outbox[..], [Request::ListSessions]));
    app.outbox.clear();
    app.on_reply(
        Reply::Sessions(vec![
            session("0198a1b2c3d4e5f6", CWD, "shop"),
            session("0198ffff", CWD, "other"),
        ]),
        now,
    );
    assert!(app.picker.is_some());
    press(&mut app, KeyCode::Down, now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(opened(&app), ["0198ffff"]);
    app.on_reply(Reply::Attached(session("0198ffff", CWD, "other")), now);
    assert!(app.picker.is_none());
    assert_eq!(
        app.session.as_ref().map(|s| s.id.as_str()),
        Some("0198ffff")
    );
}

#[test]
fn model_lists_profiles_and_says_how_to_switch() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/model", now);
    let text = transcript_text(&mut app);
    assert!(
        text.contains("* deepseek — deepseek-chat at https://api.deepseek.com"),
        "{text}"
    );
    assert!(text.contains("/model NAME switches"), "{text}");
    assert!(!text.contains("cannot switch"), "{text}");
}

/// The fixture's session, which also knows a second profile, `local`.
fn app_with_two_profiles(now: Instant) -> App {
    let mut app = attached_app(now);
    let mut profiles = app.profiles.clone();
    profiles.push(ProfileInfo {
        key_env: None,
        name: "local".to_owned(),
        base_url: "http://localhost:11434/v1".to_owned(),
        model: "qwen3-coder".to_owned(),
        has_key: true,
        is_default: false,
        context_window: None,
        prices: None,
    });
    app.on_reply(Reply::Profiles(profiles), now);
    app
}

#[test]
fn model_name_switches_the_profile() {
    let now = Instant::now();
    let mut app = app_with_two_profiles(now);
    run_command(&mut app, "/model local", now);
    let [
        Request::SetProfile {
            session_id,
            profile,
        },
    ] = &app.outbox[..]
    else {
        panic!("expected one setProfile: {:?}", app.outbox);
    };
    assert_eq!(session_id, "0198a1b2c3d4e5f6");
    assert_eq!(profile, "local");
    app.outbox.clear();

    let mut info = app.session.clone().unwrap();
    info.profile = "local".to_owned();
    app.on_reply(Reply::ProfileSet(info), now);
    assert_eq!(app.session.as_ref().unwrap().profile, "local");
    assert_eq!(app.profile().unwrap().model, "qwen3-coder");
    // The journalled event says it, once.
    feed(
        &mut app,
        now,
        [EventKind::ProfileChanged {
            profile: "local".to_owned(),
        }],
    );
    let text = transcript_text(&mut app);
    assert_eq!(text.matches("profile is now local").count(), 1, "{text}");
    assert!(
        text.contains("profile is now local (qwen3-coder)"),
        "{text}"
    );

    // The same profile again asks nothing.
    run_command(&mut app, "/profile local", now);
    assert!(app.outbox.is_empty());
    assert!(transcript_text(&mut app).contains("already on profile local"));
}

#[test]
fn a_refused_switch_shows_the_daemons_message() {
    let now = Instant::now();
    let mut app = app_with_two_profiles(now);
    run_command(&mut app, "/model nope", now);
    app.on_reply(
        Reply::Failed {
            action: Action::SetProfile,
            message: "unknown profile `nope`: config.json has deepseek, local".to_owned(),
            code: None,
        },
        now,
    );
    assert_eq!(app.session.as_ref().unwrap().profile, "deepseek");
    let text = transcript_text(&mut app);
    assert!(text.contains("unknown profile `nope`"), "{text}");
}

#[test]
fn another_clients_switch_updates_the_session() {
    let now = Instant::now();
    let mut app = app_with_two_profiles(now);
    feed(
        &mut app,
        now,
        [EventKind::ProfileChanged {
            profile: "local".to_owned(),
        }],
    );
    assert_eq!(app.session.as_ref().unwrap().profile, "local");
    assert_eq!(app.profile().unwrap().model, "qwen3-coder");
    assert!(transcript_text(&mut app).contains("profile is now local (qwen3-coder)"));
}

#[test]
fn paging_up_stops_following_and_paging_back_down_resumes() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.last_rows = 100;
    app.last_height = 20;
    press(&mut app, KeyCode::PageUp, now);
    assert_eq!(app.scroll, Some(62));
    press(&mut app, KeyCode::PageDown, now);
    assert_eq!(app.scroll, None);
    app.on_terminal(
        TermEvent::Mouse(crossterm::event::MouseEvent {
            kind: MouseEventKind::ScrollUp,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        }),
        now,
    );
    assert_eq!(app.scroll, Some(77));
    // Sending a prompt jumps back to the bottom.
    type_text(&mut app, "go", now);
    press(&mut app, KeyCode::Enter, now);
    assert_eq!(app.scroll, None);
}

#[test]
fn pasted_text_keeps_its_newlines_and_is_not_sent() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_terminal(TermEvent::Paste("line one\nline two".to_owned()), now);
    assert_eq!(app.editor.text(), "line one\nline two");
    assert!(app.outbox.is_empty());
}

#[test]
fn tab_completes_a_command_and_enter_runs_it() {
    let now = Instant::now();
    let mut app = attached_app(now);
    type_text(&mut app, "/mo", now);
    press(&mut app, KeyCode::Tab, now);
    assert_eq!(app.editor.text(), "/mode ");
    type_text(&mut app, "p", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(matches!(
        app.outbox[..],
        [Request::SetMode {
            mode: Mode::Plan,
            ..
        }]
    ));
    app.outbox.clear();
    type_text(&mut app, "/det", now);
    press(&mut app, KeyCode::Enter, now);
    assert!(matches!(app.exit, Some(Exit::Detached(_))));
}
