//! Configuration through the real daemon: keys stored from the CLI, hand edits picked up live,
//! and a broken edit reported while the last good configuration stays in force.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use cwcode_tests::Home;
use serde_json::Value;

fn profiles(home: &Home) -> Value {
    serde_json::from_str(&home.cli_ok(&["profiles", "--json"])).unwrap()
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_key_stores_the_key_privately_and_never_shows_it() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let output = home
        .command("cwcode-cli")
        .args(["config", "set-key", "deepseek-v4-pro"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"sk-deepseek-secret\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(output.status.success());
    let config = std::fs::read_to_string(home.paths.config()).unwrap();
    assert!(config.contains("sk-deepseek-secret"));
    let mode = std::fs::metadata(home.paths.config())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let listed = profiles(&home);
    let deepseek = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "deepseek-v4-pro")
        .unwrap();
    assert_eq!(deepseek["hasKey"], true);
    assert!(!listed.to_string().contains("sk-deepseek-secret"));
    // The profile the test home configured is still there.
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fake")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edits_are_picked_up_and_a_broken_edit_keeps_the_last_good_config() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.paths.config()).unwrap()).unwrap();
    config["profiles"]["added-by-hand"] =
        serde_json::json!({"base_url": "http://127.0.0.1:9/v1", "model": "m2"});
    std::fs::write(
        home.paths.config(),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    wait_until("the new profile", || {
        profiles(&home)
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "added-by-hand")
    });

    std::fs::write(
        home.paths.config(),
        "{\n  \"profiles\": {\n    \"x\": {\"base_url\": 3}\n  }\n}\n",
    )
    .unwrap();
    wait_until("the reload error", || {
        let info: Value =
            serde_json::from_str(&home.cli_ok(&["daemon", "status", "--json"])).unwrap();
        info["configError"].as_str().is_some_and(|error| {
            error.contains("config.json:3:") && error.contains("profiles.x.base_url")
        })
    });
    assert!(
        profiles(&home)
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "added-by-hand"),
        "the last good configuration stays in force"
    );
}

/// At start there is no last good configuration to keep, so a broken file stops the daemon; the
/// client that started it says why at once and points at a log that exists and tells the same.
#[test]
fn a_daemon_that_cannot_start_on_a_broken_config_says_why_at_once() {
    let home = Home::new("http://127.0.0.1:9/v1");
    std::fs::write(home.paths.config(), "{\"profiles\": {\"x\": }}\n").unwrap();
    // The binaries are built on first use: not part of the wait measured.
    cwcode_tests::bin_dir();
    let started = Instant::now();
    let output = home.cli(&["ls"]);
    let waited = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(waited < Duration::from_secs(3), "took {waited:?}: {stderr}");
    assert!(
        stderr.contains("config.json:1:") && stderr.contains("expected value"),
        "the reason is not named: {stderr}"
    );
    let log = stderr
        .split_whitespace()
        .find(|word| word.ends_with("cwcoded.log"))
        .unwrap_or_else(|| panic!("no log path in: {stderr}"));
    let logged = std::fs::read_to_string(log).unwrap();
    assert!(
        logged.contains("config.json:1:") && logged.contains("expected value"),
        "the log does not say why: {logged}"
    );

    // Once the file is fixed, the next command starts the daemon and the old reason is gone.
    std::fs::write(home.paths.config(), "{}\n").unwrap();
    home.cli_ok(&["ls"]);
    assert!(!home.paths.start_error_file().exists());
    home.cli_ok(&["daemon", "stop"]);
}

/// Clients that start the daemon at the same moment race for the home's lock: the daemons that
/// lose exit without blaming anything, and their clients wait for the winner.
#[test]
fn clients_starting_the_daemon_together_all_get_an_answer() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let clients: Vec<_> = (0..5)
        .map(|_| {
            home.command("cwcode-cli")
                .arg("ls")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for client in clients {
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(!home.paths.start_error_file().exists());
    home.cli_ok(&["daemon", "stop"]);
}
