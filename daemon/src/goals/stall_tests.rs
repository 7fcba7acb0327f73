//! Stalls and storms across cycles (`stall.rs`), with what the model tried.

use cwcode_protocol::{GoalState, TurnOutcome};

use crate::goals::state::tests::{goals, turn};
use crate::goals::{CallRecord, Decision, LoopState, StopReason, TurnSummary};

fn idle(answer: &str) -> TurnSummary {
    TurnSummary {
        files_changed: false,
        answer: answer.to_owned(),
        ..turn(TurnOutcome::Completed)
    }
}

fn failing(tool: &str, arguments: &str, output: &str) -> CallRecord {
    CallRecord {
        tool: tool.to_owned(),
        arguments: arguments.to_owned(),
        output: output.to_owned(),
        failed: true,
    }
}

#[test]
fn three_cycles_without_progress_stall_with_what_the_model_tried() {
    let mut state = LoopState::default();
    let open = goals(0, 2);
    state.start(&open, 0);
    assert_eq!(state.state(false), GoalState::Running);
    assert_eq!(state.state(true), GoalState::AwaitingApproval);
    assert_eq!(
        state.next(&open, &idle("Looking."), 0),
        Decision::Continue { cycle: 2 }
    );
    let read = TurnSummary {
        calls: vec![CallRecord {
            tool: "read_file".to_owned(),
            arguments: r#"{"path": "src/lib.rs"}"#.to_owned(),
            output: "1:abc fn main() {}".to_owned(),
            failed: false,
        }],
        ..idle("Still looking.")
    };
    assert_eq!(state.next(&open, &read, 0), Decision::Continue { cycle: 3 });
    assert_eq!(
        state.next(&open, &idle("I am not sure what to do."), 0),
        Decision::Stop(StopReason::Stalled)
    );
    assert_eq!(state.state(false), GoalState::Stalled);
    let explanation = state.explanation.clone().unwrap();
    assert!(explanation.contains("3 cycles in a row"), "{explanation}");
    assert!(
        explanation
            .contains(r#"cycle 2: called read_file {"path":"src/lib.rs"}; said "Still looking.""#),
        "{explanation}"
    );
    assert!(
        explanation.contains("Still open:\n- open 0\n- open 1\n"),
        "{explanation}"
    );
    assert!(
        state
            .summary(&open)
            .contains("3 cycles in a row checked no box and changed no file"),
        "{}",
        state.summary(&open)
    );
}

#[test]
fn a_checked_box_or_a_changed_file_is_progress_and_resets_the_stall_count() {
    let mut state = LoopState::default();
    state.start(&goals(0, 3), 0);
    state.next(&goals(0, 3), &idle(""), 0);
    state.next(&goals(0, 3), &idle(""), 0);
    // A box checked: progress.
    assert_eq!(
        state.next(&goals(1, 2), &idle(""), 0),
        Decision::Continue { cycle: 4 }
    );
    assert_eq!(state.idle_cycles, 0);
    state.next(&goals(1, 2), &idle(""), 0);
    state.next(&goals(1, 2), &idle(""), 0);
    // A file changed: progress too.
    let edited = TurnSummary {
        files_changed: true,
        ..idle("")
    };
    assert_eq!(
        state.next(&goals(1, 2), &edited, 0),
        Decision::Continue { cycle: 7 }
    );
    assert_eq!(state.idle_cycles, 0);
}

#[test]
fn the_same_failure_in_three_cycles_in_a_row_is_a_storm() {
    let mut state = LoopState::default();
    let open = goals(0, 1);
    state.start(&open, 0);
    let cycle = |arguments: &str| TurnSummary {
        files_changed: true,
        calls: vec![
            failing("bash", arguments, "make: *** No rule to make target"),
            failing("bash", arguments, "make: *** No rule to make target"),
        ],
        ..turn(TurnOutcome::Completed)
    };
    assert_eq!(
        state.next(&open, &cycle(r#"{"command":"make"}"#), 0),
        Decision::Continue { cycle: 2 }
    );
    // The same call, formatted differently, is the same call.
    assert_eq!(
        state.next(&open, &cycle(r#"{ "command": "make" }"#), 0),
        Decision::Continue { cycle: 3 }
    );
    assert_eq!(state.failing_calls[0].cycles, 2, "counted once per cycle");
    assert_eq!(
        state.next(&open, &cycle(r#"{"command":"make"}"#), 0),
        Decision::Stop(StopReason::StormBroken)
    );
    assert_eq!(state.state(false), GoalState::Storm);
    let explanation = state.explanation.clone().unwrap();
    assert!(
        explanation.contains("`bash` failed the same way in 3 cycles"),
        "{explanation}"
    );
    assert!(
        explanation.contains("No rule to make target"),
        "{explanation}"
    );

    // A different failure in between starts the count again.
    let mut other = LoopState::default();
    other.start(&open, 0);
    other.next(&open, &cycle(r#"{"command":"make"}"#), 0);
    other.next(&open, &cycle(r#"{"command":"make all"}"#), 0);
    assert_eq!(
        other.next(&open, &cycle(r#"{"command":"make"}"#), 0),
        Decision::Continue { cycle: 4 }
    );
}
