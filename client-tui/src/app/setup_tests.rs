//! A first run: a key only this terminal has, and the setup offered when no profile is ready.

use std::time::Instant;

use cwcode_protocol::{EventKind, ProfileInfo};

use super::tests::transcript_text;
use super::{App, Startup};
use crate::daemon::Reply;
use crate::fixtures::{CWD, feed, session};

fn profile(name: &str, has_key: bool, is_default: bool, key_env: Option<&str>) -> ProfileInfo {
    ProfileInfo {
        name: name.to_owned(),
        base_url: format!("https://{name}.example/v1"),
        model: format!("{name}-chat"),
        has_key,
        is_default,
        context_window: None,
        prices: None,
        key_env: key_env.map(str::to_owned),
    }
}

/// A terminal whose environment has the DeepSeek key (and nothing else).
fn deepseek_key_here(name: &str) -> Option<String> {
    (name == "DEEPSEEK_API_KEY").then(|| "sk-only-in-this-shell".to_owned())
}

const ADVICE: &str = "profile `deepseek` has no key in the running daemon, but your environment \
has DEEPSEEK_API_KEY: the daemon started without it. Run `cwcode-cli daemon stop` and try again";

#[test]
fn a_key_only_this_terminal_has_is_named_with_the_fix() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
    app.client_env = deepseek_key_here;
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![
            profile("deepseek", false, false, Some("DEEPSEEK_API_KEY")),
            profile("local", true, true, None),
        ]),
        now,
    );
    // The draft is on the default profile, which needs no key: nothing to say yet.
    assert!(!transcript_text(&mut app).contains("has no key"));
    super::tests::run_command(&mut app, "/model deepseek", now);
    let shown = transcript_text(&mut app).replace('\n', " ");
    let shown = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(shown.contains(ADVICE), "{shown}");
    assert!(
        shown.contains("or store the key with `cwcode-cli config set-key deepseek`"),
        "{shown}"
    );
}

#[test]
fn an_attached_session_is_warned_once_after_its_replay() {
    let now = Instant::now();
    let mut app = App::new(
        CWD.to_owned(),
        Startup::Session("0198".to_owned()),
        None,
        None,
    );
    app.client_env = deepseek_key_here;
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![profile(
            "deepseek",
            false,
            false,
            Some("DEEPSEEK_API_KEY"),
        )]),
        now,
    );
    let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
    info.last_seq = 2;
    app.on_reply(Reply::Attached(info), now);
    feed(
        &mut app,
        now,
        [
            EventKind::TurnStarted {
                turn: 1,
                prompt: "hello".to_owned(),
            },
            EventKind::ProfileChanged {
                profile: "deepseek".to_owned(),
            },
        ],
    );
    app.on_reply(Reply::Profiles(app.profiles.clone()), now);
    let shown = transcript_text(&mut app);
    assert_eq!(
        shown.matches("has no key in the running daemon").count(),
        1,
        "{shown}"
    );
    // After the replay: the warning comes below the transcript, where the user reads.
    let hello = shown.find("hello").unwrap_or_default();
    let warning = shown.find("has no key").unwrap_or_default();
    assert!(hello < warning, "{shown}");
}

#[test]
fn no_warning_when_the_daemon_has_the_key_or_this_terminal_has_none() {
    let now = Instant::now();
    for (has_key, env) in [
        (true, deepseek_key_here as fn(&str) -> Option<String>),
        (false, |_: &str| None),
    ] {
        let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
        app.client_env = env;
        app.on_reply(Reply::Connected, now);
        app.on_reply(
            Reply::Profiles(vec![profile(
                "deepseek",
                has_key,
                true,
                Some("DEEPSEEK_API_KEY"),
            )]),
            now,
        );
        assert!(!transcript_text(&mut app).contains("has no key"));
    }
}
