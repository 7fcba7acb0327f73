//! The screen as drawn at a fixed size: snapshots of what a user sees.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use cwcode_protocol::{ApprovalDecision, EventKind, TurnOutcome, Usage};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::*;
use crate::daemon::Reply;
use crate::fixtures::{CWD, attached_app, checkpoint, custom_commands, feed, session};

fn screen(app: &mut App, now: Instant, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw(frame, app, now)).unwrap();
    terminal
}

fn key(app: &mut App, code: KeyCode, now: Instant) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), now);
}

fn type_text(app: &mut App, text: &str, now: Instant) {
    for c in text.chars() {
        key(app, KeyCode::Char(c), now);
    }
}

fn started(prompt: &str) -> EventKind {
    EventKind::TurnStarted {
        turn: 1,
        prompt: prompt.to_owned(),
    }
}

fn running() -> EventKind {
    EventKind::StatusChanged {
        status: SessionStatus::Running,
    }
}

const READ_OUTPUT: &str = "1:k3d|fn total(items: &[Item]) -> u32 {\n2:p0q|    items.iter().map(|i| i.price).sum()\n3:z9x|}";

#[test]
fn streaming_answer() {
    let start = Instant::now();
    let mut app = attached_app(start);
    feed(
        &mut app,
        start,
        [
            running(),
            started("how do I build this?"),
            EventKind::ReasoningDelta {
                text: "The user asks about the build.\nCargo is used.".to_owned(),
            },
            EventKind::AssistantDelta {
                text: "The build has **two** steps:\n\n1. compile the `shop` crate\n".to_owned(),
            },
            EventKind::AssistantDelta {
                text: "2. run the tests\n\n```sh\ncargo build\ncargo te".to_owned(),
            },
        ],
    );
    let terminal = screen(&mut app, start + Duration::from_secs(3), 80, 16);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn highlighted_code_block() {
    let start = Instant::now();
    let mut app = attached_app(start);
    feed(
        &mut app,
        start,
        [
            started("show me"),
            EventKind::AssistantDelta {
                text: "```rust\n// the total\nfn total(n: u32) -> u32 {\n    n + \"1\".len() as u32\n}\n```".to_owned(),
            },
        ],
    );
    let terminal = screen(&mut app, start, 40, 9);
    // The buffer's Debug form lists the colours of every run of cells.
    insta::assert_snapshot!(format!("{:?}", terminal.backend().buffer()));
}

#[test]
fn markdown_table_in_an_answer() {
    let start = Instant::now();
    let mut app = attached_app(start);
    feed(
        &mut app,
        start,
        [
            started("which coupons apply?"),
            EventKind::AssistantDelta {
                text: "Two of them:\n\n| Code | Off | Before tax |\n|------|----:|:----------:|\n| SPRING | 10% | yes |\n| WELCOME5 | 5.00 | no |\n\nBoth are tested.".to_owned(),
            },
        ],
    );
    let terminal = screen(&mut app, start, 60, 12);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn tool_call_with_diff() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [
            started("prices are in cents, fix total"),
            EventKind::ToolCallStarted {
                call_id: "c1".to_owned(),
                name: "read_file".to_owned(),
                arguments: r#"{"path":"src/cart.rs"}"#.to_owned(),
            },
            EventKind::ToolCallFinished {
                call_id: "c1".to_owned(),
                name: "read_file".to_owned(),
                output: READ_OUTPUT.to_owned(),
                is_error: false,
            },
            EventKind::ToolCallStarted {
                call_id: "c2".to_owned(),
                name: "edit_lines".to_owned(),
                arguments: r#"{"path":"src/cart.rs","edits":[{"line":2,"hash":"p0q","new_text":"    let cents: u32 = items.iter().map(|i| i.price).sum();\n    cents / 100"}]}"#.to_owned(),
            },
            EventKind::ToolCallFinished {
                call_id: "c2".to_owned(),
                name: "edit_lines".to_owned(),
                output: "Edited `src/cart.rs`: replaced line 2 with 2 lines. Those lines now read:\n2:aaa|    let cents: u32 = items.iter().map(|i| i.price).sum();\n3:bbb|    cents / 100".to_owned(),
                is_error: false,
            },
            EventKind::AssistantDelta {
                text: "`total` now returns whole units.".to_owned(),
            },
            EventKind::TurnFinished {
                turn: 1,
                outcome: TurnOutcome::Completed,
                usage: Usage {
                    prompt_tokens: 5200,
                    completion_tokens: 140,
                    cached_tokens: 4096,
                },
                error: None,
            },
        ],
    );
    let terminal = screen(&mut app, now, 72, 16);
    insta::assert_snapshot!(terminal.backend());
}

fn awaiting_approval(now: Instant) -> App {
    let mut app = attached_app(now);
    let arguments =
        r#"{"path":"README.md","old_string":"Run `make`.","new_string":"Run `cargo build`."}"#;
    feed(
        &mut app,
        now,
        [
            running(),
            started("update the readme"),
            EventKind::ToolCallStarted {
                call_id: "c1".to_owned(),
                name: "edit_file".to_owned(),
                arguments: arguments.to_owned(),
            },
            EventKind::ApprovalRequested {
                request_id: "r1".to_owned(),
                call_id: "c1".to_owned(),
                tool: "edit_file".to_owned(),
                arguments: arguments.to_owned(),
                suggested_pattern: None,
            },
            EventKind::StatusChanged {
                status: SessionStatus::AwaitingApproval,
            },
        ],
    );
    app
}

#[test]
fn approval_prompt() {
    let now = Instant::now();
    let mut app = awaiting_approval(now);
    let terminal = screen(&mut app, now, 100, 10);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn approval_prompt_offering_a_pattern() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let arguments = r#"{"command":"cargo test -q --lib"}"#;
    feed(
        &mut app,
        now,
        [
            running(),
            started("run the tests"),
            EventKind::ToolCallStarted {
                call_id: "c1".to_owned(),
                name: "bash".to_owned(),
                arguments: arguments.to_owned(),
            },
            EventKind::ApprovalRequested {
                request_id: "r1".to_owned(),
                call_id: "c1".to_owned(),
                tool: "bash".to_owned(),
                arguments: arguments.to_owned(),
                suggested_pattern: Some("cargo test *".to_owned()),
            },
            EventKind::StatusChanged {
                status: SessionStatus::AwaitingApproval,
            },
        ],
    );
    let terminal = screen(&mut app, now, 100, 10);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn approval_denied_with_a_reason() {
    let now = Instant::now();
    let mut app = awaiting_approval(now);
    key(&mut app, KeyCode::Char('n'), now);
    type_text(&mut app, "keep make", now);
    let terminal = screen(&mut app, now, 100, 10);
    insta::assert_snapshot!("approval_reason", terminal.backend());
    key(&mut app, KeyCode::Enter, now);
    feed(
        &mut app,
        now,
        [EventKind::ApprovalResolved {
            request_id: "r1".to_owned(),
            decision: ApprovalDecision::Deny,
            reason: Some("keep make".to_owned()),
            pattern: None,
        }],
    );
    let terminal = screen(&mut app, now, 100, 10);
    insta::assert_snapshot!("approval_denied", terminal.backend());
}

#[test]
fn yolo_mode_status_line() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(&mut app, now, [EventKind::ModeChanged { mode: Mode::Yolo }]);
    let terminal = screen(&mut app, now, 110, 4);
    let status = &terminal.backend().buffer()[(0, 3)];
    assert_eq!(status.bg, Color::Red, "the badge is in the warning colour");
    let warning = &terminal.backend().buffer()[(7, 3)];
    assert_eq!(
        (warning.symbol(), warning.fg),
        ("e", Color::Red),
        "the warning follows the badge in red"
    );
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn plan_mode_status_line() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let usage = Usage {
        prompt_tokens: 18_400,
        completion_tokens: 900,
        cached_tokens: 17_920,
    };
    feed(
        &mut app,
        now,
        [
            EventKind::ModeChanged { mode: Mode::Plan },
            started("plan the refactor"),
            EventKind::AssistantMessage {
                content: "Plan: split `cart.rs` into two modules.".to_owned(),
                reasoning: None,
                tool_calls: Vec::new(),
                usage: Some(usage),
                stats: None,
            },
            EventKind::TurnFinished {
                turn: 1,
                outcome: TurnOutcome::Completed,
                usage,
                error: None,
            },
        ],
    );
    let terminal = screen(&mut app, now, 110, 10);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn status_line_follows_a_profile_change() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let mut profiles = app.profiles.clone();
    profiles.push(cwcode_protocol::ProfileInfo {
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
    feed(
        &mut app,
        now,
        [EventKind::ProfileChanged {
            profile: "local".to_owned(),
        }],
    );
    let terminal = screen(&mut app, now, 110, 10);
    let text = format!("{:?}", terminal.backend());
    assert!(text.contains("local · qwen3-coder"), "{text}");
    assert!(!text.contains("deepseek-chat"), "{text}");
}

#[test]
fn slash_completion() {
    let now = Instant::now();
    let mut app = attached_app(now);
    type_text(&mut app, "/m", now);
    key(&mut app, KeyCode::Down, now);
    let terminal = screen(&mut app, now, 72, 8);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn custom_commands_in_the_completion_list() {
    let now = Instant::now();
    let mut app = attached_app(now);
    app.custom = custom_commands();
    type_text(&mut app, "/re", now);
    let terminal = screen(&mut app, now, 80, 8);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn session_picker() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), crate::app::Startup::Choose, None, None);
    app.on_reply(crate::daemon::Reply::Connected, now);
    let mut other = session("0198ffeeddccbbaa", "/home/dev/blog", "typo in post");
    other.status = SessionStatus::Running;
    let mut older = session("0198a1b2c3d4e5f6", CWD, "fix the cart");
    older.turns = 12;
    older.updated = "2026-01-01T10:00:00.000Z".to_owned();
    let sessions = vec![
        session("0198bbbbcccc0000", CWD, "add coupons"),
        other,
        older,
    ];
    app.on_reply(crate::daemon::Reply::Sessions(sessions), now);
    let terminal = screen(&mut app, now, 100, 10);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn session_picker_with_titles_and_previews() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), crate::app::Startup::Choose, None, None);
    app.on_reply(crate::daemon::Reply::Connected, now);
    let mut coupons = session("0198bbbbcccc0000", CWD, "add coupons to the checkout");
    coupons.last_seq = 40;
    let mut cart = session(
        "0198a1b2c3d4e5f6",
        CWD,
        "why is the cart total off by a cent…",
    );
    cart.last_seq = 12;
    let quiet = session("0198ccccdddd0000", CWD, "shop");
    app.on_reply(
        crate::daemon::Reply::Sessions(vec![coupons, cart, quiet]),
        now,
    );
    assert!(
        matches!(app.outbox.last(), Some(crate::daemon::Request::Previews(wanted)) if wanted.len() == 2),
        "previews are asked of the sessions with events: {:?}",
        app.outbox
    );
    app.on_reply(
        crate::daemon::Reply::Previews(vec![
            (
                "0198bbbbcccc0000".to_owned(),
                "Coupons now apply before tax; the tests pass.".to_owned(),
            ),
            (
                "0198a1b2c3d4e5f6".to_owned(),
                "› why is the cart total off by a cent".to_owned(),
            ),
        ]),
        now,
    );
    let terminal = screen(&mut app, now, 100, 14);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn scrolled_up_the_view_stays_put_while_output_streams_and_says_what_is_below() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let numbers: String = (1..=40).map(|n| format!("line {n}\n\n")).collect();
    feed(&mut app, now, [EventKind::AssistantDelta { text: numbers }]);
    screen(&mut app, now, 40, 12);
    key(&mut app, KeyCode::PageUp, now);
    let before = screen(&mut app, now, 40, 12).backend().to_string();
    feed(
        &mut app,
        now,
        [EventKind::AssistantDelta {
            text: "more\n\nand more".to_owned(),
        }],
    );
    let after = screen(&mut app, now, 40, 12).backend().to_string();
    let first_rows = |text: &str| text.lines().take(8).collect::<Vec<_>>().join("\n");
    assert_eq!(first_rows(&before), first_rows(&after));
    assert!(
        after.contains("↓ 10 more lines · PgDn, Ctrl+End"),
        "{after}"
    );
    // Paged back to the bottom, it follows again.
    key(&mut app, KeyCode::PageDown, now);
    key(&mut app, KeyCode::PageDown, now);
    assert_eq!(app.scroll, None);
    let bottom = screen(&mut app, now, 40, 12).backend().to_string();
    assert!(bottom.contains("and more"), "{bottom}");
}

#[test]
fn the_todo_list_shows_while_the_model_keeps_one() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let todo = |content: &str, status| cwcode_protocol::TodoItem {
        content: content.to_owned(),
        status,
    };
    feed(
        &mut app,
        now,
        [EventKind::TodoUpdated {
            todos: vec![
                todo("read the cart", TodoStatus::Completed),
                todo("fix the rounding", TodoStatus::InProgress),
                todo("run the tests", TodoStatus::Pending),
            ],
        }],
    );
    let shown = screen(&mut app, now, 60, 12).backend().to_string();
    for row in [
        "todo · 1 of 3 done · /todo hides",
        "☑ read the cart",
        "◐ fix the rounding",
        "☐ run the tests",
    ] {
        assert!(shown.contains(row), "{row:?} missing:\n{shown}");
    }
    // Hidden with /todo, until shown again.
    type_text(&mut app, "/todo", now);
    key(&mut app, KeyCode::Enter, now);
    let shown = screen(&mut app, now, 60, 12).backend().to_string();
    assert!(!shown.contains("fix the rounding"), "{shown}");
    type_text(&mut app, "/todo", now);
    key(&mut app, KeyCode::Enter, now);
    // All done: the list steps aside to one row.
    feed(
        &mut app,
        now,
        [EventKind::TodoUpdated {
            todos: vec![todo("run the tests", TodoStatus::Completed)],
        }],
    );
    let shown = screen(&mut app, now, 60, 12).backend().to_string();
    assert!(!shown.contains("run the tests"), "{shown}");
    assert!(shown.contains("todo · all 1 done"), "{shown}");
}

fn finished(turn: u32) -> EventKind {
    EventKind::TurnFinished {
        turn,
        outcome: TurnOutcome::Completed,
        usage: Usage {
            prompt_tokens: 5200,
            completion_tokens: 40,
            cached_tokens: 4096,
        },
        error: None,
    }
}

#[test]
fn rewind_picker() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [
            started("add tests for the greeting and run them all"),
            EventKind::AssistantDelta {
                text: "Added `tests/greeting.rs`; all 4 tests pass.".to_owned(),
            },
            EventKind::CheckpointCreated {
                turn: 3,
                files: vec!["tests/greeting.rs".to_owned(), "Cargo.toml".to_owned()],
            },
            finished(3),
        ],
    );
    type_text(&mut app, "/rewind", now);
    key(&mut app, KeyCode::Enter, now);
    app.on_reply(
        Reply::Checkpoints(vec![
            checkpoint(1, "say hello", &[]),
            checkpoint(
                2,
                "change the greeting in main.rs\nand the name",
                &["main.rs"],
            ),
            checkpoint(
                3,
                "add tests for the greeting and run them all",
                &["tests/greeting.rs", "Cargo.toml", "README.md", "main.rs"],
            ),
        ]),
        now,
    );
    key(&mut app, KeyCode::Down, now);
    let terminal = screen(&mut app, now, 100, 14);
    insta::assert_snapshot!(terminal.backend());

    // Chosen: the picker waits for the daemon, then says what went wrong, as it is.
    key(&mut app, KeyCode::Enter, now);
    let shown = screen(&mut app, now, 100, 14).backend().to_string();
    assert!(shown.contains("rewinding to before prompt 2…"), "{shown}");
    app.on_reply(
        Reply::Failed {
            action: crate::daemon::Action::Rewind,
            message: "cannot restore main.rs: permission denied".to_owned(),
            code: Some(cwcode_protocol::ErrorCode::Checkpoint.code()),
        },
        now,
    );
    let shown = screen(&mut app, now, 100, 14).backend().to_string();
    assert!(
        shown.contains("cannot restore main.rs: permission denied"),
        "{shown}"
    );
    assert!(shown.contains("↑↓ choose · Enter rewinds"), "{shown}");
}

#[test]
fn cache_report() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let turn = |turn, prompt, cached, shared| cwcode_protocol::TurnCache {
        unreported_requests: 0,
        estimated: None,
        turn,
        requests: 2,
        prompt_tokens: prompt,
        cached_tokens: cached,
        completion_tokens: 120,
        hit_ratio: cached as f64 / prompt as f64,
        last_request_bytes: 24_310,
        last_shared_prefix_bytes: shared,
    };
    app.on_reply(
        Reply::Cache(cwcode_protocol::CacheReport {
            unreported_requests: 0,
            estimated: None,
            session_id: "0198a1b2c3d4e5f6".to_owned(),
            turns: vec![
                turn(1, 9_800, 4_096, 20_100),
                turn(2, 11_200, 10_880, 24_000),
            ],
            prompt_tokens: 21_000,
            cached_tokens: 14_976,
            completion_tokens: 240,
            hit_ratio: 0.713,
            first_request_bytes: 19_870,
        }),
        now,
    );
    let terminal = screen(&mut app, now, 80, 10);
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn long_input_wraps_and_the_cursor_follows() {
    let now = Instant::now();
    let mut app = attached_app(now);
    type_text(&mut app, "first line", now);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), now);
    type_text(
        &mut app,
        "a second line that is longer than the window",
        now,
    );
    let mut terminal = screen(&mut app, now, 30, 8);
    insta::assert_snapshot!(terminal.backend());
    // After "than the window" on the wrapped row.
    terminal.backend_mut().assert_cursor_position((18, 6));
}

#[test]
fn goal_loop_banner() {
    let now = Instant::now();
    let mut app = attached_app(now);
    feed(
        &mut app,
        now,
        [
            EventKind::GoalCycleStarted { cycle: 2, cap: 20 },
            EventKind::GoalCycleFinished {
                cycle: 2,
                done: 2,
                left: 3,
            },
            EventKind::GoalCycleStarted { cycle: 3, cap: 20 },
            running(),
        ],
    );
    let terminal = screen(&mut app, now, 80, 10);
    insta::assert_snapshot!(terminal.backend());
    // Stopped: the banner goes and the summary stays in the transcript.
    feed(
        &mut app,
        now,
        [EventKind::GoalLoopStopped {
            reason: "stopped by the user".to_owned(),
            summary: "Goal loop stopped after 3 cycles: stopped by the user. 2 of 5 goals done."
                .to_owned(),
            state: cwcode_protocol::GoalState::Stopped,
        }],
    );
    let shown = screen(&mut app, now, 80, 10).backend().to_string();
    assert!(!shown.contains("/goal off stops it"), "{shown}");
    assert!(
        shown.contains("Goal loop stopped after 3 cycles"),
        "{shown}"
    );
}

#[test]
fn memory_listing() {
    let now = Instant::now();
    let mut app = attached_app(now);
    let note = |id, text: &str, tags: &[&str], created: &str| cwcode_protocol::MemoryNote {
        id,
        text: text.to_owned(),
        tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        workspace: CWD.to_owned(),
        session_id: Some("0198a1b2c3d4e5f6".to_owned()),
        created: created.to_owned(),
    };
    app.on_reply(
        Reply::MemoryNotes(vec![
            note(
                14,
                "The integration tests need `docker compose up db` first; without it they hang \
                 for a minute and then fail with a connection refused.",
                &["tests", "db"],
                "2026-12-01T14:03:27.120Z",
            ),
            note(
                9,
                "coupons round half up,\nnever down",
                &["coupons"],
                "2026-11-30T09:12:00.000Z",
            ),
            note(
                2,
                "prefer anyhow only at the binary edges",
                &[],
                "2026-11-28T17:45:10.000Z",
            ),
        ]),
        now,
    );
    let terminal = screen(&mut app, now, 80, 10);
    insta::assert_snapshot!(terminal.backend());
}

/// An interface on a profile priced in yuan, after a turn of two requests: the provider
/// reported the first one's usage, and `second` (if any) of the other.
fn priced_in_yuan(now: Instant, first: Option<Usage>, second: Option<Usage>) -> App {
    let mut app = attached_app(now);
    let mut profiles = app.profiles.clone();
    if let Some(prices) = &mut profiles[0].prices {
        prices.currency = "CNY".to_owned();
        prices.input_hit = 0.5;
        prices.input_miss = 2.0;
        prices.output = 8.0;
    }
    app.on_reply(Reply::Profiles(profiles), now);
    let answer = |usage| EventKind::AssistantMessage {
        content: "Done.".to_owned(),
        reasoning: None,
        tool_calls: Vec::new(),
        usage,
        stats: None,
    };
    let mut total = Usage::default();
    for usage in [first, second].iter().flatten() {
        total.add(usage);
    }
    feed(
        &mut app,
        now,
        [
            started("fix the rounding"),
            answer(first),
            answer(second),
            EventKind::TurnFinished {
                turn: 1,
                outcome: TurnOutcome::Completed,
                usage: total,
                error: None,
            },
        ],
    );
    app
}

#[test]
fn status_line_cost_in_the_profiles_currency() {
    let now = Instant::now();
    let usage = Usage {
        prompt_tokens: 4_000,
        completion_tokens: 500,
        cached_tokens: 3_000,
    };
    let mut app = priced_in_yuan(now, Some(usage), Some(usage));
    let terminal = screen(&mut app, now, 100, 4);
    insta::assert_snapshot!(terminal.backend());
    // 6000 cached at 0.5, 2000 missed at 2.0, 1000 output at 8.0 per million: 0.015.
    let status = format!("{:?}", terminal.backend());
    assert!(status.contains("cost 0.0150 CNY"), "{status}");
}

#[test]
fn status_line_says_not_reported_rather_than_zero() {
    let now = Instant::now();
    let mut app = priced_in_yuan(now, None, None);
    let status = format!("{:?}", screen(&mut app, now, 100, 4).backend());
    assert!(status.contains("cache n/r │ cost not reported"), "{status}");
    assert!(!status.contains("0.0000"), "{status}");
    let usage = Usage {
        prompt_tokens: 4_000,
        completion_tokens: 500,
        cached_tokens: 3_000,
    };
    let mut app = priced_in_yuan(now, Some(usage), None);
    let status = format!("{:?}", screen(&mut app, now, 100, 4).backend());
    // One request of two reported: what it cost is the least the turn cost.
    assert!(status.contains("cost ≥0.0075 CNY"), "{status}");
}

#[test]
fn first_run_setup() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), crate::app::Startup::Choose, None, None);
    app.client_env = |_| None;
    app.on_reply(Reply::Connected, now);
    let profile =
        |name: &str, model: &str, url: &str, variable: &str| cwcode_protocol::ProfileInfo {
            name: name.to_owned(),
            base_url: url.to_owned(),
            model: model.to_owned(),
            has_key: false,
            is_default: false,
            context_window: None,
            prices: None,
            key_env: Some(variable.to_owned()),
        };
    app.on_reply(
        Reply::Profiles(vec![
            profile(
                "deepseek-v4-pro",
                "deepseek-v4-pro",
                "https://api.deepseek.com",
                "DEEPSEEK_API_KEY",
            ),
            profile(
                "kimi-for-coding",
                "kimi-for-coding",
                "https://api.kimi.com/coding/v1",
                "KIMI_API_KEY",
            ),
            profile(
                "qwen3.6-27b",
                "qwen3.6-27b",
                "https://dashscope.aliyuncs.com/compatible-mode/v1",
                "DASHSCOPE_API_KEY",
            ),
        ]),
        now,
    );
    app.on_reply(Reply::Sessions(Vec::new()), now);
    key(&mut app, KeyCode::Down, now);
    let terminal = screen(&mut app, now, 100, 12);
    insta::assert_snapshot!("first_run_setup_profiles", terminal.backend());
    key(&mut app, KeyCode::Enter, now);
    type_text(&mut app, "sk-0123456789abcdef", now);
    let terminal = screen(&mut app, now, 100, 12);
    let shown = format!("{:?}", terminal.backend());
    assert!(
        !shown.contains("0123456789"),
        "the key is never drawn: {shown}"
    );
    insta::assert_snapshot!("first_run_setup_key", terminal.backend());
}
