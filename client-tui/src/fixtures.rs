//! Sessions, events and a ready interface for the tests.

use std::time::Instant;

use cwcode_protocol::{
    CheckpointInfo, Event, EventKind, Mode, PriceTable, ProfileInfo, SessionInfo, SessionStatus,
};

use crate::app::{App, Startup};
use crate::custom::{CustomCommand, CustomCommands};
use crate::daemon::Reply;

pub const CWD: &str = "/home/dev/shop";

pub fn session(id: &str, cwd: &str, title: &str) -> SessionInfo {
    SessionInfo {
        id: id.to_owned(),
        title: title.to_owned(),
        cwd: cwd.to_owned(),
        profile: "deepseek".to_owned(),
        mode: Mode::Code,
        status: SessionStatus::Idle,
        created: "2026-01-02T03:04:05.000Z".to_owned(),
        updated: "2026-01-02T03:04:05.000Z".to_owned(),
        turns: 1,
        last_seq: 0,
        damaged: None,
        goal: None,
    }
}

/// An interface attached to a fresh session whose profile's model is known.
pub fn attached_app(now: Instant) -> App {
    let mut app = App::new(CWD.to_owned(), Startup::New, None, None);
    app.on_reply(Reply::Connected, now);
    app.on_reply(
        Reply::Profiles(vec![ProfileInfo {
            key_env: None,
            name: "deepseek".to_owned(),
            base_url: "https://api.deepseek.com".to_owned(),
            model: "deepseek-chat".to_owned(),
            has_key: true,
            is_default: true,
            context_window: Some(128_000),
            prices: Some(PriceTable {
                currency: "USD".to_owned(),
                input_hit: 0.07,
                input_miss: 0.27,
                output: 1.10,
            }),
        }]),
        now,
    );
    app.on_reply(
        Reply::Attached(session("0198a1b2c3d4e5f6", CWD, "shop")),
        now,
    );
    app.outbox.clear();
    app
}

/// Two custom commands, as if read from `.cwcode/commands/` and `~/.cwcode/commands/`.
pub fn custom_commands() -> CustomCommands {
    let command = |name: &str, text: &str, about: &str, origin| CustomCommand {
        name: name.to_owned(),
        text: text.to_owned(),
        about: about.to_owned(),
        origin,
    };
    CustomCommands {
        commands: vec![
            command(
                "review",
                "Review $ARGUMENTS for bugs and missing tests.",
                "Review $ARGUMENTS for bugs and missing tests.",
                "workspace",
            ),
            command(
                "release-notes",
                "Draft release notes from git log.",
                "draft release notes from the log",
                "user",
            ),
        ],
        skipped: Vec::new(),
    }
}

/// Feeds events to the app as the daemon would. Their `seq` only tells the replay from live
/// events, and these sessions have no replay.
pub fn feed(app: &mut App, now: Instant, kinds: impl IntoIterator<Item = EventKind>) {
    for (index, kind) in kinds.into_iter().enumerate() {
        let event = Event {
            seq: index as u64 + 1,
            time: "2026-01-02T03:04:05.000Z".to_owned(),
            parent_call_id: None,
            kind,
        };
        app.on_reply(Reply::Event(event), now);
    }
}

pub fn checkpoint(turn: u32, prompt: &str, files: &[&str]) -> CheckpointInfo {
    CheckpointInfo {
        turn,
        prompt: prompt.to_owned(),
        time: format!("2026-01-02T03:{:02}:05.000Z", turn * 7),
        files: files.iter().map(|file| (*file).to_owned()).collect(),
    }
}
