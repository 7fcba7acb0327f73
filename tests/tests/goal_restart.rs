//! A goal loop across daemon restarts (SPEC §5): the cycle a restart interrupts, or the one it
//! keeps from starting, runs after the restart under its own number, so a loop capped at N
//! cycles does N cycles of work and none is skipped. Each test stops the daemon at a gate the
//! fake provider holds, never after a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::time::{Duration, Instant};

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, Gate, goal_worker, hold_until, text};
use cwcode_tests::{Home, wait_for_event};
use serde_json::{Value, json};

/// Waits until the fake provider has received `count` requests.
fn wait_for_requests(provider: &FakeProvider, count: usize) {
    let started = Instant::now();
    while provider.requests().len() < count {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the daemon never sent request {count}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The cycles the journal shows started, and those it shows finished, in order.
fn cycles(home: &Home, id: &str) -> (Vec<u32>, Vec<u32>) {
    let (mut started, mut finished) = (Vec::new(), Vec::new());
    for event in home.journal(id) {
        match event.kind {
            EventKind::GoalCycleStarted { cycle, .. } => started.push(cycle),
            EventKind::GoalCycleFinished { cycle, .. } => finished.push(cycle),
            _ => {}
        }
    }
    (started, finished)
}

fn wait_for_stop(home: &Home, id: &str) -> (String, String) {
    match wait_for_event(home, id, |kind| {
        matches!(kind, EventKind::GoalLoopStopped { .. })
    })
    .kind
    {
        EventKind::GoalLoopStopped { summary, state, .. } => (state.to_string(), summary),
        _ => unreachable!(),
    }
}

fn saved_state(home: &Home, id: &str) -> Value {
    let path = home.paths.session_dir(id).join("goal_loop.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_interrupted_by_a_restart_runs_again_under_its_number() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider.then(goal_worker).then(goal_worker);
    // Cycle 2's first answer stops after one frame and is never let go: the daemon is stopped
    // while it streams.
    let never_opened = Gate::new();
    provider.then(move |request| hold_until(goal_worker(request), 1, &never_opened));
    for _ in 0..8 {
        provider.then(goal_worker);
    }
    let id = home.new_session("yolo");
    for goal in ["alpha", "beta", "gamma"] {
        home.cli_ok(&["goal", &id, "add", goal]);
    }
    home.cli_ok(&["goal", &id, "on", "--cap", "3"]);
    wait_for_requests(&provider, 3);
    assert!(daemon.terminate().success());
    let suspended = saved_state(&home, &id);
    assert_eq!(
        (&suspended["running"], &suspended["cycle"]),
        (&json!(true), &json!(2)),
        "{suspended}"
    );
    assert_eq!(
        cycles(&home, &id),
        (vec![1, 2], vec![1]),
        "an interrupted cycle is not journalled as finished"
    );

    let _daemon = home.start_daemon();
    let (state, summary) = wait_for_stop(&home, &id);
    // With the cap at 3, skipping the interrupted cycle would have left gamma open.
    assert_eq!(state, "complete", "{summary}");
    assert!(summary.contains("all 3 goals are done"), "{summary}");
    assert_eq!(
        cycles(&home, &id),
        (vec![1, 2, 2, 3], vec![1, 2, 3]),
        "cycle 2 runs again after the restart, under its number"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_two_cycles_runs_the_next_one_and_skips_none() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    // Cycle 1's first answer waits until a prompt is queued behind the cycle; then that
    // prompt's turn, which runs before cycle 2, holds its answer: the daemon stops after cycle
    // 1 finished and decided on cycle 2, before cycle 2 started.
    let prompt_queued = Gate::new();
    let held = prompt_queued.clone();
    provider.then(move |request| hold_until(goal_worker(request), 1, &held));
    provider.then(goal_worker);
    let never_opened = Gate::new();
    provider.then(move |_| hold_until(text("Looking into it."), 1, &never_opened));
    for _ in 0..8 {
        provider.then(goal_worker);
    }
    let id = home.new_session("yolo");
    for goal in ["alpha", "beta", "gamma"] {
        home.cli_ok(&["goal", &id, "add", goal]);
    }
    home.cli_ok(&["goal", &id, "on", "--cap", "3"]);
    wait_for_requests(&provider, 1);
    home.cli_ok(&["send", &id, "what are you working on?"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::PromptQueued { .. })
    });
    prompt_queued.open();
    wait_for_requests(&provider, 3);
    assert!(daemon.terminate().success());
    let between = saved_state(&home, &id);
    assert_eq!(
        (&between["running"], &between["cycle"]),
        (&json!(true), &json!(2)),
        "cycle 2 was decided and saved: {between}"
    );
    assert_eq!(cycles(&home, &id), (vec![1], vec![1]));

    let _daemon = home.start_daemon();
    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "complete", "{summary}");
    assert_eq!(
        cycles(&home, &id),
        (vec![1, 2, 3], vec![1, 2, 3]),
        "the restarted loop starts the cycle it had decided on, not the one after"
    );
}
