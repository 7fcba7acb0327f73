//! The goal loop's state machine (`state.rs`), cycle by cycle: progress, the cap, stops by
//! the user or a failed turn, the saved file, and what a restart resumes.

use cwcode_protocol::{GoalState, TurnOutcome, Usage};

use super::*;
use crate::goals::GoalList;

pub(in crate::goals) fn turn(outcome: TurnOutcome) -> TurnSummary {
    TurnSummary {
        outcome,
        usage: Usage {
            prompt_tokens: 1000,
            completion_tokens: 200,
            cached_tokens: 800,
        },
        cost: 0.01,
        error: None,
        files_changed: true,
        calls: Vec::new(),
        answer: String::new(),
    }
}

pub(in crate::goals) fn goals(done: usize, left: usize) -> GoalList {
    let mut text = String::from("# Goals\n");
    for index in 0..done {
        text.push_str(&format!("- [x] done {index}\n"));
    }
    for index in 0..left {
        text.push_str(&format!("- [ ] open {index}\n"));
    }
    GoalList::parse(&text)
}

#[test]
fn a_loop_continues_cycle_by_cycle_and_stops_when_every_box_is_checked() {
    let mut state = LoopState::default();
    assert_eq!(state.cap, 20);
    assert_eq!(
        state.start(&goals(0, 3), 0),
        Decision::Continue { cycle: 1 }
    );
    let completed = turn(TurnOutcome::Completed);
    assert_eq!(
        state.next(&goals(1, 2), &completed, 0),
        Decision::Continue { cycle: 2 }
    );
    assert_eq!(
        state.next(&goals(2, 1), &completed, 0),
        Decision::Continue { cycle: 3 }
    );
    assert_eq!(
        state.next(&goals(3, 0), &completed, 0),
        Decision::Stop(StopReason::AllDone)
    );
    assert!(!state.running);
    assert_eq!(state.cycle, 3);
    assert_eq!(state.tokens_used, 3 * 1200);
    assert!((state.cost_used - 0.03).abs() < 1e-9);
    assert_eq!(state.stop_reason, Some(StopReason::AllDone));
}

#[test]
fn a_loop_with_nothing_left_stops_before_its_first_cycle() {
    let mut state = LoopState::default();
    assert_eq!(
        state.start(&goals(2, 0), 0),
        Decision::Stop(StopReason::AllDone)
    );
    assert_eq!(state.cycle, 0);
    assert_eq!(
        state.start(&goals(0, 0), 0),
        Decision::Stop(StopReason::AllDone)
    );
    assert!(state.summary(&goals(0, 0)).contains("lists no goals"));
}

#[test]
fn a_loop_that_never_finishes_stops_at_the_cap() {
    let mut state = LoopState {
        cap: 3,
        ..LoopState::default()
    };
    let open = goals(0, 2);
    let completed = turn(TurnOutcome::Completed);
    assert_eq!(state.start(&open, 0), Decision::Continue { cycle: 1 });
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Continue { cycle: 2 }
    );
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Continue { cycle: 3 }
    );
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Stop(StopReason::CapReached)
    );
    assert_eq!(state.cycle, 3);
    let summary = state.summary(&open);
    assert!(
        summary.starts_with("Goal loop stopped after 3 cycles: it reached its cap of 3 cycles. 0 of 2 goals done. Left:\n- open 0\n- open 1\n"),
        "{summary}"
    );
}

#[test]
fn the_last_cycle_checking_the_last_box_is_all_done_not_the_cap() {
    let mut state = LoopState {
        cap: 1,
        ..LoopState::default()
    };
    state.start(&goals(0, 1), 0);
    assert_eq!(
        state.next(&goals(1, 0), &turn(TurnOutcome::Completed), 0),
        Decision::Stop(StopReason::AllDone)
    );
}

#[test]
fn the_storm_breaker_stops_the_loop() {
    let mut state = LoopState::default();
    state.start(&goals(0, 1), 0);
    assert_eq!(
        state.next(&goals(0, 1), &turn(TurnOutcome::StormBroken), 0),
        Decision::Stop(StopReason::StormBroken)
    );
    assert!(state.summary(&goals(0, 1)).contains("storm-breaker"));
}

#[test]
fn a_tiny_cost_is_not_shown_as_free() {
    let state = LoopState {
        cost_used: 0.0012,
        stop_reason: Some(StopReason::StoppedByUser),
        ..LoopState::default()
    };
    assert!(state.summary(&goals(0, 0)).ends_with("($0.0012)."));
}

#[test]
fn goal_off_during_a_turn_stops_with_the_users_reason() {
    let mut state = LoopState::default();
    let open = goals(0, 1);
    state.start(&open, 0);
    assert!(state.stop(StopReason::StoppedByUser));
    assert!(!state.stop(StopReason::StoppedByUser), "already stopped");
    // The cancelled turn still reports, and its tokens still count.
    assert_eq!(
        state.next(&open, &turn(TurnOutcome::Cancelled), 0),
        Decision::Stop(StopReason::StoppedByUser)
    );
    assert_eq!(state.tokens_used, 1200);
    assert!(state.summary(&open).contains("the user stopped it"));
}

#[test]
fn cancelling_the_loops_turn_stops_the_loop() {
    let mut state = LoopState::default();
    state.start(&goals(0, 1), 0);
    assert_eq!(
        state.next(&goals(0, 1), &turn(TurnOutcome::Cancelled), 0),
        Decision::Stop(StopReason::StoppedByUser)
    );
}

#[test]
fn a_failed_turn_stops_the_loop_with_its_error() {
    let mut state = LoopState::default();
    state.start(&goals(0, 1), 0);
    let failed = TurnSummary {
        error: Some("provider answered 401: invalid key".to_owned()),
        ..turn(TurnOutcome::Failed)
    };
    let reason = StopReason::TurnFailed("provider answered 401: invalid key".to_owned());
    assert_eq!(
        state.next(&goals(0, 1), &failed, 0),
        Decision::Stop(reason.clone())
    );
    assert!(
        state
            .summary(&goals(0, 1))
            .contains("a turn failed: provider answered 401: invalid key")
    );
    let mut other = LoopState::default();
    other.start(&goals(0, 1), 0);
    assert!(matches!(
        other.next(&goals(0, 1), &turn(TurnOutcome::Failed), 0),
        Decision::Stop(StopReason::TurnFailed(error)) if !error.is_empty()
    ));
}

#[test]
fn a_cycle_interrupted_by_a_daemon_stop_runs_again_under_its_number_with_counts_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let open = goals(1, 2);
    let mut state = LoopState {
        cap: 5,
        token_budget: Some(1_000_000),
        ..LoopState::default()
    };
    state.start(&open, 0);
    state.next(&open, &turn(TurnOutcome::Completed), 0);
    state.save(&path).unwrap();

    // SIGTERM during cycle 2: the turn ends interrupted, and its tokens count.
    let mut state = LoopState::load(&path).unwrap();
    assert_eq!(
        state.next(&open, &turn(TurnOutcome::Interrupted), 0),
        Decision::Suspend
    );
    assert!(state.running);
    state.save(&path).unwrap();

    let mut restarted = LoopState::load(&path).unwrap();
    assert_eq!(restarted, state);
    assert_eq!(
        restarted.resume(&open, 0),
        Some(Decision::Continue { cycle: 2 })
    );
    assert_eq!(restarted.tokens_used, 2400);
    assert_eq!(restarted.token_budget, Some(1_000_000));
    // Once it finishes, the loop goes on at the next cycle, up to the cap counting cycle 2 once.
    for cycle in 3..=5 {
        assert_eq!(
            restarted.next(&open, &turn(TurnOutcome::Completed), 0),
            Decision::Continue { cycle }
        );
    }
    assert_eq!(
        restarted.next(&open, &turn(TurnOutcome::Completed), 0),
        Decision::Stop(StopReason::CapReached)
    );
    assert_eq!(
        restarted.resume(&open, 0),
        None,
        "a stopped loop is not resumed"
    );
}

#[test]
fn a_stop_between_two_cycles_resumes_the_cycle_decided_on_not_the_one_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let open = goals(0, 1);
    let mut state = LoopState {
        cap: 200,
        ..LoopState::default()
    };
    state.start(&open, 0);
    // Cycle 1 finished and cycle 2 was decided and saved; the daemon stopped before it started.
    assert_eq!(
        state.next(&open, &turn(TurnOutcome::Completed), 0),
        Decision::Continue { cycle: 2 }
    );
    state.save(&path).unwrap();
    let mut restarted = LoopState::load(&path).unwrap();
    assert_eq!(
        restarted.resume(&open, 0),
        Some(Decision::Continue { cycle: 2 })
    );
}

#[test]
fn a_cycle_that_keeps_bringing_the_daemon_down_counts_as_spent_after_a_few_restarts() {
    let open = goals(0, 1);
    let mut state = LoopState {
        cap: 3,
        ..LoopState::default()
    };
    state.start(&open, 0);
    state.next(&open, &turn(TurnOutcome::Completed), 0);
    // kill -9 during cycle 2, again and again: nothing is reported between the restarts.
    for _ in 0..MAX_RESUMES {
        assert_eq!(
            state.resume(&open, 0),
            Some(Decision::Continue { cycle: 2 })
        );
    }
    assert_eq!(
        state.resume(&open, 0),
        Some(Decision::Continue { cycle: 3 })
    );
    assert_eq!(state.resumes, 0, "cycle 3 has its own restarts");
    for _ in 0..MAX_RESUMES {
        state.resume(&open, 0);
    }
    assert_eq!(
        state.resume(&open, 0),
        Some(Decision::Stop(StopReason::CapReached))
    );
}

#[test]
fn a_wall_clock_budget_spent_while_the_daemon_was_down_ends_the_loop_on_resume() {
    let hour = 3_600_000;
    let mut state = LoopState {
        hours_budget: Some(1.0),
        ..LoopState::default()
    };
    state.start(&goals(0, 1), 0);
    assert_eq!(
        state.resume(&goals(0, 1), 2 * hour),
        Some(Decision::Stop(StopReason::BudgetSpent))
    );
}

#[test]
fn goals_checked_while_the_daemon_was_down_finish_the_loop_on_resume() {
    let mut state = LoopState::default();
    state.start(&goals(0, 1), 0);
    assert_eq!(
        state.resume(&goals(1, 0), 0),
        Some(Decision::Stop(StopReason::AllDone))
    );
}

#[test]
fn a_missing_file_is_a_loop_that_never_ran_and_every_reason_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    assert_eq!(LoopState::load(&path).unwrap(), LoopState::default());
    for reason in [
        StopReason::AllDone,
        StopReason::CapReached,
        StopReason::StormBroken,
        StopReason::BudgetSpent,
        StopReason::StoppedByUser,
        StopReason::TurnFailed("boom".to_owned()),
    ] {
        let state = LoopState {
            cycle: 7,
            cost_used: 0.125,
            stop_reason: Some(reason),
            ..LoopState::default()
        };
        state.save(&path).unwrap();
        assert_eq!(LoopState::load(&path).unwrap(), state);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(r#""stopReason": {"#) && text.contains(r#""reason": "turn_failed""#),
        "{text}"
    );
}

#[test]
fn a_hand_trimmed_or_damaged_file_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, r#"{"running": true, "cycle": 4}"#).unwrap();
    let state = LoopState::load(&path).unwrap();
    assert!(state.running);
    assert_eq!((state.cycle, state.cap), (4, DEFAULT_CAP));
    std::fs::write(&path, "{not json").unwrap();
    let error = LoopState::load(&path).unwrap_err();
    assert!(error.to_string().contains("move it aside"), "{error}");
}

#[test]
fn every_stop_reason_has_its_state_and_a_running_loop_its_own() {
    let cases = [
        (StopReason::AllDone, GoalState::Complete),
        (StopReason::CapReached, GoalState::Capped),
        (StopReason::BudgetSpent, GoalState::BudgetExhausted),
        (StopReason::Stalled, GoalState::Stalled),
        (StopReason::StormBroken, GoalState::Storm),
        (StopReason::StoppedByUser, GoalState::Stopped),
        (StopReason::TurnFailed("x".to_owned()), GoalState::Failed),
    ];
    for (reason, expected) in cases {
        assert_eq!(reason.state(), expected);
        assert!(expected.is_final());
    }
    assert_eq!(LoopState::default().state(false), GoalState::Idle);
}
