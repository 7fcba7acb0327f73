//! Session mapping: how a daemon session looks to an editor. Its modes become ACP session modes,
//! its provider profile a select config option, and `session/list` shows the daemon's sessions
//! of one workspace, newest first, each with a title a person can tell apart.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigSelectOption, SessionInfo as AcpSessionInfo, SessionMode,
    SessionModeState,
};
use cwcode_protocol::{Mode, ProfileInfo, SessionInfo};

/// The config option that switches the session's provider profile.
pub const PROFILE_OPTION: &str = "profile";
/// Sessions per `session/list` page; the cursor is the index of the next one.
pub const LIST_PAGE: usize = 50;
/// Characters of a prompt's first line kept as a title.
const TITLE_CHARS: usize = 80;

pub fn mode_state(current: Mode) -> SessionModeState {
    let modes = Mode::ALL
        .into_iter()
        .map(|mode| SessionMode::new(mode.as_str(), mode_name(mode)).description(mode_blurb(mode)))
        .collect();
    SessionModeState::new(current.as_str(), modes)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "Plan",
        Mode::Code => "Code",
        Mode::Yolo => "Yolo",
    }
}

fn mode_blurb(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "Read-only tools: the model investigates and plans, it changes nothing",
        Mode::Code => "Every tool; each change (write, edit, shell) asks you first",
        Mode::Yolo => "Every tool, approved without asking",
    }
}

/// The profile selector, with `current` chosen. A current profile missing from the list (the
/// config changed since) is still shown, so the editor never displays a value it cannot name.
pub fn config_options(current: &str, profiles: &[ProfileInfo]) -> Vec<SessionConfigOption> {
    let mut choices: Vec<SessionConfigSelectOption> = profiles
        .iter()
        .map(|profile| {
            SessionConfigSelectOption::new(profile.name.clone(), profile.name.clone())
                .description(profile.model.clone())
        })
        .collect();
    if !profiles.iter().any(|profile| profile.name == current) {
        choices.push(SessionConfigSelectOption::new(
            current.to_owned(),
            current.to_owned(),
        ));
    }
    vec![
        SessionConfigOption::select(PROFILE_OPTION, "Profile", current.to_owned(), choices)
            .description("The provider profile (model and endpoint) of the next requests"),
    ]
}

/// Whether `session` belongs to the editor's workspace `cwd`.
pub fn in_workspace(session: &SessionInfo, cwd: &Path) -> bool {
    let wanted = canonical(cwd);
    canonical(Path::new(&session.cwd)) == wanted
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Sessions newest first (by last update, then creation), damaged ones left out: an editor
/// could not open them.
pub fn newest_first(mut sessions: Vec<SessionInfo>) -> Vec<SessionInfo> {
    sessions.retain(|session| session.damaged.is_none());
    sessions.sort_by(|a, b| {
        b.updated
            .cmp(&a.updated)
            .then_with(|| b.created.cmp(&a.created))
    });
    sessions
}

/// Whether the session's title is only the daemon's default (the workspace's directory name),
/// which every session of a workspace shares.
pub fn has_default_title(session: &SessionInfo) -> bool {
    let base = Path::new(&session.cwd)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| session.cwd.clone());
    session.title.trim().is_empty() || session.title == base
}

/// A title from the first prompt's first non-empty line, bounded; `None` when there is none.
pub fn title_from_prompt(prompt: &str) -> Option<String> {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

pub fn listed(session: &SessionInfo, title: String) -> AcpSessionInfo {
    AcpSessionInfo::new(session.id.clone(), PathBuf::from(&session.cwd))
        .title(title)
        .updated_at(session.updated.clone())
}

/// The page of `sessions` starting at `cursor` (an index sent back by the previous page).
pub fn page(sessions: &[SessionInfo], cursor: Option<&str>) -> Result<(usize, usize), String> {
    let start = match cursor {
        None => 0,
        Some(text) => text.parse::<usize>().map_err(|_| {
            format!("bad cursor `{text}`: pass the nextCursor of the previous session/list page")
        })?,
    };
    let start = start.min(sessions.len());
    Ok((start, (start + LIST_PAGE).min(sessions.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, cwd: &str, title: &str, updated: &str) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            title: title.into(),
            cwd: cwd.into(),
            profile: "fake".into(),
            mode: Mode::Code,
            status: cwcode_protocol::SessionStatus::Idle,
            created: "2026-01-01T00:00:00Z".into(),
            updated: updated.into(),
            turns: 0,
            last_seq: 0,
            damaged: None,
            goal: None,
        }
    }

    #[test]
    fn the_default_title_is_replaced_by_the_first_prompt_line() {
        let plain = session("a", "/w/shop", "shop", "1");
        assert!(has_default_title(&plain));
        assert!(!has_default_title(&session(
            "b",
            "/w/shop",
            "fix the cart",
            "1"
        )));
        assert_eq!(
            title_from_prompt("\n  fix the cart total\nand more").as_deref(),
            Some("fix the cart total")
        );
        assert_eq!(title_from_prompt(" \n "), None);
        let long = "x".repeat(200);
        assert_eq!(title_from_prompt(&long).unwrap().chars().count(), 81);
    }

    #[test]
    fn sessions_are_newest_first_and_paged() {
        let sorted = newest_first(vec![
            session("old", "/w", "", "2026-01-01T00:00:00Z"),
            session("new", "/w", "", "2026-02-01T00:00:00Z"),
        ]);
        assert_eq!(sorted[0].id, "new");
        assert_eq!(page(&sorted, None).unwrap(), (0, 2));
        assert_eq!(page(&sorted, Some("1")).unwrap(), (1, 2));
        assert!(
            page(&sorted, Some("zz"))
                .unwrap_err()
                .contains("nextCursor")
        );
    }

    #[test]
    fn an_unknown_current_profile_is_still_offered() {
        let options = config_options("gone", &[]);
        let json = serde_json::to_value(&options).unwrap();
        assert_eq!(json[0]["currentValue"], "gone");
        assert_eq!(json[0]["options"][0]["value"], "gone");
    }
}
