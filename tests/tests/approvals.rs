//! Approvals across a daemon restart: an "always" answer keeps its tool (or its pattern, such as
//! `touch *`) approved, and a request id is never handed out twice, so an answer meant for an old
//! request cannot land on a new one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use cwcode_protocol::{Event, EventKind, TurnOutcome};
use cwcode_tests::fake_provider::{FakeProvider, text, tool_calls};
use cwcode_tests::{Home, wait_for_event};
use serde_json::json;
use std::time::{Duration, Instant};

fn request_ids(journal: &[Event]) -> Vec<String> {
    journal
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ApprovalRequested { request_id, .. } => Some(request_id.clone()),
            _ => None,
        })
        .collect()
}

/// Polls the journal until an event after `seq` matches.
fn wait_after(home: &Home, session: &str, seq: u64, matches: impl Fn(&EventKind) -> bool) -> Event {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(event) = home
            .journal(session)
            .into_iter()
            .find(|event| event.seq > seq && matches(&event.kind))
        {
            return event;
        }
        assert!(Instant::now() < deadline, "the awaited event never came");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn last_seq(home: &Home, session: &str) -> u64 {
    home.journal(session).last().map_or(0, |event| event.seq)
}

fn finished(turn: u32) -> impl Fn(&EventKind) -> bool {
    move |kind| matches!(kind, EventKind::TurnFinished { turn: t, .. } if *t == turn)
}

fn bash(call_id: &str, file: &str) -> cwcode_tests::fake_provider::Reply {
    tool_calls(&[(
        call_id,
        "bash",
        json!({"command": format!("echo ran > {file}")}),
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_approved_bash_runs_without_asking_after_a_restart() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(bash("b1", "one.txt"))
        .reply(text("first done"))
        .reply(bash("b2", "two.txt"))
        .reply(text("second done"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "make one.txt"]);
    let asked = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let EventKind::ApprovalRequested { request_id, .. } = asked.kind else {
        unreachable!()
    };
    home.cli_ok(&["approve", &id, &request_id, "--always"]);
    wait_for_event(&home, &id, finished(1));
    assert!(home.workspace.join("one.txt").exists());
    assert!(daemon.terminate().success());

    let _daemon = home.start_daemon();
    let restarted = last_seq(&home, &id);
    home.cli_ok(&["send", &id, "make two.txt"]);
    // Whichever comes first: a second request (the bug) or the end of the turn.
    let first = wait_after(&home, &id, restarted, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. }) || finished(2)(kind)
    });
    assert!(
        matches!(
            first.kind,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Completed,
                ..
            }
        ),
        "the second bash call asked again after the restart: {first:?}"
    );
    assert!(
        home.workspace.join("two.txt").exists(),
        "the always-approved call ran"
    );
    assert_eq!(request_ids(&home.journal(&id)), [request_id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_pending_at_a_restart_never_has_its_id_reused() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(bash("b1", "one.txt"))
        .reply(text("first done"))
        .reply(bash("b2", "two.txt"))
        .reply(bash("b3", "three.txt"))
        .reply(text("third done"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "make one.txt"]);
    let first = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let EventKind::ApprovalRequested { request_id: r1, .. } = first.kind else {
        unreachable!()
    };
    home.cli_ok(&["approve", &id, &r1]);
    wait_for_event(&home, &id, finished(1));

    let second_turn = last_seq(&home, &id);
    home.cli_ok(&["send", &id, "make two.txt"]);
    wait_after(&home, &id, second_turn, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    daemon.crash();

    let _daemon = home.start_daemon();
    let restarted = last_seq(&home, &id);
    let before = request_ids(&home.journal(&id));
    assert_eq!(before.len(), 2, "{before:?}");
    home.cli_ok(&["send", &id, "make three.txt"]);
    let third = wait_after(&home, &id, restarted, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let EventKind::ApprovalRequested {
        request_id: r3,
        call_id,
        ..
    } = third.kind
    else {
        unreachable!()
    };
    assert_eq!(call_id, "b3");
    assert!(
        !before.contains(&r3),
        "{r3} was handed out again after the restart: {before:?}"
    );

    // The request left waiting at the crash is gone: answering it is refused, and the new one
    // still waits.
    let stale = home.cli(&["approve", &id, &before[1]]);
    assert!(
        !stale.status.success(),
        "an answer to a dead request was taken"
    );
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains(&before[1]),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );
    home.cli_ok(&["approve", &id, &r3]);
    wait_for_event(&home, &id, finished(3));
    assert!(home.workspace.join("three.txt").exists());
    assert!(!home.workspace.join("two.txt").exists());

    let ids = request_ids(&home.journal(&id));
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "a request id was reused: {ids:?}");
}

fn command(call_id: &str, command: &str) -> cwcode_tests::fake_provider::Reply {
    tool_calls(&[(call_id, "bash", json!({ "command": command }))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_for_a_pattern_approves_only_matching_commands_also_after_a_restart() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let daemon = home.start_daemon();
    provider
        .reply(command("t1", "touch one.txt"))
        .reply(command("t2", "touch two.txt"))
        .reply(command("m1", "mkdir made"))
        .reply(text("first done"))
        .reply(command("t3", "touch three.txt"))
        .reply(text("second done"));
    let id = home.new_session("code");
    home.cli_ok(&["send", &id, "make the files"]);
    let asked = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. })
    });
    let EventKind::ApprovalRequested {
        request_id,
        suggested_pattern,
        ..
    } = asked.kind
    else {
        unreachable!()
    };
    assert_eq!(suggested_pattern.as_deref(), Some("touch *"));
    let shown = home.cli_ok(&["events", &id]);
    assert!(
        shown.contains(&format!(
            "approve {id} {request_id} [--always [--pattern 'touch *']]"
        )),
        "{shown}"
    );
    home.cli_ok(&[
        "approve",
        &id,
        &request_id,
        "--always",
        "--pattern",
        "touch *",
    ]);
    // touch two.txt runs unasked; mkdir is not covered by the pattern and asks.
    let mkdir = wait_for_event(
        &home,
        &id,
        |kind| matches!(kind, EventKind::ApprovalRequested { call_id, .. } if call_id == "m1"),
    );
    assert!(home.workspace.join("two.txt").exists());
    let EventKind::ApprovalRequested {
        request_id: mkdir_request,
        ..
    } = mkdir.kind
    else {
        unreachable!()
    };
    home.cli_ok(&["deny", &id, &mkdir_request]);
    wait_for_event(&home, &id, finished(1));
    assert!(!home.workspace.join("made").exists());
    assert_eq!(request_ids(&home.journal(&id)).len(), 2);
    assert!(daemon.terminate().success());

    let _daemon = home.start_daemon();
    let restarted = last_seq(&home, &id);
    home.cli_ok(&["send", &id, "one more"]);
    let first = wait_after(&home, &id, restarted, |kind| {
        matches!(kind, EventKind::ApprovalRequested { .. }) || finished(2)(kind)
    });
    assert!(
        matches!(first.kind, EventKind::TurnFinished { .. }),
        "touch asked again after the restart: {first:?}"
    );
    assert!(home.workspace.join("three.txt").exists());

    // --pattern narrows an "always" answer: without --always the CLI says so.
    let refused = home.cli(&["approve", &id, "r9", "--pattern", "x"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--always"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
