//! `bash_background` with real processes: start, output, list and kill, the escalation to
//! SIGKILL, the table limit, secrets kept out, the confinement and the bounded output buffer.

use std::path::Path;

use super::*;
use crate::sandbox::isolation::{Namespaces, namespaces};
use crate::sandbox::process::tests::wait_until_gone;
use crate::sandbox::tests::{landlock_enforced, outside_temp_dirs};
use crate::tools::{Registry, test_context};

fn start(command: &str) -> BashBackgroundArgs {
    BashBackgroundArgs {
        action: Action::Start,
        command: Some(command.to_owned()),
        id: None,
    }
}

fn with_id(action: Action, id: u32) -> BashBackgroundArgs {
    BashBackgroundArgs {
        action,
        command: None,
        id: Some(id),
    }
}

fn list() -> BashBackgroundArgs {
    BashBackgroundArgs {
        action: Action::List,
        command: None,
        id: None,
    }
}

/// Reads output until what was seen (starting with what `start` returned) contains `wanted`,
/// or gives up after five seconds; returns all of it.
#[allow(clippy::unwrap_used)]
async fn read_until(context: &ToolContext, id: u32, seen: String, wanted: &str) -> String {
    let mut seen = seen;
    for _ in 0..100 {
        if seen.contains(wanted) {
            break;
        }
        let output = BashBackground
            .call(with_id(Action::Output, id), context)
            .await
            .unwrap();
        seen.push_str(&output);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

/// The number after `pid=` in a command's output.
fn printed_pid(text: &str) -> i32 {
    // The last one: the first is in the command shown in the status line.
    text.rsplit("pid=")
        .next()
        .and_then(|rest| rest.lines().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid= in {text}"))
}

#[tokio::test]
async fn start_output_list_and_kill() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());

    let started = BashBackground
        .call(
            start("echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; sleep 100"),
            &context,
        )
        .await
        .unwrap();
    assert!(
        started.starts_with(
            "started background process 1; action=output id=1 reads its new output, \
             action=kill id=1 stops it.\n[1] running (pid "
        ),
        "{started}"
    );
    assert!(
        started.ends_with(
            ": echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; sleep 100\nfirst\n"
        ),
        "{started}"
    );

    let nothing_new = BashBackground
        .call(with_id(Action::Output, 1), &context)
        .await
        .unwrap();
    assert!(nothing_new.ends_with("\n(no new output)"), "{nothing_new}");

    std::fs::write(dir.path().join("go"), "").unwrap();
    let later = read_until(&context, 1, String::new(), "\nsecond\n").await;
    assert!(later.contains("\nsecond\n"), "{later}");
    assert!(!later.contains("\nfirst\n"), "{later}");

    let listed = BashBackground.call(list(), &context).await.unwrap();
    assert!(listed.starts_with("[1] running (pid "), "{listed}");
    assert!(listed.ends_with("(0 bytes unread)"), "{listed}");

    let killed = BashBackground
        .call(with_id(Action::Kill, 1), &context)
        .await
        .unwrap();
    assert!(
        killed.starts_with("killed: [1] exited (killed by signal 15 (SIGTERM)): echo first;"),
        "{killed}"
    );
    assert!(killed.ends_with("\n(no new output)"), "{killed}");

    assert_eq!(
        BashBackground.call(list(), &context).await.unwrap(),
        "no background processes"
    );
    let error = BashBackground
        .call(with_id(Action::Output, 1), &context)
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "there is no background process 1: none is running (start one with action=start)"
    );
}

#[tokio::test]
async fn a_command_that_ends_at_once_says_how_in_the_start_result() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let started = BashBackground
        .call(start("echo oops >&2; exit 3"), &context)
        .await
        .unwrap();
    assert!(
        started.ends_with("\n[1] exited (exit code 3): echo oops >&2; exit 3\noops\n"),
        "{started}"
    );
    // Ids are not reused.
    let second = BashBackground.call(start("true"), &context).await.unwrap();
    assert!(
        second.contains("\n[2] exited (exit code 0): true\n"),
        "{second}"
    );
    let listed = BashBackground.call(list(), &context).await.unwrap();
    assert_eq!(
        listed,
        "[1] exited (exit code 3): echo oops >&2; exit 3 (0 bytes unread)\n[2] exited (exit \
         code 0): true (0 bytes unread)"
    );
}

#[tokio::test]
async fn kill_escalates_to_sigkill_for_a_command_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let started = BashBackground
        .call(
            start("trap '' TERM; sleep 100 & echo pid=$!; wait"),
            &context,
        )
        .await
        .unwrap();
    let sleeper = printed_pid(&read_until(&context, 1, started, "pid=").await);

    let started = std::time::Instant::now();
    let killed = BashBackground
        .call(with_id(Action::Kill, 1), &context)
        .await
        .unwrap();

    assert!(killed.starts_with("killed: [1] exited"), "{killed}");
    // The sleeper inherited the ignored SIGTERM: only the SIGKILL after the grace ends it.
    assert!(wait_until_gone(sleeper).await);
    if !matches!(namespaces(), Namespaces::Bubblewrap { .. }) {
        // Without bubblewrap in front of it, the shell itself outlives the SIGTERM.
        assert!(started.elapsed() >= TERM_GRACE, "{:?}", started.elapsed());
        assert!(killed.contains("SIGKILL"), "{killed}");
    }
}

#[tokio::test]
async fn dropping_the_table_kills_every_group() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let mut pids = Vec::new();
    for id in 1..=2 {
        let started = BashBackground
            .call(start("sleep 100 & echo pid=$!; wait"), &context)
            .await
            .unwrap();
        pids.push(printed_pid(
            &read_until(&context, id, started, "pid=").await,
        ));
    }

    drop(context);

    for pid in pids {
        assert!(wait_until_gone(pid).await, "{pid} survived");
    }
}

#[tokio::test]
async fn kill_all_kills_and_forgets_them() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let started = BashBackground
        .call(start("sleep 100"), &context)
        .await
        .unwrap();
    let pid: i32 = started
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap();

    assert_eq!(context.background.kill_all(), 1);

    assert!(wait_until_gone(pid).await);
    assert_eq!(
        BashBackground.call(list(), &context).await.unwrap(),
        "no background processes"
    );
}

#[tokio::test]
async fn at_the_limit_a_finished_process_makes_room_and_running_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let mut commands = vec!["true"];
    commands.extend(["sleep 100"; MAX_PROCESSES - 1]);
    let starts = commands
        .iter()
        .map(|command| BashBackground.call(start(command), &context));
    for started in futures::future::join_all(starts).await {
        started.unwrap();
    }
    // The finished one is forgotten to make room.
    BashBackground
        .call(start("sleep 100"), &context)
        .await
        .unwrap();
    let listed = BashBackground.call(list(), &context).await.unwrap();
    assert_eq!(listed.lines().count(), MAX_PROCESSES);
    assert!(!listed.contains(": true "), "{listed}");

    let error = BashBackground
        .call(start("sleep 100"), &context)
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "16 background processes are already running: kill one you no longer need \
         (action=kill) before starting another"
    );
}

#[tokio::test]
async fn bad_arguments_say_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let registry = Registry::standard();
    let cases = [
        (
            r#"{"action": "start"}"#,
            "action=start needs `command`: the shell command to run in the background",
        ),
        (
            r#"{"action": "start", "command": "  "}"#,
            "action=start needs `command`",
        ),
        (
            r#"{"action": "output"}"#,
            "action=output needs `id`: the number that start returned (action=list shows \
             them)",
        ),
        (r#"{"action": "kill"}"#, "action=kill needs `id`"),
        (
            r#"{"action": "kill", "id": 7}"#,
            "there is no background process 7: none is running",
        ),
        (
            r#"{"action": "restart", "id": 1}"#,
            "invalid arguments for bash_background: unknown variant `restart`, expected one \
             of `start`, `output`, `kill`, `list`",
        ),
    ];
    for (arguments, message) in cases {
        let error = registry
            .call("bash_background", arguments, &context)
            .await
            .unwrap_err();
        assert!(error.message.starts_with(message), "{arguments}: {error}");
    }

    BashBackground
        .call(start("sleep 100"), &context)
        .await
        .unwrap();
    let error = BashBackground
        .call(with_id(Action::Output, 5), &context)
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "there is no background process 5; the ids are 1"
    );
}

#[tokio::test]
async fn secrets_are_kept_out_of_the_environment_and_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut context = test_context(dir.path());
    context.secret_values = Arc::from(vec!["sk-background-secret".to_owned()]);
    let registry = Registry::standard();
    let arguments = serde_json::json!({
        "action": "start",
        "command": "echo \"[${CARGO_MANIFEST_DIR:-absent}]\"; echo sk-background-secret",
    })
    .to_string();

    let started = registry
        .call("bash_background", &arguments, &context)
        .await
        .unwrap()
        .text;

    assert!(started.ends_with("\n[absent]\n[redacted]\n"), "{started}");
    assert!(!started.contains("sk-background"), "{started}");
}

#[tokio::test]
async fn background_commands_are_confined_like_bash() {
    if !landlock_enforced() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = outside_temp_dirs();
    let context = test_context(dir.path());
    let target = outside.path().join("from-background.txt");
    let script = format!(
        "echo x > {} || echo denied; echo y > inside.txt && echo wrote-inside",
        target.display()
    );

    let started = BashBackground.call(start(&script), &context).await.unwrap();
    let output = read_until(&context, 1, started, "wrote-inside").await;

    assert!(
        output.contains("Permission denied") || output.contains("Read-only file system"),
        "{output}"
    );
    assert!(output.contains("denied\n"), "{output}");
    assert!(!target.exists());
    assert!(Path::new(&dir.path().join("inside.txt")).exists());
}

#[test]
fn output_is_read_once_latest_first_when_there_is_too_much() {
    let mut buffer = OutputBuffer::default();
    buffer.push("one\n");
    assert_eq!(buffer.read(), ("one\n".to_owned(), 0));
    assert_eq!(buffer.read(), (String::new(), 0));

    let line = "0123456789abcdef\n";
    let lines = READ_RESULT_BYTES / line.len() + 10;
    for _ in 0..lines {
        buffer.push(line);
    }
    assert_eq!(buffer.unread_bytes(), lines * line.len());
    let (text, skipped) = buffer.read();
    assert_eq!(text.len(), READ_RESULT_BYTES);
    assert_eq!(skipped, lines * line.len() - READ_RESULT_BYTES);
    assert_eq!(buffer.unread_bytes(), 0);
}

#[test]
fn the_buffer_keeps_only_the_latest_output() {
    let mut buffer = OutputBuffer::default();
    let chunk = "é".repeat(1000);
    let chunks = 2 * KEPT_OUTPUT_BYTES / chunk.len();
    for _ in 0..chunks {
        buffer.push(&chunk);
    }
    assert!(buffer.text.len() <= KEPT_OUTPUT_BYTES + KEPT_OUTPUT_BYTES / 4);
    assert!(buffer.text.len() >= KEPT_OUTPUT_BYTES);
    assert_eq!(buffer.end(), chunks * chunk.len());
    let (text, skipped) = buffer.read();
    assert_eq!(skipped + text.len(), chunks * chunk.len());
    assert!(text.chars().all(|c| c == 'é'));
}
