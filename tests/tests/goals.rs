//! The goal loop through the real daemon (SPEC §1, §5): it works through goals.md, honours hand
//! edits, stops at its cap, needs no client, and survives a daemon restart.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::EventKind;
use cwcode_tests::fake_provider::{FakeProvider, Gate, goal_worker, hold_until, text};
use cwcode_tests::{Home, wait_for_event};
use serde_json::Value;

fn status(home: &Home, id: &str) -> Value {
    serde_json::from_str(&home.cli_ok(&["goal", id, "status", "--json"])).unwrap()
}

fn wait_for_stop(home: &Home, id: &str) -> String {
    match wait_for_event(home, id, |kind| {
        matches!(kind, EventKind::GoalLoopStopped { .. })
    })
    .kind
    {
        EventKind::GoalLoopStopped { summary, .. } => summary,
        _ => unreachable!(),
    }
}

fn cycles_started(home: &Home, id: &str) -> Vec<u32> {
    home.journal(id)
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::GoalCycleStarted { cycle, .. } => Some(cycle),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_goal_loop_checks_every_box_and_stops_with_no_client_attached() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    for _ in 0..8 {
        provider.then(goal_worker);
    }
    let id = home.new_session("yolo");
    for goal in ["write the README", "add a licence", "tag the release"] {
        home.cli_ok(&["goal", &id, "add", goal]);
    }
    let started = status(&home, &id);
    assert_eq!(started["left"], 3);
    // `on` returns at once: the loop runs in the daemon with nothing attached.
    home.cli_ok(&["goal", &id, "on"]);

    let summary = wait_for_stop(&home, &id);
    assert!(summary.contains("all 3 goals are done"), "{summary}");
    let goals = std::fs::read_to_string(home.workspace.join("goals.md")).unwrap();
    let checked = goals
        .lines()
        .filter(|line| line.starts_with("- [x]"))
        .count();
    assert_eq!(checked, 3, "{goals}");
    let finished = status(&home, &id);
    assert_eq!(finished["running"], false);
    assert_eq!(finished["cycle"], 3);
    assert_eq!(finished["left"], 0);
    assert!(finished["tokensUsed"].as_u64().unwrap() > 0);
    assert_eq!(cycles_started(&home, &id), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_that_never_finishes_stops_at_its_cap() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    for _ in 0..5 {
        provider.reply(text("Still thinking about it."));
    }
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "solve everything"]);
    home.cli_ok(&["goal", &id, "on", "--cap", "3"]);
    let summary = wait_for_stop(&home, &id);
    assert!(summary.contains("3 cycles"), "{summary}");
    let stopped = status(&home, &id);
    assert_eq!(stopped["cycle"], 3);
    assert!(
        stopped["stopReason"].as_str().unwrap().contains("cap"),
        "{stopped}"
    );
    assert_eq!(provider.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_of_goals_md_during_the_loop_is_honoured() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    let goals_file = home.workspace.join("goals.md");
    let by_hand = goals_file.clone();
    provider.then(move |request| {
        // While cycle 1 runs, the user checks the third goal themselves and adds a note.
        let text = std::fs::read_to_string(&by_hand).unwrap();
        std::fs::write(
            &by_hand,
            format!(
                "{}\nA note of mine.\n",
                text.replace("- [ ] third", "- [x] third")
            ),
        )
        .unwrap();
        goal_worker(request)
    });
    for _ in 0..6 {
        provider.then(goal_worker);
    }
    let id = home.new_session("yolo");
    for goal in ["first", "second", "third"] {
        home.cli_ok(&["goal", &id, "add", goal]);
    }
    home.cli_ok(&["goal", &id, "on"]);
    let summary = wait_for_stop(&home, &id);
    assert!(summary.contains("all 3 goals are done"), "{summary}");
    assert_eq!(
        cycles_started(&home, &id),
        [1, 2],
        "the hand-checked goal was never worked on"
    );
    let goals = std::fs::read_to_string(&goals_file).unwrap();
    assert!(
        goals.contains("A note of mine."),
        "the hand edit is kept: {goals}"
    );
    let prompts: Vec<String> = provider
        .requests()
        .iter()
        .filter_map(|r| {
            r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|content| content.starts_with("[cwcode goal loop, cycle 2"))
        .collect();
    assert!(
        !prompts.is_empty() && !prompts[0].contains("third"),
        "{prompts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_resumes_after_a_daemon_restart_by_running_the_interrupted_cycle_again() {
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
    home.cli_ok(&["goal", &id, "on"]);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::GoalCycleStarted { cycle: 2, .. })
    });
    // Stop only once cycle 2's request holds the gated answer: stopped earlier, the restarted
    // loop's next request would take it and wait for ever.
    let started = std::time::Instant::now();
    while provider.requests().len() < 3 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "cycle 2 never asked the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(daemon.terminate().success());
    let suspended =
        std::fs::read_to_string(home.paths.session_dir(&id).join("goal_loop.json")).unwrap();
    assert!(suspended.contains("\"running\": true"), "{suspended}");

    let _daemon = home.start_daemon();
    let summary = wait_for_stop(&home, &id);
    assert!(summary.contains("all 3 goals are done"), "{summary}");
    let cycles = cycles_started(&home, &id);
    assert_eq!(cycles[..2], [1, 2]);
    assert_eq!(
        cycles[2..],
        [2, 3],
        "the interrupted cycle runs again under its number (goal_restart.rs has more): {cycles:?}"
    );
}
