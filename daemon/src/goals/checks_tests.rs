//! Verified goals (`checks.rs`): complete only once their check passed.

use cwcode_protocol::GoalState;

use crate::goals::{CheckFailure, Decision, GoalList, LoopState, StopReason};

#[test]
fn a_verified_goal_is_complete_only_once_its_check_passed() {
    let checked = GoalList::parse("- [x] the tests pass (verify: cargo test -q)\n- [x] plain\n");
    let mut state = LoopState::default();
    assert_eq!(state.start(&checked, 0), Decision::Continue { cycle: 1 });
    let pending: Vec<&str> = state
        .pending_checks(&checked)
        .iter()
        .map(|goal| goal.text.as_str())
        .collect();
    assert_eq!(pending, ["the tests pass (verify: cargo test -q)"]);
    assert_eq!(state.before_turn(&checked, 0), None);

    state.check_failed(CheckFailure {
        goal: "the tests pass (verify: cargo test -q)".to_owned(),
        command: "cargo test -q".to_owned(),
        output: "test foo ... FAILED".to_owned(),
    });
    assert_eq!(state.failed_checks.len(), 1);
    state.check_passed("the tests pass (verify: cargo test -q)");
    assert!(state.is_complete(&checked));
    // Nothing left before the turn: done without spending it, and the cycle is not counted.
    assert_eq!(
        state.before_turn(&checked, 0),
        Some(Decision::Stop(StopReason::AllDone))
    );
    assert_eq!(state.cycle, 0);
    assert_eq!(state.state(false), GoalState::Complete);
}
