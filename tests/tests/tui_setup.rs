//! The terminal client's first run, end to end in tmux: with no key for any profile, `cwcode`
//! offers a setup (pick a profile, paste its key), the daemon stores the key (mode 0600), and
//! the first prompt reaches the provider with that key; Esc leaves saying how to do it by hand.
//! Needs tmux.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::os::unix::fs::PermissionsExt;

use cwcode_tests::fake_provider::{FakeProvider, text};
use cwcode_tests::tmux::Tmux;
use cwcode_tests::{Home, tui_bin};
use serde_json::json;

const WINDOW: &str = "setup:0";
/// The variable the test profiles read their key from: set nowhere.
const KEY_VARIABLE: &str = "CWCODE_TEST_SETUP_KEY";
const PASTED_KEY: &str = "sk-pasted-in-the-first-run-setup";

/// A home whose two profiles (so neither is the default by being the only one) have no key.
fn keyless_home(provider_url: &str) -> Home {
    let home = Home::new(provider_url);
    let profile = json!({
        "base_url": provider_url,
        "model": "fake-model",
        "api_key_env": KEY_VARIABLE,
    });
    let config = json!({"profiles": {"fake": profile, "fake-other": profile}});
    std::fs::write(
        home.paths.config(),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_run_stores_the_pasted_key_and_the_first_prompt_uses_it() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = keyless_home(&provider.url);
    let _daemon = home.start_daemon();
    provider.reply(text("Hello from the fake provider."));

    // Where the setup's list puts `fake`: the daemon's profiles that want a key, in its order.
    let profiles = home.client().await.list_profiles().await.unwrap();
    assert!(
        profiles.iter().all(|profile| !profile.is_default),
        "a profile is ready already (a built-in's key in this environment?): {profiles:?}"
    );
    let position = profiles
        .iter()
        .filter(|profile| !profile.has_key)
        .position(|profile| profile.name == "fake")
        .unwrap();

    let tmux = Tmux::start(&home, "setup", &home.workspace);
    tmux.type_line(WINDOW, &format!("unset {KEY_VARIABLE}; {cwcode}"));
    tmux.wait_for(
        WINDOW,
        &[
            "First run: no provider profile has an API key yet.",
            "fake-other",
            "Enter picks",
        ],
    )
    .await;
    for _ in 0..position {
        tmux.keys(WINDOW, &["Down"]);
    }
    tmux.wait_until(WINDOW, "`fake` chosen", |screen| {
        screen.lines().any(|line| line.starts_with("› fake "))
    })
    .await;
    tmux.keys(WINDOW, &["Enter"]);
    tmux.wait_for(WINDOW, &["Paste the API key for fake;"])
        .await;

    // A real paste (bracketed, as terminals send one), with the newline a copied line has.
    tmux.run(&["set-buffer", &format!("{PASTED_KEY}\n")]);
    tmux.run(&["paste-buffer", "-p", "-t", WINDOW]);
    let screen = tmux
        .wait_for(WINDOW, &[&format!("({} characters)", PASTED_KEY.len())])
        .await;
    assert!(!screen.contains(PASTED_KEY), "the key is drawn:\n{screen}");
    tmux.keys(WINDOW, &["Enter"]);
    tmux.wait_for(WINDOW, &["key stored for profile fake in config.json"])
        .await;

    let mode = std::fs::metadata(home.paths.config())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "config.json holds a key: {mode:o}");

    tmux.type_line(WINDOW, "hello");
    tmux.wait_for(
        WINDOW,
        &["Hello from the fake provider.", "✓ turn 1 completed"],
    )
    .await;
    assert_eq!(
        provider.authorizations(),
        [Some(format!("Bearer {PASTED_KEY}"))],
        "the prompt went out without the pasted key"
    );
    tmux.keys(WINDOW, &["C-d"]);
    tmux.wait_for(WINDOW, &["detached: session"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_leaves_the_setup_with_the_way_to_do_it_by_hand() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = keyless_home(&provider.url);
    let _daemon = home.start_daemon();

    let tmux = Tmux::start(&home, "setup", &home.workspace);
    tmux.type_line(
        WINDOW,
        &format!("unset {KEY_VARIABLE}; {cwcode}; echo exit=$?"),
    );
    tmux.wait_for(
        WINDOW,
        &["First run: no provider profile has an API key yet."],
    )
    .await;
    tmux.keys(WINDOW, &["Escape"]);
    tmux.wait_for(
        WINDOW,
        &[
            "cwcode: no provider profile has an API key yet",
            "cwcode-cli config set-key PROFILE",
            &format!("fake: {KEY_VARIABLE}"),
            "exit=1",
        ],
    )
    .await;
    assert!(
        provider.requests().is_empty(),
        "leaving the setup sent something"
    );
    let config = std::fs::read_to_string(home.paths.config()).unwrap();
    assert!(!config.contains("sk-"), "{config}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_only_this_terminal_has_is_named_with_the_fix() {
    let cwcode = tui_bin();
    let cwcode = cwcode.to_str().unwrap();
    let provider = FakeProvider::start().await;
    let home = keyless_home(&provider.url);
    // The daemon starts without the key; the shell `cwcode` runs in has it.
    let _daemon = home.start_daemon();

    let tmux = Tmux::start(&home, "setup", &home.workspace);
    tmux.type_line(
        WINDOW,
        &format!("{KEY_VARIABLE}=sk-only-in-this-shell {cwcode}"),
    );
    let advice = format!(
        "profile `fake` has no key in the running daemon, but your environment has \
         {KEY_VARIABLE}: the daemon started without it. Run `cwcode-cli daemon stop` and try \
         again (the next command starts the daemon with your environment), or store the key \
         with `cwcode-cli config set-key fake`"
    );
    // The advice wraps at the window's edge: read the screen as one line.
    let screen = tmux
        .wait_until(WINDOW, &advice, |screen| {
            let words: Vec<&str> = screen.split_whitespace().collect();
            words.join(" ").contains(&advice)
        })
        .await;
    assert!(!screen.contains("sk-only-in-this-shell"), "{screen}");
    tmux.keys(WINDOW, &["Escape"]);
    tmux.wait_for(WINDOW, &["cwcode: no provider profile has an API key yet"])
        .await;
}
