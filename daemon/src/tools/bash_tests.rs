//! `bash` running real commands: streamed output, exit codes and signals, timeouts and cancel
//! killing the whole group, the environment without secrets, and the Landlock confinement.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::*;
use crate::sandbox::Workspace;
use crate::sandbox::process::tests::wait_until_gone;
use crate::sandbox::tests::{landlock_enforced, outside_temp_dirs};
use crate::tools::{Registry, test_context};

fn command(text: &str, timeout_secs: Option<u64>) -> BashArgs {
    BashArgs {
        command: text.to_owned(),
        timeout_secs,
    }
}

#[tokio::test]
async fn output_is_streamed_as_it_arrives_and_returned_with_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = Arc::new(Mutex::new(Vec::<(String, Instant)>::new()));
    let mut context = test_context(dir.path());
    let sink = Arc::clone(&chunks);
    context.output = Arc::new(move |text: &str| {
        sink.lock().unwrap().push((text.to_owned(), Instant::now()));
    });

    let result = Bash
        .call(command("echo one; sleep 0.5; echo two >&2", None), &context)
        .await
        .unwrap();
    let returned_at = Instant::now();

    assert_eq!(result, "one\ntwo\nexit code 0");
    let chunks = chunks.lock().unwrap();
    let texts: Vec<&str> = chunks.iter().map(|(text, _)| text.as_str()).collect();
    assert_eq!(texts, ["one\n", "two\n"]);
    assert!(returned_at - chunks[0].1 >= Duration::from_millis(400));
}

#[tokio::test]
async fn a_non_zero_exit_is_a_result_that_names_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let result = Bash
        .call(
            command("echo 'no such thing' >&2; exit 3", None),
            &test_context(dir.path()),
        )
        .await
        .unwrap();
    assert_eq!(result, "no such thing\nexit code 3");
}

#[tokio::test]
async fn a_command_killed_by_a_signal_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let result = Bash
        .call(command("kill -9 $$", None), &test_context(dir.path()))
        .await
        .unwrap();
    assert!(result.starts_with("(no output)\n"), "{result}");
    assert!(result.contains("signal 9 (SIGKILL)"), "{result}");
}

#[tokio::test]
async fn runs_in_the_workspace_root_without_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let result = Bash
        .call(command("pwd; cat; echo end", None), &context)
        .await
        .unwrap();
    assert_eq!(
        result,
        format!("{}\nend\nexit code 0", context.workspace.root().display())
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let started = Instant::now();

    let error = Bash
        .call(command("sleep 100 & echo $!; sleep 100", Some(1)), &context)
        .await
        .unwrap_err();

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        error.message.starts_with(
            "timed out after 1 s (timeout_secs=1; the maximum is 600): the command and every \
             process it started were killed. Raise timeout_secs if it needs longer. Output so \
             far:\n"
        ),
        "{error}"
    );
    let background_pid: i32 = error.message.lines().last().unwrap().parse().unwrap();
    assert!(wait_until_gone(background_pid).await);
}

#[tokio::test]
async fn cancel_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    let cancel = context.cancel.clone();
    let started = Instant::now();
    let call = tokio::spawn(async move { Bash.call(command("sleep 100", None), &context).await });

    tokio::time::sleep(Duration::from_millis(200)).await;
    cancel.cancel();
    let error = call.await.unwrap().unwrap_err();

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error.message,
        "cancelled: the command and every process it started were killed. There was no output."
    );
}

#[tokio::test]
async fn a_background_process_holding_the_output_does_not_hang_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();

    let result = Bash
        .call(
            command("sleep 100 & echo started", None),
            &test_context(dir.path()),
        )
        .await
        .unwrap();

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        result,
        "started\n[background processes still writing to the output were killed when the \
         command exited]\nexit code 0"
    );
}

#[tokio::test]
async fn a_process_that_left_the_group_cannot_hang_the_call_either() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();

    let result = Bash
        .call(
            command("setsid sleep 100 & echo $!", None),
            &test_context(dir.path()),
        )
        .await
        .unwrap();

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let escaped_pid: i32 = result.lines().next().unwrap().parse().unwrap();
    let escaped = rustix::process::Pid::from_raw(escaped_pid).unwrap();
    rustix::process::kill_process(escaped, rustix::process::Signal::KILL).unwrap();
    assert!(result.ends_with("exit code 0"), "{result}");
}

#[tokio::test]
async fn only_allow_listed_and_passed_through_variables_reach_the_command() {
    let dir = tempfile::tempdir().unwrap();
    // Cargo sets it for every test run; the test cannot set one of its own without unsafe.
    let name = "CARGO_MANIFEST_DIR";
    assert!(std::env::var_os(name).is_some());
    let probe = format!("echo \"[${{{name}:-absent}}] [${{PATH:+path}}]\"");

    let mut context = test_context(dir.path());
    let hidden = Bash.call(command(&probe, None), &context).await.unwrap();
    assert_eq!(hidden, "[absent] [path]\nexit code 0");

    context.tool_env = Arc::from(vec![name.to_owned()]);
    let visible = Bash.call(command(&probe, None), &context).await.unwrap();
    assert!(!visible.starts_with("[absent]"), "{visible}");
}

#[tokio::test]
async fn variables_holding_a_secret_value_are_not_passed_on() {
    let dir = tempfile::tempdir().unwrap();
    let name = "CARGO_MANIFEST_DIR";
    let value = std::env::var(name).unwrap();
    let mut context = test_context(dir.path());
    // Even when the user passes it through by name.
    context.tool_env = Arc::from(vec![name.to_owned()]);
    context.secret_values = Arc::from(vec![value]);
    let result = Bash
        .call(
            command(&format!("echo \"[${{{name}:-absent}}]\""), None),
            &context,
        )
        .await
        .unwrap();
    assert_eq!(result, "[absent]\nexit code 0");
}

#[tokio::test]
async fn secret_values_are_redacted_from_the_result_and_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-live-0123456789abcdef";
    let streamed = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&streamed);
    let mut context = test_context(dir.path());
    context.secret_values = Arc::from(vec![secret.to_owned()]);
    context.output = Arc::new(move |text: &str| sink.lock().unwrap().push(text.to_owned()));
    let registry = Registry::standard();
    // The second copy arrives in two writes, so in two chunks.
    let script =
        format!("echo key={secret}; printf 'sk-live-'; sleep 0.2; echo '0123456789abcdef.'");
    let arguments = serde_json::json!({ "command": script }).to_string();

    let result = registry.call("bash", &arguments, &context).await.unwrap();

    assert_eq!(result.text, "key=[redacted]\n[redacted].\nexit code 0");
    {
        let streamed = streamed.lock().unwrap();
        assert_eq!(streamed.concat(), "key=[redacted]\n[redacted].\n");
        assert!(
            streamed.iter().all(|chunk| !chunk.contains("sk-live")),
            "{streamed:?}"
        );
    }

    // Errors carry output too.
    let arguments =
        serde_json::json!({ "command": format!("echo {secret}; sleep 5"), "timeout_secs": 1 })
            .to_string();
    let error = registry
        .call("bash", &arguments, &context)
        .await
        .unwrap_err();
    assert!(
        error.message.ends_with("Output so far:\n[redacted]\n"),
        "{error}"
    );
}

/// SPEC §7.3: under Landlock a command writes in the workspace and the temp directories, and
/// reads anywhere, but cannot create, change, truncate, remove or rename anything elsewhere.
#[tokio::test]
async fn landlock_confines_writes_to_the_workspace_and_temp() {
    if !landlock_enforced() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let outside = outside_temp_dirs();
    let outside = outside.path().canonicalize().unwrap();
    std::fs::write(outside.join("kept.txt"), "original\n").unwrap();
    let context = test_context(dir.path());
    let o = outside.display();
    let t = temp.path().display();
    let script = format!(
        "cat {o}/kept.txt
             echo x > {o}/new.txt || echo denied-create
             echo x >> {o}/kept.txt || echo denied-append
             : > {o}/kept.txt || echo denied-truncate
             rm {o}/kept.txt || echo denied-remove
             mkdir {o}/sub || echo denied-mkdir
             ln -s /etc/passwd {o}/link || echo denied-symlink
             echo inside > inside.txt && mv inside.txt {o}/ || echo denied-move-out
             echo temp > {t}/temp.txt && echo wrote-temp
         echo null > /dev/null && echo wrote-null
         echo to-stdout > /dev/stdout
         mkdir -p deep/dir && echo x > deep/dir/f && rm -r deep && echo wrote-inside"
    );

    let result = Bash.call(command(&script, None), &context).await.unwrap();

    for expected in [
        "original",
        "denied-create",
        "denied-append",
        "denied-truncate",
        "denied-remove",
        "denied-mkdir",
        "denied-symlink",
        "denied-move-out",
        "wrote-temp",
        "wrote-null",
        "to-stdout",
        "wrote-inside",
    ] {
        assert!(
            result.contains(expected),
            "{expected} missing from:\n{result}"
        );
    }
    assert!(
        result.contains("Permission denied") || result.contains("Read-only file system"),
        "{result}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["kept.txt"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("kept.txt")).unwrap(),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(context.workspace.root().join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        std::fs::read_to_string(temp.path().join("temp.txt")).unwrap(),
        "temp\n"
    );
    // The confinement was the command's: this thread (the daemon's, in production) is free.
    std::fs::write(outside.join("after.txt"), "daemon\n").unwrap();
}

#[tokio::test]
async fn landlock_lets_commands_write_in_the_extra_roots() {
    if !landlock_enforced() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = outside_temp_dirs();
    let mut context = test_context(dir.path());
    context.workspace = Arc::new(
        Workspace::with_extra_roots(dir.path(), vec![outside.path().to_path_buf()]).unwrap(),
    );
    let script = format!("echo extra > {}/allowed.txt", outside.path().display());

    let result = Bash.call(command(&script, None), &context).await.unwrap();

    assert_eq!(result, "(no output)\nexit code 0");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("allowed.txt")).unwrap(),
        "extra\n"
    );
}

#[tokio::test]
async fn long_output_keeps_its_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let result = Bash
        .call(command("seq 1 100000", None), &test_context(dir.path()))
        .await
        .unwrap();

    assert!(
        result.len() < KEPT_HEAD_BYTES + KEPT_TAIL_BYTES + 512,
        "{}",
        result.len()
    );
    assert!(result.starts_with("1\n2\n3\n"), "{}", &result[..20]);
    assert!(
        result.ends_with("99999\n100000\nexit code 0"),
        "{}",
        &result[result.len() - 40..]
    );
    let total_bytes: usize = (1..=100_000).map(|n: usize| n.to_string().len() + 1).sum();
    let kept_bytes = KEPT_HEAD_BYTES + KEPT_TAIL_BYTES;
    assert!(
        result.contains(&format!(
            "\n[... {} bytes of output omitted; to see them, redirect the output to a file \
             and read or grep it ...]\n",
            total_bytes - kept_bytes
        )),
        "{}",
        &result[KEPT_HEAD_BYTES - 20..KEPT_HEAD_BYTES + 200]
    );
}

#[tokio::test]
async fn timeouts_beyond_the_maximum_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let context = test_context(dir.path());
    for timeout in [0, 601] {
        let error = Bash
            .call(command("true", Some(timeout)), &context)
            .await
            .unwrap_err();
        assert_eq!(
            error.message,
            format!("timeout_secs must be between 1 and 600, not {timeout}")
        );
    }
}

#[test]
fn characters_split_between_chunks_survive() {
    let bytes = "añ€😀".as_bytes();
    let mut stream = Utf8Stream::default();
    let mut decoded: String = bytes.chunks(1).map(|chunk| stream.decode(chunk)).collect();
    decoded.push_str(&stream.finish());
    assert_eq!(decoded, "añ€😀");
}

#[test]
fn invalid_bytes_become_replacement_characters() {
    let mut stream = Utf8Stream::default();
    let mut decoded = stream.decode(b"a\xffb\xe2\x82");
    decoded.push_str(&stream.finish());
    assert_eq!(decoded, "a\u{FFFD}b\u{FFFD}");
}
