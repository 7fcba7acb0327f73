//! The goal loop's states through the real daemon (SPEC §5, issue 14): a loop that makes no
//! progress stalls, a verified goal is unchecked until its check passes, budgets stop a loop,
//! hooks tell a user away from the terminal, and every state is shown by `goal status --json`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cwcode_protocol::EventKind;
use cwcode_tests::Home;
use cwcode_tests::fake_provider::{FakeProvider, Gate, Reply, hold_until, text, tool_calls};
use serde_json::{Value, json};

fn status(home: &Home, id: &str) -> Value {
    serde_json::from_str(&home.cli_ok(&["goal", id, "status", "--json"])).unwrap()
}

/// Waits for the loop's end and returns the `goal_loop_stopped` event's state and summary.
fn wait_for_stop(home: &Home, id: &str) -> (String, String) {
    wait_for_nth_stop(home, id, 1)
}

/// The same for the `nth` loop of the session (1-based).
fn wait_for_nth_stop(home: &Home, id: &str, nth: usize) -> (String, String) {
    let started = Instant::now();
    loop {
        let stops: Vec<(String, String)> = home
            .journal(id)
            .into_iter()
            .filter_map(|event| match event.kind {
                EventKind::GoalLoopStopped { state, summary, .. } => {
                    Some((state.to_string(), summary))
                }
                _ => None,
            })
            .collect();
        if let Some(stop) = stops.into_iter().nth(nth - 1) {
            return stop;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "goal loop {nth} never stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `goal status --json` until its state is `state`, and returns it.
fn wait_for_state(home: &Home, id: &str, state: &str) -> Value {
    let started = Instant::now();
    loop {
        let status = status(home, id);
        if status["state"] == state {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the loop never reached `{state}`: {status}"
        );
        std::thread::sleep(Duration::from_millis(20));
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

/// The cycle prompts the model was sent, in order (each request's latest, once).
fn cycle_prompts(provider: &FakeProvider) -> Vec<String> {
    let mut prompts: Vec<String> = Vec::new();
    for request in provider.requests() {
        let latest = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .filter_map(|message| message["content"].as_str())
            .find(|content| content.starts_with("[cwcode goal loop"))
            .map(str::to_owned);
        if let Some(prompt) = latest
            && prompts.last() != Some(&prompt)
        {
            prompts.push(prompt);
        }
    }
    prompts
}

/// Adds `hooks` to the home's config.json: each event's hook writes its stdin and its
/// `CWCODE_*` variables to files named after the event under `out`.
fn with_hooks(home: &Home, out: &Path, events: &[&str]) {
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut hooks = serde_json::Map::new();
    for event in events {
        let script = format!(
            "cat > {dir}/{event}.json.part && mv {dir}/{event}.json.part {dir}/{event}.json; \
             printf '%s %s %s' \"$CWCODE_SESSION_ID\" \"$CWCODE_EVENT\" \"$CWCODE_WORKSPACE\" > {dir}/{event}.env",
            dir = out.display()
        );
        hooks.insert((*event).to_owned(), json!(["sh", "-c", script]));
    }
    config["hooks"] = Value::Object(hooks);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// Polls until the hook for `event` has written what it got on stdin.
fn hook_input(out: &Path, event: &str) -> (Value, String) {
    let file: PathBuf = out.join(format!("{event}.json"));
    let started = Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the {event} hook never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let input = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // The variables are written just after stdin; wait for them the same way.
    let env_file = out.join(format!("{event}.env"));
    while std::fs::read_to_string(&env_file).map_or(true, |text| text.is_empty()) {
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    (input, std::fs::read_to_string(env_file).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_without_progress_stalls_after_three_cycles_and_says_what_was_tried() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let hooks_out = tempfile::tempdir().unwrap();
    with_hooks(&home, hooks_out.path(), &["goal_finished"]);
    let _daemon = home.start_daemon();
    for answer in [
        "Let me think.",
        "Still thinking.",
        "I am not sure how.",
        "x",
        "y",
    ] {
        provider.reply(text(answer));
    }
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "solve everything"]);
    assert_eq!(status(&home, &id)["state"], "idle");
    home.cli_ok(&["goal", &id, "on"]);

    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "stalled");
    assert!(
        summary.contains("3 cycles in a row checked no box and changed no file"),
        "{summary}"
    );
    assert_eq!(provider.requests().len(), 3, "no fourth cycle");
    let stalled = status(&home, &id);
    assert_eq!(stalled["state"], "stalled", "{stalled}");
    assert_eq!(stalled["cycle"], 3);
    // The explanation is the assistant's answer, in the history for a follow-up.
    let explanation = home
        .journal(&id)
        .into_iter()
        .rev()
        .find_map(|event| match event.kind {
            EventKind::AssistantMessage { content, .. } => Some(content),
            _ => None,
        })
        .unwrap();
    assert!(
        explanation.starts_with("I stopped the goal loop: 3 cycles in a row"),
        "{explanation}"
    );
    assert!(
        explanation.contains("said \"I am not sure how.\""),
        "{explanation}"
    );

    // The goal_finished hook got the event with the end state, and its variables.
    let (input, env) = hook_input(hooks_out.path(), "goal_finished");
    assert_eq!(input["type"], "goal_loop_stopped", "{input}");
    assert_eq!(input["state"], "stalled", "{input}");
    let waited = home.cli(&["wait", &id, "--for", "goal", "--timeout", "10s"]);
    assert_eq!(
        waited.status.code(),
        Some(10),
        "a stall has its exit code: {waited:?}"
    );
    let workspace = std::fs::canonicalize(&home.workspace).unwrap();
    assert_eq!(
        env,
        format!("{id} goal_finished {}", workspace.display()),
        "{env}"
    );

    // A follow-up prompt carries the explanation to the model.
    provider.reply(text("Understood."));
    home.cli_ok(&["send", &id, "what happened?", "--wait"]);
    let last = provider.requests().last().unwrap().clone();
    let history = last["messages"].to_string();
    assert!(history.contains("I stopped the goal loop"), "{history}");
}

/// A model that checks every open goal it is shown, and on a failed check first creates the
/// file the check looks for.
fn checker(request: &Value) -> Reply {
    let messages = request["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    if last["role"] == "tool" {
        return text("Checked it off.");
    }
    // The cycle's prompt; a notice that goals.md changed on disk (the daemon unchecked a box)
    // may follow it.
    let prompt = messages
        .iter()
        .rev()
        .filter_map(|message| message["content"].as_str())
        .find(|content| content.starts_with("[cwcode goal loop"))
        .unwrap_or_default();
    let Some(goal) = prompt
        .lines()
        .skip_while(|line| !line.starts_with("[cwcode goal loop"))
        .find_map(|line| line.strip_prefix("- "))
    else {
        return text("Nothing left.");
    };
    let check = (
        "check",
        "edit_file",
        json!({"path": "goals.md", "old_string": format!("- [ ] {goal}"), "new_string": format!("- [x] {goal}")}),
    );
    if prompt.contains("failed, so its box was unchecked again") {
        tool_calls(&[
            (
                "make",
                "write_file",
                json!({"path": "marker", "content": "made\n"}),
            ),
            check,
        ])
    } else {
        tool_calls(&[check])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_goal_is_unchecked_while_its_check_fails_and_complete_once_it_passes() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    for _ in 0..8 {
        provider.then(checker);
    }
    let id = home.new_session("yolo");
    home.cli_ok(&[
        "goal",
        &id,
        "add",
        "the marker exists (verify: test -f marker && echo found)",
    ]);
    let added = status(&home, &id);
    assert_eq!(
        added["goals"][0]["verify"], "test -f marker && echo found",
        "{added}"
    );
    home.cli_ok(&["goal", &id, "on"]);

    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "complete", "{summary}");
    assert_eq!(cycles_started(&home, &id), [1, 2]);
    let prompts = cycle_prompts(&provider);
    assert!(
        !prompts[0].contains("failed"),
        "the first cycle has no failure to report: {}",
        prompts[0]
    );
    assert!(
        prompts[1].contains("The check of \"the marker exists (verify: test -f marker && echo found)\" failed, so its box was unchecked again. `test -f marker && echo found` printed:")
            && prompts[1].contains("exit code 1"),
        "the second cycle starts with the failed check's output: {}",
        prompts[1]
    );
    let goals = std::fs::read_to_string(home.workspace.join("goals.md")).unwrap();
    assert!(
        goals.contains("- [x] the marker exists (verify:"),
        "{goals}"
    );
    let complete = status(&home, &id);
    assert_eq!(complete["state"], "complete");
    assert_eq!(complete["left"], 0);
    // A script waiting on the loop is told it all got done: exit 0, only for `complete`.
    let waited = home.cli(&["wait", &id, "--for", "goal", "--timeout", "10s"]);
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_budget_stops_the_loop_and_the_status_shows_what_is_left() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    for _ in 0..4 {
        provider.reply(text("Working on it."));
    }
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "a long job"]);
    // Each fake answer reports 110 tokens: the second cycle spends the budget.
    home.cli_ok(&["goal", &id, "on", "--tokens", "150"]);
    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "budget_exhausted");
    assert!(
        summary.contains("its budget of 150 tokens is spent"),
        "{summary}"
    );
    let spent = status(&home, &id);
    assert_eq!(spent["state"], "budget_exhausted");
    assert_eq!(spent["tokensUsed"], 220);
    assert_eq!(spent["tokenBudget"], 150);
    assert_eq!(spent["tokensLeft"], 0);
    // The default wall-clock budget of config.json applies alongside.
    assert_eq!(spent["hoursBudget"], 8.0, "{spent}");
    assert!(spent["secondsLeft"].as_u64().unwrap() > 7 * 3600);
    assert_eq!(provider.requests().len(), 2);

    // A budget given with --no-budget is refused, with what to do.
    let refused = home.cli(&["goal", &id, "on", "--no-budget", "--hours", "1"]);
    assert!(!refused.status.success());
    // Without any budget the status says so.
    provider.reply(text("One more."));
    home.cli_ok(&["goal", &id, "on", "--no-budget", "--cap", "1"]);
    let (state, _) = wait_for_nth_stop(&home, &id, 2);
    assert_eq!(state, "capped");
    let unbounded = status(&home, &id);
    assert_eq!(unbounded["state"], "capped");
    assert_eq!(unbounded["tokenBudget"], Value::Null);
    assert_eq!(unbounded["hoursBudget"], Value::Null);
    assert_eq!(unbounded["secondsLeft"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_budget_ends_a_cycle_that_outlives_it() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // The cycle's answer never comes: only the budget can end it.
    let never = Gate::new();
    provider.reply(hold_until(text("I will answer some day."), 1, &never));
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "wait for ever"]);
    // 0.0005 hours: 1.8 seconds.
    let started = Instant::now();
    home.cli_ok(&["goal", &id, "on", "--hours", "0.0005"]);
    let (state, summary) = wait_for_stop(&home, &id);
    assert!(started.elapsed() >= Duration::from_millis(1700));
    assert_eq!(state, "budget_exhausted");
    assert!(
        summary.contains("its wall-clock budget of 2 s is spent"),
        "{summary}"
    );
    let spent = status(&home, &id);
    assert_eq!(spent["state"], "budget_exhausted");
    assert_eq!(spent["secondsLeft"], 0);
    let cancelled = home.journal(&id).into_iter().any(|event| {
        matches!(
            event.kind,
            EventKind::TurnFinished {
                outcome: cwcode_protocol::TurnOutcome::Cancelled,
                ..
            }
        )
    });
    assert!(cancelled, "the held turn was ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_loop_in_code_mode_waits_for_an_approval_and_a_hook_says_so() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let hooks_out = tempfile::tempdir().unwrap();
    with_hooks(
        &home,
        hooks_out.path(),
        &["approval_requested", "goal_finished"],
    );
    let _daemon = home.start_daemon();
    provider.reply(tool_calls(&[(
        "run",
        "bash",
        json!({"command": "echo hello > greeting"}),
    )]));
    provider.reply(text("Could not run it."));
    let id = home.new_session("code");
    home.cli_ok(&["goal", &id, "add", "greet"]);
    // No client is attached: `on` returns at once.
    home.cli_ok(&["goal", &id, "on"]);

    let (input, env) = hook_input(hooks_out.path(), "approval_requested");
    assert_eq!(input["type"], "approval_requested", "{input}");
    assert_eq!(input["tool"], "bash");
    assert!(
        env.starts_with(&format!("{id} approval_requested ")),
        "{env}"
    );
    let waiting = wait_for_state(&home, &id, "awaiting_approval");
    assert_eq!(waiting["running"], true);
    assert_eq!(waiting["cycle"], 1);
    // `ls` shows the loop and its cycle, and the session waiting for an approval.
    let sessions: Value = serde_json::from_str(&home.cli_ok(&["ls", "--json"])).unwrap();
    let listed = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|session| session["id"] == id.as_str())
        .unwrap();
    assert_eq!(listed["status"], "awaiting_approval", "{listed}");
    assert_eq!(listed["goal"]["state"], "awaiting_approval", "{listed}");
    assert_eq!(listed["goal"]["cycle"], 1, "{listed}");

    // Stopping the loop while it waits ends it as stopped; the hook hears that too.
    home.cli_ok(&["goal", &id, "off"]);
    let (state, _) = wait_for_stop(&home, &id);
    assert_eq!(state, "stopped");
    assert_eq!(status(&home, &id)["state"], "stopped");
    let (finished, _) = hook_input(hooks_out.path(), "goal_finished");
    assert_eq!(finished["state"], "stopped", "{finished}");
    assert!(!home.workspace.join("greeting").exists(), "never approved");
    let sessions: Value = serde_json::from_str(&home.cli_ok(&["ls", "--json"])).unwrap();
    assert!(sessions[0].get("goal").is_none(), "{sessions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_loop_a_storm_and_a_failed_turn_each_have_their_state() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();

    // running: the cycle's answer is held until the test has looked.
    let gate = Gate::new();
    provider.reply(hold_until(text("Done thinking."), 1, &gate));
    let running_id = home.new_session("yolo");
    home.cli_ok(&["goal", &running_id, "add", "think"]);
    home.cli_ok(&["goal", &running_id, "on", "--cap", "1"]);
    let running = wait_for_state(&home, &running_id, "running");
    assert_eq!(running["running"], true);
    assert_eq!(running["stopReason"], Value::Null);
    gate.open();
    let (state, _) = wait_for_stop(&home, &running_id);
    assert_eq!(state, "capped");

    // storm: the same failing call, three times in one turn.
    let missing = json!({"path": "no/such/file.rs"});
    for _ in 0..3 {
        provider.reply(tool_calls(&[("read", "read_file", missing.clone())]));
    }
    let storm_id = home.new_session("yolo");
    home.cli_ok(&["goal", &storm_id, "add", "read the missing file"]);
    home.cli_ok(&["goal", &storm_id, "on"]);
    let (state, _) = wait_for_stop(&home, &storm_id);
    assert_eq!(state, "storm");
    assert_eq!(status(&home, &storm_id)["state"], "storm");

    // failed: the provider refuses the request outright.
    provider.reply(Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.to_owned(),
    ));
    let failed_id = home.new_session("yolo");
    home.cli_ok(&["goal", &failed_id, "add", "anything"]);
    home.cli_ok(&["goal", &failed_id, "on"]);
    let (state, summary) = wait_for_stop(&home, &failed_id);
    assert_eq!(state, "failed", "{summary}");
    let failed = status(&home, &failed_id);
    assert_eq!(failed["state"], "failed");
    assert!(
        failed["stopReason"]
            .as_str()
            .unwrap()
            .contains("a turn failed"),
        "{failed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_is_logged_and_shown_by_doctor_and_never_holds_the_session() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["hooks"] = json!({
        "turn_finished": ["sh", "-c", "echo the webhook is down >&2; exit 3"],
        "turn_failed": ["/no/such/program"],
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let _daemon = home.start_daemon();
    provider.reply(text("Hello."));
    provider.reply(Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.to_owned(),
    ));
    provider.reply(text("Still here."));
    let id = home.new_session("yolo");
    home.cli_ok(&["send", &id, "hi", "--wait"]);
    let _ = home.cli(&["send", &id, "fail", "--wait"]);
    // The session goes on whatever its hooks do.
    home.cli_ok(&["send", &id, "again", "--wait"]);

    let started = Instant::now();
    let failures = loop {
        // doctor exits non-zero when it lists something to fix, as it will here.
        let doctor = home.cli(&["doctor", "--json"]);
        let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
        let failures: Vec<String> = doctor["hookFailures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|failure| failure.as_str().unwrap().to_owned())
            .collect();
        if failures.len() >= 3 {
            break failures;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "doctor never listed the failures: {failures:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        failures.iter().any(|failure| failure
            .contains("turn_finished hook `sh` failed (exit status: 3): the webhook is down")),
        "{failures:?}"
    );
    assert!(
        failures
            .iter()
            .any(|failure| failure.contains("turn_failed hook `/no/such/program` could not start")),
        "{failures:?}"
    );
    let human = String::from_utf8(home.cli(&["doctor"]).stdout).unwrap();
    assert!(human.contains("[FIX] hook: "), "{human}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_failing_call_in_three_cycles_in_a_row_is_a_storm() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    let _daemon = home.start_daemon();
    // Once per cycle, never three times in one turn: only the loop sees the repetition.
    for _ in 0..4 {
        provider.reply(tool_calls(&[(
            "read",
            "read_file",
            json!({"path": "build.log"}),
        )]));
        provider.reply(text("There is no build log yet; I will look again."));
    }
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "make the build pass"]);
    home.cli_ok(&["goal", &id, "on"]);
    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "storm", "{summary}");
    assert!(
        summary.contains("the same call failed the same way in 3 cycles in a row"),
        "{summary}"
    );
    assert_eq!(status(&home, &id)["cycle"], 3);
    let explanation = home
        .journal(&id)
        .into_iter()
        .find_map(|event| match event.kind {
            EventKind::StormBroken { tool, explanation } => Some((tool, explanation)),
            _ => None,
        })
        .unwrap();
    assert_eq!(explanation.0, "read_file");
    assert!(
        explanation
            .1
            .contains("`read_file` failed the same way in 3 cycles in a row"),
        "{}",
        explanation.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_whose_cycle_cannot_start_fails_with_the_reason_and_the_hook_is_told() {
    let provider = FakeProvider::start().await;
    let home = Home::new(&provider.url);
    // The profile's key is to come from a variable the daemon does not have: no request can
    // be made, so the first cycle cannot even start.
    let path = home.paths.config();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let profile = config["profiles"]["fake"].as_object_mut().unwrap();
    profile.remove("api_key");
    profile.insert(
        "api_key_env".to_owned(),
        json!("CWCODE_TEST_KEY_THAT_IS_NEVER_SET"),
    );
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let hooks_out = tempfile::tempdir().unwrap();
    with_hooks(&home, hooks_out.path(), &["goal_finished"]);
    let _daemon = home.start_daemon();
    let id = home.new_session("yolo");
    home.cli_ok(&["goal", &id, "add", "anything"]);
    home.cli_ok(&["goal", &id, "on"]);

    let (state, summary) = wait_for_stop(&home, &id);
    assert_eq!(state, "failed", "{summary}");
    let failed = status(&home, &id);
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["running"], false, "{failed}");
    let reason = failed["stopReason"].as_str().unwrap();
    assert!(
        reason.contains("CWCODE_TEST_KEY_THAT_IS_NEVER_SET"),
        "the reason names what to fix: {failed}"
    );
    let (input, _) = hook_input(hooks_out.path(), "goal_finished");
    assert_eq!(input["type"], "goal_loop_stopped", "{input}");
    assert_eq!(input["state"], "failed", "{input}");
    assert!(cycles_started(&home, &id).is_empty(), "no cycle ran");
    assert!(provider.requests().is_empty(), "nothing was sent");
    let waited = home.cli(&["wait", &id, "--for", "goal", "--timeout", "10s"]);
    assert_eq!(
        waited.status.code(),
        Some(3),
        "a failed loop exits 3: {waited:?}"
    );
}
