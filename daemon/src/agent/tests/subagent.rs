//! `task`'s sub-agent run by the same loop: its own context, its events nested under the
//! parent's call, only its answer in the parent's history, its request budget, the parent's
//! cancel and approvals.

use super::*;
use crate::agent::subagent::DEFAULT_REQUEST_BUDGET;

fn task(id: &str, prompt: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "task".to_owned(),
        arguments: serde_json::json!({ "description": "look around", "prompt": prompt })
            .to_string(),
    }
}

fn write_file(id: &str, path: &str, content: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "write_file".to_owned(),
        arguments: serde_json::json!({ "path": path, "content": content }).to_string(),
    }
}

/// The parent's own result for its call `call_id`.
fn parent_result(harness: &Harness, call_id: &str) -> (String, bool) {
    harness
        .events()
        .into_iter()
        .find_map(|event| match event.kind {
            EventKind::ToolCallFinished {
                call_id: id,
                output,
                is_error,
                ..
            } if id == call_id && event.parent_call_id.is_none() => Some((output, is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the parent's {call_id} has no result"))
}

#[tokio::test]
async fn a_sub_agent_reads_files_in_its_own_context_and_only_its_answer_returns() {
    let mut harness = Harness::new(Mode::Code);
    std::fs::write(harness.dir.path().join("notes.txt"), "secret-number 4711\n").unwrap();
    harness
        .model
        .call(vec![task("t1", "What number does notes.txt hold?")]);
    harness.model.call(vec![read_file("s1", "notes.txt")]);
    harness.model.answer("notes.txt holds 4711.");
    harness.model.answer("The number is 4711.");

    let report = harness.turn(1, "find the number").await;

    assert_eq!(report.outcome, TurnOutcome::Completed);
    let sent = harness.model.sent();
    assert_eq!(sent.len(), 4);
    // The sub-agent starts from its own short prompt and the task, nothing of the parent's.
    assert_eq!(sent[1].messages.len(), 2, "{:#?}", sent[1].messages);
    assert!(matches!(&sent[1].messages[0], Message::System { content } if content != SYSTEM));
    assert!(
        matches!(&sent[1].messages[1], Message::User { content } if content == "What number does notes.txt hold?")
    );
    // The parent's next request holds the answer as the result, and not what the sub-agent read.
    assert_eq!(tool_message(&sent[3], "t1"), "notes.txt holds 4711.");
    assert_eq!(sent[3].messages.len(), 4, "{:#?}", sent[3].messages);
    assert!(!format!("{:?}", sent[3].messages).contains("secret-number"));
    // The sub-agent's events are journalled under the parent's call.
    let nested: Vec<Event> = harness
        .events()
        .into_iter()
        .filter(|event| event.parent_call_id.as_deref() == Some("t1"))
        .collect();
    assert!(nested.iter().any(|event| matches!(
        &event.kind,
        EventKind::ToolCallFinished { name, output, .. } if name == "read_file" && output.contains("secret-number")
    )));
    assert!(nested.iter().any(|event| matches!(
        &event.kind,
        EventKind::AssistantMessage { content, .. } if content == "notes.txt holds 4711."
    )));
    assert!(!nested.iter().any(|event| matches!(
        event.kind,
        EventKind::TurnStarted { .. } | EventKind::TurnFinished { .. }
    )));
    harness.assert_consistent();
}

#[tokio::test]
async fn a_sub_agent_stops_at_its_request_budget_and_says_so() {
    let mut harness = Harness::new(Mode::Code);
    std::fs::write(harness.dir.path().join("a.txt"), "a\n").unwrap();
    harness.model.call(vec![task("t1", "read a.txt forever")]);
    harness.model.push(Step::Answer {
        text: "a.txt holds one line so far".to_owned(),
        calls: vec![read_file("s0", "a.txt")],
    });
    for round in 1..DEFAULT_REQUEST_BUDGET {
        harness
            .model
            .call(vec![read_file(&format!("s{round}"), "a.txt")]);
    }
    harness.model.answer("it would not stop");

    let report = harness.turn(1, "look").await;

    assert_eq!(report.outcome, TurnOutcome::Completed);
    let sent = harness.model.sent();
    // The parent's two requests and the sub-agent's budget, no more.
    assert_eq!(sent.len(), 2 + DEFAULT_REQUEST_BUDGET as usize);
    let (result, is_error) = parent_result(&harness, "t1");
    assert!(!is_error, "{result}");
    assert!(
        result.starts_with("a.txt holds one line so far"),
        "{result}"
    );
    assert!(
        result.contains(&format!(
            "stopped after {DEFAULT_REQUEST_BUDGET} model requests, its budget"
        )),
        "{result}"
    );
    assert_eq!(tool_message(sent.last().unwrap(), "t1"), result);
    harness.assert_consistent();
}

#[tokio::test]
async fn cancelling_the_turn_stops_the_sub_agent_mid_stream() {
    let mut harness = Harness::new(Mode::Code);
    let reached = Arc::new(Notify::new());
    harness.model.call(vec![task("t1", "think hard")]);
    harness.model.push(Step::Hang {
        text: "thinking".to_owned(),
        reached: Arc::clone(&reached),
    });
    let cancel = harness.cancel.clone();

    let report = harness
        .turn_with(1, "go", async {
            reached.notified().await;
            cancel.cancel();
        })
        .await;

    assert_eq!(report.outcome, TurnOutcome::Cancelled);
    let (result, is_error) = parent_result(&harness, "t1");
    assert!(is_error);
    assert!(result.contains("stopped before it answered"), "{result}");
    assert_eq!(harness.model.sent().len(), 2);
    harness.assert_consistent();
}

#[tokio::test]
async fn a_mutating_call_of_a_sub_agent_asks_the_sessions_approval_in_code_mode() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.call(vec![task("t1", "write made.txt")]);
    harness.model.call(vec![write_file(
        "s1",
        "made.txt",
        "made by the sub-agent\n",
    )]);
    harness.model.answer("wrote made.txt");
    harness.model.answer("done");
    let log = Arc::clone(&harness.env.log);
    let approvals = Arc::clone(&harness.approvals);

    let report = harness
        .turn_with(1, "make a file", async {
            let request = approval_request(&log, 0).await;
            assert!(
                !harness_file_exists(&log, "made.txt"),
                "nothing is written before the approval"
            );
            approvals.resolve(
                &request,
                Answer {
                    decision: ApprovalDecision::Approve,
                    reason: None,
                    pattern: None,
                },
            );
        })
        .await;

    assert_eq!(report.outcome, TurnOutcome::Completed);
    let asked: Vec<Event> = harness
        .events()
        .into_iter()
        .filter(|event| matches!(&event.kind, EventKind::ApprovalRequested { tool, .. } if tool == "write_file"))
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].parent_call_id.as_deref(), Some("t1"));
    assert_eq!(
        std::fs::read_to_string(harness.dir.path().join("made.txt")).unwrap(),
        "made by the sub-agent\n"
    );
    assert_eq!(parent_result(&harness, "t1").0, "wrote made.txt");
    harness.assert_consistent();
}

#[tokio::test]
async fn in_plan_mode_the_sub_agent_gets_read_only_tools() {
    let mut harness = Harness::new(Mode::Plan);
    harness.model.call(vec![task("t1", "change things")]);
    harness
        .model
        .call(vec![write_file("s1", "made.txt", "no\n")]);
    harness.model.answer("I could not write");
    harness.model.answer("planned");

    let report = harness.turn(1, "plan it").await;

    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert!(!harness.dir.path().join("made.txt").exists());
    assert_eq!(harness.approvals.pending(), 0);
    let sent = harness.model.sent();
    assert!(
        matches!(&sent[1].messages[1], Message::User { content } if content.contains("Only read-only tools"))
    );
    harness.assert_consistent();
}

/// Whether the workspace of the journal at `log` holds `name`: the journal sits in it.
fn harness_file_exists(log: &EventLog, name: &str) -> bool {
    log.dir().is_some_and(|dir| dir.join(name).exists())
}
