//! A first run: a key only this terminal has, and the setup offered when no profile is ready.

use std::time::Instant;

use crossterm::event::{Event as TermEvent, KeyCode};
use cwcode_protocol::{EventKind, ProfileInfo};

use super::tests::{press, transcript_text, type_text};
use super::{App, Exit, Startup};
use crate::daemon::{Action, Open, Reply, Request};
use crate::fixtures::{CWD, feed, session};
use crate::setup::Step;

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

/// A first run: the daemon lists built-in profiles, none with a key, none the default.
fn first_run(now: Instant) -> App {
    let mut app = App::new(CWD.to_owned(), Startup::Choose, None, None);
    app.client_env = |_| None;
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![
            profile("deepseek-v4-pro", false, false, Some("DEEPSEEK_API_KEY")),
            profile("kimi-for-coding", false, false, Some("KIMI_API_KEY")),
            profile("local-vllm", true, false, None),
        ]),
        now,
    );
    app.on_reply(Reply::Sessions(Vec::new()), now);
    app.outbox.clear();
    app
}

#[test]
fn the_first_run_picks_a_profile_and_stores_the_pasted_key() {
    let now = Instant::now();
    let mut app = first_run(now);
    let setup = app.setup.as_ref().expect("the setup is offered");
    // A profile that needs no key is not one to paste a key for.
    let names: Vec<&str> = setup.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["deepseek-v4-pro", "kimi-for-coding"]);
    press(&mut app, KeyCode::Down, now);
    press(&mut app, KeyCode::Enter, now);
    // Typing goes to the key, not to the prompt; a paste's line break is dropped.
    type_text(&mut app, "sk-", now);
    app.on_terminal(TermEvent::Paste("kimi-secret\n".to_owned()), now);
    assert!(app.editor.text().is_empty());
    press(&mut app, KeyCode::Enter, now);
    let [Request::SetKey(params)] = &app.outbox[..] else {
        panic!("expected config/setKey: {:?}", app.outbox);
    };
    assert_eq!(
        (params.profile.as_str(), params.key.as_str()),
        ("kimi-for-coding", "sk-kimi-secret")
    );
    // The outbox's Debug (in logs, in panics) never shows the key.
    assert!(!format!("{:?}", app.outbox).contains("kimi-secret"));
    app.outbox.clear();
    app.on_reply(
        Reply::KeyStored {
            profile: "kimi-for-coding".to_owned(),
        },
        now,
    );
    assert!(app.setup.is_none());
    assert!(matches!(app.outbox[..], [Request::ListProfiles]));
    assert_eq!(
        app.session.as_ref().map(|s| s.profile.as_str()),
        Some("kimi-for-coding")
    );
    assert!(transcript_text(&mut app).contains("key stored for profile kimi-for-coding"));
    // The session starts on the profile the key is for.
    app.outbox.clear();
    type_text(&mut app, "hello", now);
    press(&mut app, KeyCode::Enter, now);
    let [Request::Open(Open::New { params, .. })] = &app.outbox[..] else {
        panic!("expected the session to be created: {:?}", app.outbox);
    };
    assert_eq!(params.profile.as_deref(), Some("kimi-for-coding"));
}

#[test]
fn a_refused_key_asks_again_and_escape_leaves_saying_how_to_do_it_by_hand() {
    let now = Instant::now();
    let mut app = first_run(now);
    press(&mut app, KeyCode::Enter, now);
    // Nothing pasted yet: not sent.
    press(&mut app, KeyCode::Enter, now);
    assert!(app.outbox.is_empty());
    type_text(&mut app, "sk-x", now);
    press(&mut app, KeyCode::Enter, now);
    app.on_reply(
        Reply::Failed {
            action: Action::SetKey,
            message: "cannot write config.json: read-only file system".to_owned(),
            code: None,
        },
        now,
    );
    let setup = app.setup.as_ref().expect("still in the setup");
    assert!(matches!(&setup.step, Step::Key(key) if key.is_empty()));
    assert_eq!(
        setup.error.as_deref(),
        Some("cannot write config.json: read-only file system")
    );
    // Esc goes back to the profiles, a second Esc leaves.
    press(&mut app, KeyCode::Esc, now);
    assert!(app.exit.is_none());
    press(&mut app, KeyCode::Esc, now);
    let Some(Exit::Failed(message)) = &app.exit else {
        panic!("expected to leave with the way by hand: {:?}", app.exit);
    };
    assert!(
        message.contains("cwcode-cli config set-key PROFILE"),
        "{message}"
    );
    assert!(
        message.contains("deepseek-v4-pro: DEEPSEEK_API_KEY"),
        "{message}"
    );
}

#[test]
fn no_setup_when_a_profile_is_ready_or_one_was_asked_for() {
    let now = Instant::now();
    let mut app = App::new(CWD.to_owned(), Startup::New, Some("mine".to_owned()), None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![profile("deepseek", false, false, None)]),
        now,
    );
    assert!(app.setup.is_none());
    let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![
            profile("deepseek", false, false, None),
            profile("local", true, true, None),
        ]),
        now,
    );
    assert!(app.setup.is_none());
    // A default without its key is no more ready than none.
    let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![profile("deepseek", false, true, None)]),
        now,
    );
    assert!(app.setup.is_some());
    // Offered once: a later list (after /model) does not bring it back.
    let mut app = first_run(now);
    press(&mut app, KeyCode::Esc, now);
    app.exit = None;
    app.setup = None;
    app.on_reply(Reply::Profiles(app.profiles.clone()), now);
    assert!(app.setup.is_none());
}
