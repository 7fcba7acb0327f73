//! Slash commands: what they ask the daemon and what the answers show.

use std::time::Instant;

use crossterm::event::{Event as TermEvent, KeyCode};
use cwcode_protocol::{
    CacheReport, CostReport, ErrorCode, EventKind, GoalItem, GoalStatus, TodoItem, TodoStatus,
    TurnCache,
};

use super::tests::{
    approval_requested, ctrl, press, rewind_result, run_command, transcript_text, type_text,
};
use crate::daemon::{Action, GoalCall, Reply, Request};
use crate::fixtures::{CWD, attached_app, checkpoint, feed, session};

#[test]
fn rewind_picks_a_checkpoint_and_its_prompt_comes_back_to_the_input() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/rewind", now);
    assert!(matches!(app.outbox[..], [Request::Checkpoints { .. }]));
    app.outbox.clear();
    app.on_reply(
        Reply::Checkpoints(vec![
            checkpoint(1, "say hello", &[]),
            checkpoint(2, "change the greeting\nand the name", &["main.rs"]),
            checkpoint(3, "add a test", &["tests/a.rs"]),
        ]),
        now,
    );
    // Newest first: one Down is prompt 2.
    press(&mut app, KeyCode::Down, now);
    press(&mut app, KeyCode::Enter, now);
    let [Request::Rewind { turn: 2, .. }] = app.outbox[..] else {
        panic!("expected a rewind to before prompt 2: {:?}", app.outbox);
    };
    app.outbox.clear();
    // Waiting for the daemon: Enter again asks nothing more.
    press(&mut app, KeyCode::Enter, now);
    assert!(app.outbox.is_empty());
    app.on_reply(
        Reply::Rewound(rewind_result(2, "change the greeting\nand the name")),
        now,
    );
    assert!(app.rewind.is_none());
    assert_eq!(app.editor.text(), "change the greeting\nand the name");
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .contains("prompt 2 is back in the input"),
        "{:?}",
        app.flash
    );
    // Every terminal on the session reads the event.
    feed(
        &mut app,
        now,
        [EventKind::Rewound {
            result: rewind_result(2, "change the greeting"),
        }],
    );
    let text = transcript_text(&mut app);
    assert!(
        text.contains("rewound to before prompt 2: restored main.rs"),
        "{text}"
    );
}

#[test]
fn a_draft_typed_while_rewinding_goes_to_the_history() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "first", &[])]), now);
    press(&mut app, KeyCode::Enter, now);
    // Closed before the daemon answered, and typed into the input meanwhile.
    press(&mut app, KeyCode::Esc, now);
    assert!(app.rewind.is_none());
    type_text(&mut app, "draft", now);
    app.on_reply(Reply::Rewound(rewind_result(1, "first")), now);
    assert_eq!(app.editor.text(), "first");
    press(&mut app, KeyCode::Up, now);
    assert_eq!(app.editor.text(), "draft");
}

#[test]
fn a_rewind_refused_while_a_turn_runs_says_so_in_the_picker() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "first", &[])]), now);
    press(&mut app, KeyCode::Enter, now);
    app.outbox.clear();
    app.on_reply(
        Reply::Failed {
            action: Action::Rewind,
            message:
                "a turn is running or queued: cancel it (`cwcode-cli cancel`) or wait, then retry"
                    .to_owned(),
            code: Some(ErrorCode::SessionBusy.code()),
        },
        now,
    );
    let picker = app.rewind.as_ref().expect("the picker stays open");
    assert_eq!(picker.rewinding, None);
    let error = picker.error.as_deref().unwrap_or_default();
    assert!(error.starts_with("a turn is running or queued"), "{error}");
    assert!(error.contains("Esc cancels"), "{error}");
    // Any other failure is the daemon's word, as it is.
    press(&mut app, KeyCode::Esc, now);
    run_command(&mut app, "/rewind 9", now);
    assert!(matches!(app.outbox[..], [Request::Rewind { turn: 9, .. }]));
    app.on_reply(
        Reply::Failed {
            action: Action::Rewind,
            message: "no checkpoint for prompt 9 (there are 1)".to_owned(),
            code: Some(ErrorCode::Checkpoint.code()),
        },
        now,
    );
    let text = transcript_text(&mut app);
    assert!(text.contains("· no checkpoint for prompt 9"), "{text}");
}

#[test]
fn rewind_without_checkpoints_says_so_and_esc_or_ctrl_c_close_the_picker() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Checkpoints(Vec::new()), now);
    assert!(app.rewind.is_none());
    assert!(transcript_text(&mut app).contains("no checkpoints yet"));
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
    ctrl(&mut app, 'c', now);
    assert!(app.rewind.is_none());
    assert!(app.exit.is_none());
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
    // Typing is not for the hidden input.
    type_text(&mut app, "xyz", now);
    app.on_terminal(TermEvent::Paste("pasted".to_owned()), now);
    assert!(app.editor.is_empty());
    press(&mut app, KeyCode::Esc, now);
    assert!(app.rewind.is_none());
    assert!(app.outbox.is_empty());
}

#[test]
fn an_approval_asked_while_the_rewind_picker_is_open_comes_first() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
    feed(&mut app, now, [approval_requested("r1")]);
    press(&mut app, KeyCode::Char('y'), now);
    assert!(matches!(app.outbox[..], [Request::Respond(_)]));
    assert!(app.rewind.is_some());
}

#[test]
fn rewind_undo_takes_back_the_prompt_it_had_returned() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.on_reply(Reply::Rewound(rewind_result(2, "change it")), now);
    assert_eq!(app.editor.text(), "change it");
    // The input is busy with that prompt: /rewind undo is typed over it.
    app.editor.take();
    run_command(&mut app, "/rewind undo", now);
    assert!(matches!(app.outbox[..], [Request::UndoRewind { .. }]));
    app.editor.set_text("change it");
    app.on_reply(Reply::RewindUndone(rewind_result(2, "change it")), now);
    assert!(app.editor.is_empty());
    // Anything else typed there stays.
    app.editor.set_text("something new");
    app.on_reply(Reply::RewindUndone(rewind_result(2, "change it")), now);
    assert_eq!(app.editor.text(), "something new");
}

#[test]
fn cache_and_cost_are_asked_for_and_shown_in_the_transcript() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/cache", now);
    run_command(&mut app, "/cost", now);
    assert!(matches!(
        app.outbox[..],
        [Request::Cache { .. }, Request::Cost { .. }]
    ));
    app.on_reply(
        Reply::Cache(CacheReport {
            unreported_requests: 0,
            estimated: None,
            session_id: "s".to_owned(),
            turns: vec![TurnCache {
                unreported_requests: 0,
                estimated: None,
                turn: 1,
                requests: 1,
                prompt_tokens: 2_000,
                cached_tokens: 1_500,
                completion_tokens: 50,
                hit_ratio: 0.75,
                last_request_bytes: 9_000,
                last_shared_prefix_bytes: 0,
            }],
            prompt_tokens: 2_000,
            cached_tokens: 1_500,
            completion_tokens: 50,
            hit_ratio: 0.75,
            first_request_bytes: 9_000,
        }),
        now,
    );
    app.on_reply(
        Reply::Cost(CostReport {
            currency: "USD".to_owned(),
            unreported_requests: 0,
            estimated_total: None,
            session_id: "s".to_owned(),
            profile: "local".to_owned(),
            prices: None,
            turns: Vec::new(),
            total: 0.0,
        }),
        now,
    );
    let text = transcript_text(&mut app);
    assert!(text.contains("    1     1    2.0k    1.5k   75%"), "{text}");
    assert!(text.contains("profile `local` has no prices"), "{text}");
}

#[test]
fn compact_asks_the_daemon_and_the_transcript_tells_the_result() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/compact", now);
    assert!(matches!(app.outbox[..], [Request::Compact { .. }]));
    feed(
        &mut app,
        now,
        [EventKind::Compacted {
            summary: "so far".to_owned(),
            kept_messages: 4,
            tokens_before: 48_000,
            tokens_after: 6_000,
        }],
    );
    let text = transcript_text(&mut app);
    assert!(text.contains("compacting:"), "{text}");
    assert!(text.contains("48.0k → 6.0k tokens"), "{text}");
    assert_eq!(app.context_tokens, 6_000);
}

#[test]
fn todo_toggles_the_list_once_the_model_keeps_one() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/todo", now);
    assert!(transcript_text(&mut app).contains("no todo list"));
    assert!(app.show_todos);
    feed(
        &mut app,
        now,
        [EventKind::TodoUpdated {
            todos: vec![TodoItem {
                content: "fix it".to_owned(),
                status: TodoStatus::Pending,
            }],
        }],
    );
    run_command(&mut app, "/todo", now);
    assert!(!app.show_todos);
    run_command(&mut app, "/todo", now);
    assert!(app.show_todos);
    assert_eq!(app.flash.as_deref(), Some("todo list shown"));
}

#[test]
fn help_lists_the_new_commands_and_not_the_missing_ones() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/help", now);
    let text = transcript_text(&mut app);
    for line in [
        "/rewind [N|undo]     put files and history back to before a prompt",
        "/compact             summarise the older turns to free context",
        "/cache               prompt-cache hits, per turn",
        "/cost                what the session cost, per turn",
        "/todo                show or hide the model's todo list",
        "/memory [QUERY|rm ID] this workspace's notes",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert!(
        text.contains("/goal [TEXT|on|off|status] add a goal to goals.md"),
        "{text}"
    );
}

fn goal_status(running: bool, cycle: u32, done: usize, left: usize) -> GoalStatus {
    GoalStatus {
        running,
        cycle,
        cap: 20,
        goals_file: format!("{CWD}/goals.md"),
        goals: (0..done + left)
            .map(|index| GoalItem {
                text: format!("goal {index}"),
                done: index < done,
                verify: None,
            })
            .collect(),
        done,
        left,
        tokens_used: 31_000,
        cost_used: 0.0,
        token_budget: None,
        cost_budget: None,
        state: cwcode_protocol::GoalState::default(),
        tokens_left: None,
        cost_left: None,
        currency: "USD".to_owned(),
        hours_budget: None,
        seconds_used: 0,
        seconds_left: None,
        stop_reason: None,
        summary: String::new(),
    }
}

fn goal_reply(call: GoalCall, status: GoalStatus) -> Reply {
    Reply::Goal {
        session_id: "0198a1b2c3d4e5f6".to_owned(),
        call,
        status,
    }
}

#[test]
fn goal_commands_ask_the_daemon_and_say_what_it_answered() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/goal coupons apply before tax", now);
    run_command(&mut app, "/goal on --cap 5", now);
    run_command(&mut app, "/goal off", now);
    run_command(&mut app, "/goal", now);
    let [
        Request::GoalAdd { text, .. },
        Request::GoalStart(start),
        Request::GoalStop { .. },
        Request::GoalStatus {
            call: GoalCall::Show,
            ..
        },
    ] = &app.outbox[..]
    else {
        panic!("unexpected requests: {:?}", app.outbox);
    };
    assert_eq!(text, "coupons apply before tax");
    assert_eq!(
        (start.session_id.as_str(), start.cap, start.token_budget),
        ("0198a1b2c3d4e5f6", Some(5), None)
    );

    app.on_reply(goal_reply(GoalCall::Add, goal_status(false, 0, 1, 2)), now);
    let text = transcript_text(&mut app);
    assert!(
        text.contains("goal added to /home/dev/shop/goals.md: 2 of 3 open · /goal on"),
        "{text}"
    );
    let mut started = goal_status(true, 1, 1, 2);
    started.tokens_left = Some(45_600);
    started.seconds_left = Some(7_260);
    app.on_reply(goal_reply(GoalCall::Start, started), now);
    assert_eq!(
        app.goal.map(|goal| goal.banner(false)).as_deref(),
        Some(
            "goal loop running · cycle 1/20 · 1 of 3 done · ≤ 45.6k tokens, 2h01m left · \
             /goal off stops it"
        )
    );
    assert_eq!(
        app.goal.map(|goal| goal.banner(true)).as_deref(),
        Some(
            "goal loop awaiting approval · cycle 1/20 · 1 of 3 done · ≤ 45.6k tokens, 2h01m \
             left · /goal off stops it"
        )
    );
    app.on_reply(goal_reply(GoalCall::Show, goal_status(true, 1, 1, 2)), now);
    let text = transcript_text(&mut app);
    assert!(text.contains("goal loop running · cycle 1/20"), "{text}");
    assert!(
        text.contains("    ☑ goal 0\n    ☐ goal 1\n    ☐ goal 2"),
        "{text}"
    );
    app.on_reply(goal_reply(GoalCall::Stop, goal_status(false, 1, 1, 2)), now);
    assert_eq!(app.goal, None);
    assert_eq!(
        app.flash.as_deref(),
        Some("the goal loop is off · /goal status shows where it got")
    );
}

#[test]
fn the_goal_banner_follows_the_loop_events() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [EventKind::GoalCycleStarted { cycle: 1, cap: 8 }],
    );
    assert_eq!(
        app.goal.map(|goal| goal.banner(false)).as_deref(),
        Some("goal loop running · cycle 1/8 · /goal off stops it")
    );
    feed(
        &mut app,
        now,
        [
            EventKind::GoalCycleFinished {
                cycle: 1,
                done: 1,
                left: 4,
            },
            EventKind::GoalCycleStarted { cycle: 2, cap: 8 },
        ],
    );
    assert_eq!(
        app.goal.map(|goal| goal.banner(false)).as_deref(),
        Some("goal loop running · cycle 2/8 · 1 of 5 done · /goal off stops it")
    );
    feed(
        &mut app,
        now,
        [EventKind::GoalLoopStopped {
            reason: "all goals are done".to_owned(),
            summary: "Goal loop finished after 2 cycles: all 5 goals are done.".to_owned(),
            state: cwcode_protocol::GoalState::Complete,
        }],
    );
    assert_eq!(app.goal, None);
    let text = transcript_text(&mut app);
    assert!(
        text.contains("Goal loop finished after 2 cycles: all 5 goals are done."),
        "{text}"
    );
    // A cycle's end after the stop (the one that was cancelled) brings no banner back.
    feed(
        &mut app,
        now,
        [EventKind::GoalCycleFinished {
            cycle: 2,
            done: 5,
            left: 0,
        }],
    );
    assert_eq!(app.goal, None);
}

#[test]
fn on_attach_the_replay_rebuilds_the_banner_and_the_status_makes_it_exact() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
    info.last_seq = 3;
    app.on_reply(Reply::Attached(info), now);
    feed(
        &mut app,
        now,
        [EventKind::GoalCycleStarted { cycle: 1, cap: 20 }],
    );
    // The status is asked for once, when the replay is over.
    assert!(app.outbox.is_empty(), "{:?}", app.outbox);
    feed(
        &mut app,
        now,
        [
            EventKind::GoalCycleStarted { cycle: 1, cap: 20 },
            EventKind::GoalCycleFinished {
                cycle: 1,
                done: 1,
                left: 2,
            },
            EventKind::GoalCycleStarted { cycle: 2, cap: 20 },
        ],
    );
    let [
        Request::GoalStatus {
            call: GoalCall::Sync,
            ..
        },
    ] = &app.outbox[..]
    else {
        panic!("expected one goal/status: {:?}", app.outbox);
    };
    assert_eq!(
        app.goal.map(|goal| goal.banner(false)).as_deref(),
        Some("goal loop running · cycle 2/20 · 1 of 3 done · /goal off stops it")
    );
    // goals.md was edited by hand meanwhile: the status is the truth, and says nothing.
    let before = transcript_text(&mut app);
    app.on_reply(goal_reply(GoalCall::Sync, goal_status(true, 2, 2, 2)), now);
    assert_eq!(
        app.goal.map(|goal| goal.banner(false)).as_deref(),
        Some("goal loop running · cycle 2/20 · 2 of 4 done · /goal off stops it")
    );
    assert_eq!(transcript_text(&mut app), before);
    // An answer about the session left behind changes nothing.
    app.on_reply(
        Reply::Goal {
            session_id: "0198ffff".to_owned(),
            call: GoalCall::Sync,
            status: goal_status(false, 0, 0, 0),
        },
        now,
    );
    assert!(app.goal.is_some());
    // A loop that ended while nobody watched has no banner.
    app.on_reply(goal_reply(GoalCall::Sync, goal_status(false, 2, 2, 2)), now);
    assert_eq!(app.goal, None);
}

#[test]
fn memory_asks_about_this_workspace_and_says_what_a_delete_did() {
    let now = Instant::now();
    let mut app = attached_app(now);
    run_command(&mut app, "/memory", now);
    let [Request::MemoryList { workspace }] = &app.outbox[..] else {
        panic!("expected a memory/list: {:?}", app.outbox);
    };
    assert_eq!(workspace, CWD);
    app.outbox.clear();
    run_command(&mut app, "/memory docker compose", now);
    let [Request::MemoryRecall { query, workspace }] = &app.outbox[..] else {
        panic!("expected a memory/recall: {:?}", app.outbox);
    };
    assert_eq!(
        (query.as_str(), workspace.as_str()),
        ("docker compose", CWD)
    );
    app.outbox.clear();
    run_command(&mut app, "/memory rm 14", now);
    assert!(matches!(app.outbox[..], [Request::MemoryDelete { id: 14 }]));
    app.on_reply(
        Reply::MemoryDeleted {
            id: 14,
            deleted: true,
        },
        now,
    );
    app.on_reply(
        Reply::MemoryDeleted {
            id: 15,
            deleted: false,
        },
        now,
    );
    let shown = transcript_text(&mut app);
    assert!(shown.contains("deleted note #14"), "{shown}");
    assert!(
        shown.contains("there is no note #15: /memory lists"),
        "{shown}"
    );
    app.on_reply(Reply::MemoryNotes(Vec::new()), now);
    assert!(transcript_text(&mut app).contains("no notes for /home/dev/shop yet"));
}
