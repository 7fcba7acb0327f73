//! Events folded and drawn, as the transcript shows them.

use cwcode_protocol::{EventKind, RewindResult};

use super::Transcript;
use super::render::RESULT_LINES;

fn texts(transcript: &mut Transcript, width: usize, expanded: bool) -> Vec<String> {
    let total = transcript.layout(width, expanded);
    transcript
        .rows(0, total)
        .iter()
        .map(|line| line.to_string().trim_end().to_owned())
        .collect()
}

fn delta(text: &str) -> EventKind {
    EventKind::AssistantDelta {
        text: text.to_owned(),
    }
}

#[test]
fn streamed_answers_and_reasoning_fold_into_entries() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::TurnStarted {
        turn: 1,
        prompt: "hi".into(),
    });
    transcript.apply(&EventKind::ReasoningDelta {
        text: "thinking\nmore".into(),
    });
    assert_eq!(
        texts(&mut transcript, 40, false),
        ["› hi", "✻ thinking", "  more"]
    );
    transcript.apply(&delta("Hello "));
    transcript.apply(&delta("there"));
    assert_eq!(
        texts(&mut transcript, 40, false),
        [
            "› hi",
            "✻ thought for 2 lines · ctrl+o to show",
            "",
            "Hello there"
        ]
    );
    assert_eq!(
        texts(&mut transcript, 40, true)[1..3],
        ["✻ thinking".to_owned(), "  more".to_owned()]
    );
}

#[test]
fn a_complete_message_without_deltas_still_shows() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::AssistantMessage {
        content: "whole".into(),
        reasoning: None,
        tool_calls: Vec::new(),
        usage: None,
        stats: None,
    });
    assert_eq!(texts(&mut transcript, 40, false), ["whole"]);
    // With deltas, the message adds nothing.
    transcript.apply(&delta("streamed"));
    transcript.apply(&EventKind::AssistantMessage {
        content: "streamed".into(),
        reasoning: None,
        tool_calls: Vec::new(),
        usage: None,
        stats: None,
    });
    assert_eq!(texts(&mut transcript, 40, false), ["whole", "", "streamed"]);
}

#[test]
fn a_restarted_stream_drops_the_partial_answer() {
    let mut transcript = Transcript::default();
    transcript.apply(&delta("half an ans"));
    transcript.apply(&EventKind::StreamRestarted {
        reason: "connection reset".into(),
    });
    transcript.apply(&delta("whole answer"));
    assert_eq!(
        texts(&mut transcript, 80, false),
        [
            "· the provider connection broke (connection reset); retrying",
            "",
            "whole answer"
        ]
    );
}

#[test]
fn a_retry_is_shown_with_its_wait_reason_and_count() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::ProviderRetrying {
        attempt: 2,
        max_attempts: 5,
        delay_ms: 4000,
        reason: "the provider sent nothing for 60 s".into(),
    });
    assert_eq!(
        texts(&mut transcript, 80, false),
        ["· retrying in 4 s: the provider sent nothing for 60 s (attempt 2 of 5)"]
    );
}

#[test]
fn long_tool_output_is_collapsed_until_expanded() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::ToolCallStarted {
        call_id: "c".into(),
        name: "bash".into(),
        arguments: r#"{"command":"seq 10"}"#.into(),
    });
    for n in 1..=10 {
        transcript.apply(&EventKind::ToolOutputDelta {
            call_id: "c".into(),
            text: format!("{n}\n"),
        });
    }
    assert_eq!(
        texts(&mut transcript, 40, false),
        [
            "○ bash seq 10",
            "  ⎿ … 5 lines above",
            "    6",
            "    7",
            "    8",
            "    9",
            "    10"
        ]
    );
    transcript.apply(&EventKind::ToolCallFinished {
        call_id: "c".into(),
        name: "bash".into(),
        output: (1..=10).map(|n| format!("{n}\n")).collect(),
        is_error: false,
    });
    let collapsed = texts(&mut transcript, 40, false);
    assert_eq!(collapsed.len(), 1 + RESULT_LINES + 1);
    assert_eq!(collapsed.last().unwrap(), "    … +4 lines · ctrl+o to show");
    assert_eq!(texts(&mut transcript, 40, true).len(), 1 + 1 + 10);
}

#[test]
fn a_queued_prompt_moves_to_where_its_turn_starts() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::TurnStarted {
        turn: 1,
        prompt: "first".into(),
    });
    transcript.apply(&EventKind::PromptQueued {
        turn: 2,
        prompt: "second".into(),
    });
    transcript.apply(&delta("answer one"));
    assert_eq!(
        texts(&mut transcript, 40, false),
        ["› first", "⋯ queued as turn 2: second", "", "answer one"]
    );
    transcript.apply(&EventKind::TurnStarted {
        turn: 2,
        prompt: "second".into(),
    });
    assert_eq!(
        texts(&mut transcript, 40, false),
        ["› first", "", "answer one", "", "› second"]
    );
}

#[test]
fn a_command_waiting_for_approval_is_shown_whole() {
    let mut transcript = Transcript::default();
    let arguments = serde_json::json!({"command": "cargo build &&\ncargo test"}).to_string();
    transcript.apply(&EventKind::ToolCallStarted {
        call_id: "c".into(),
        name: "bash".into(),
        arguments: arguments.clone(),
    });
    transcript.apply(&EventKind::ApprovalRequested {
        request_id: "r".into(),
        call_id: "c".into(),
        tool: "bash".into(),
        arguments,
        suggested_pattern: None,
    });
    assert_eq!(
        texts(&mut transcript, 60, false),
        [
            "? bash cargo build && … (+1 lines)",
            "  ⎿ command: cargo build &&",
            "      cargo test",
            "    waiting for your approval"
        ]
    );
}

#[test]
fn compaction_and_errors_outside_a_turn_are_said() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::Compacted {
        summary: "the user wants…".into(),
        kept_messages: 6,
        tokens_before: 120_000,
        tokens_after: 9_000,
    });
    transcript.apply(&EventKind::Error {
        message: "compaction failed: the provider timed out".into(),
    });
    assert_eq!(
        texts(&mut transcript, 100, false),
        [
            "· older turns were summarised to fit the context: 120k → 9.0k tokens, the last 6 messages kept",
            "· compaction failed: the provider timed out"
        ]
    );
}

#[test]
fn checkpoints_and_rewinds_are_a_line_each() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::CheckpointCreated {
        turn: 2,
        files: vec!["main.rs".into()],
    });
    let result = RewindResult {
        turn: 2,
        prompt: "change the greeting".into(),
        restored: vec!["main.rs".into()],
        removed: vec!["new.txt".into()],
        failed: vec!["locked.txt: permission denied".into()],
    };
    transcript.apply(&EventKind::Rewound {
        result: result.clone(),
    });
    transcript.apply(&EventKind::RewindUndone {
        result: RewindResult {
            failed: Vec::new(),
            ..result
        },
    });
    assert_eq!(
        texts(&mut transcript, 200, false),
        [
            "· checkpoint of prompt 2: main.rs · /rewind 2 puts it back",
            "· rewound to before prompt 2: restored main.rs; removed new.txt · /rewind undo reverts it",
            "· could not put back: locked.txt: permission denied",
            "· undid the rewind to before prompt 2: restored main.rs; removed new.txt",
        ]
    );
}

#[test]
fn the_goal_loop_says_each_cycle_and_how_it_ended() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::GoalCycleStarted { cycle: 2, cap: 20 });
    transcript.apply(&EventKind::GoalCycleFinished {
        cycle: 2,
        done: 3,
        left: 2,
    });
    transcript.apply(&EventKind::GoalLoopStopped {
        reason: "the cap of 2 cycles was reached".into(),
        summary:
            "Goal loop stopped after 2 cycles: the cap of 2 cycles was reached. 3 of 5 goals done."
                .into(),
        state: cwcode_protocol::GoalState::Capped,
    });
    transcript.apply(&EventKind::GoalLoopStopped {
        reason: "stopped by the user".into(),
        summary: String::new(),
        state: cwcode_protocol::GoalState::Stopped,
    });
    assert_eq!(
        texts(&mut transcript, 200, false),
        [
            "· goal loop: cycle 2 of at most 20 starts on the open goals",
            "· goal loop: cycle 2 ended · 3 of 5 goals done",
            "· Goal loop stopped after 2 cycles: the cap of 2 cycles was reached. 3 of 5 goals done.",
            "· goal loop stopped: stopped by the user",
        ]
    );
}

#[test]
fn a_cycle_a_restart_interrupted_says_it_starts_again() {
    let mut transcript = Transcript::default();
    transcript.apply(&EventKind::GoalCycleStarted { cycle: 7, cap: 9 });
    transcript.apply(&EventKind::GoalCycleStarted { cycle: 7, cap: 9 });
    transcript.apply(&EventKind::GoalCycleFinished {
        cycle: 7,
        done: 1,
        left: 1,
    });
    transcript.apply(&EventKind::GoalCycleStarted { cycle: 8, cap: 9 });
    assert_eq!(
        texts(&mut transcript, 200, false),
        [
            "· goal loop: cycle 7 of at most 9 starts on the open goals",
            "· goal loop: cycle 7 of at most 9 starts again: the daemon stopped during it",
            "· goal loop: cycle 7 ended · 1 of 2 goals done",
            "· goal loop: cycle 8 of at most 9 starts on the open goals",
        ]
    );
}

#[test]
fn a_long_prompt_such_as_one_with_an_attached_file_is_folded() {
    let mut transcript = Transcript::default();
    let file: String = (1..=30).map(|n| format!("\nline {n}")).collect();
    transcript.apply(&EventKind::TurnStarted {
        turn: 1,
        prompt: format!("look at @notes.txt{file}"),
    });
    let collapsed = texts(&mut transcript, 40, false);
    assert_eq!(collapsed.len(), 12 + 1);
    assert_eq!(collapsed[0], "› look at @notes.txt");
    assert_eq!(collapsed.last().unwrap(), "  … +19 lines · ctrl+o to show");
    assert_eq!(texts(&mut transcript, 40, true).len(), 31);
}
