//! A goal loop's history has a bound even when the profile names no context window (so the
//! agent never compacts against one): past about 100k estimated tokens, the loop compacts it
//! before the next cycle, so a loop of thousands of cycles does not grow the daemon's memory
//! without end (BENCHMARKS.md, "Soak").
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, text};
use cwcode_tests::{Home, wait_for_event};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_without_a_known_context_window_compacts_a_large_history_before_the_next_cycle() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // Cycle 1's answer alone is about 120k tokens (four bytes a token).
    let long_answer = "I looked at everything. ".repeat(20_000);
    provider.reply(text(&long_answer));
    provider.reply(text(
        "Summary: cycle 1 looked at everything; the goal is open.",
    ));
    provider.reply(text("Still on it."));
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "keep going"]);
    home.cli_ok(&["goal", &id, "on", "--cap", "2"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::GoalLoopStopped { .. })
    });

    let journal = home.journal(&id);
    let position = |wanted: fn(&EventKind) -> bool| {
        journal
            .iter()
            .position(|event| wanted(&event.kind))
            .unwrap_or_else(|| panic!("not journalled: {journal:#?}"))
    };
    let finished_1 = position(|kind| matches!(kind, EventKind::GoalCycleFinished { cycle: 1, .. }));
    let compacted = position(|kind| matches!(kind, EventKind::Compacted { .. }));
    let started_2 = position(|kind| matches!(kind, EventKind::GoalCycleStarted { cycle: 2, .. }));
    assert!(
        finished_1 < compacted && compacted < started_2,
        "compacted between the cycles"
    );
    let requests = provider.bodies();
    assert_eq!(requests.len(), 3, "cycle 1, the summary, cycle 2");
    let cycle_2 = String::from_utf8(requests[2].clone()).unwrap();
    assert!(
        cycle_2.len() < 50_000 && cycle_2.contains("cycle 1 looked at everything"),
        "cycle 2 is sent the summary, not the long answer: {} bytes",
        cycle_2.len()
    );
}
