//! The loop's budgets (`budget.rs`): tokens, cost and wall-clock hours stop it once spent.

use cwcode_protocol::{GoalState, TurnOutcome};

use crate::goals::state::tests::{goals, turn};
use crate::goals::{Decision, LoopState, StopReason, TurnSummary};

#[test]
fn a_token_budget_stops_the_loop_once_spent() {
    let mut state = LoopState {
        token_budget: Some(2000),
        ..LoopState::default()
    };
    let open = goals(0, 1);
    state.start(&open, 0);
    let completed = turn(TurnOutcome::Completed);
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Continue { cycle: 2 }
    );
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Stop(StopReason::BudgetSpent)
    );
    assert_eq!(state.tokens_used, 2400);
    assert!(
        state
            .summary(&open)
            .contains("its budget of 2000 tokens is spent")
    );
}

#[test]
fn a_cost_budget_stops_the_loop_once_spent() {
    let mut state = LoopState {
        cost_budget: Some(0.05),
        ..LoopState::default()
    };
    let open = goals(0, 1);
    state.start(&open, 0);
    let completed = TurnSummary {
        cost: 0.03,
        ..turn(TurnOutcome::Completed)
    };
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Continue { cycle: 2 }
    );
    assert_eq!(
        state.next(&open, &completed, 0),
        Decision::Stop(StopReason::BudgetSpent)
    );
    let summary = state.summary(&open);
    assert!(
        summary.contains("its budget of $0.05 is spent"),
        "{summary}"
    );
    assert!(summary.ends_with("Used 2400 tokens ($0.06)."), "{summary}");
}

#[test]
fn a_nonsensical_cost_is_not_counted() {
    let mut state = LoopState::default();
    state.start(&goals(0, 1), 0);
    let odd = TurnSummary {
        cost: f64::NAN,
        ..turn(TurnOutcome::Completed)
    };
    state.next(&goals(0, 1), &odd, 0);
    assert_eq!(state.cost_used, 0.0);
}

#[test]
fn a_wall_clock_budget_stops_between_cycles_and_ends_a_cancelled_turn_as_spent() {
    let hour = 3_600_000;
    let mut state = LoopState {
        hours_budget: Some(1.0),
        ..LoopState::default()
    };
    let open = goals(0, 1);
    state.start(&open, 10 * hour);
    assert_eq!(state.deadline_ms(), Some(11 * hour));
    assert_eq!(state.ms_left(10 * hour + 1000), Some(hour - 1000));
    assert_eq!(
        state.next(&open, &turn(TurnOutcome::Completed), 10 * hour + 5),
        Decision::Continue { cycle: 2 }
    );
    assert_eq!(
        state.next(&open, &turn(TurnOutcome::Completed), 11 * hour),
        Decision::Stop(StopReason::BudgetSpent)
    );
    assert_eq!(state.state(false), GoalState::BudgetExhausted);
    assert!(
        state.summary(&open).contains("wall-clock budget of 1 h"),
        "{}",
        state.summary(&open)
    );
    assert_eq!(
        state.elapsed_ms(20 * hour),
        hour,
        "the clock stops with the loop"
    );

    // The watchdog cancels a turn that outlives the budget: that is no user's stop.
    let mut cancelled = LoopState {
        hours_budget: Some(1.0),
        ..LoopState::default()
    };
    cancelled.start(&open, 0);
    assert_eq!(
        cancelled.next(&open, &turn(TurnOutcome::Cancelled), hour),
        Decision::Stop(StopReason::BudgetSpent)
    );
    let mut by_user = LoopState {
        hours_budget: Some(1.0),
        ..LoopState::default()
    };
    by_user.start(&open, 0);
    assert_eq!(
        by_user.next(&open, &turn(TurnOutcome::Cancelled), hour - 1),
        Decision::Stop(StopReason::StoppedByUser)
    );
}

#[test]
fn tokens_and_cost_left_are_what_the_budget_has_not_used() {
    let state = LoopState {
        token_budget: Some(1000),
        cost_budget: Some(1.0),
        tokens_used: 1200,
        cost_used: 0.25,
        ..LoopState::default()
    };
    assert_eq!(state.tokens_left(), Some(0));
    assert_eq!(state.cost_left(), Some(0.75));
    assert_eq!(LoopState::default().tokens_left(), None);
}
