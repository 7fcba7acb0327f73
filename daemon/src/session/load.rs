//! Reading a session directory back, and writing a new one. What can be rebuilt is rebuilt (a
//! damaged `session.json` from the journal and `system.md`, a missing `system.md` from the
//! workspace) and noted for `doctor`; a session that cannot be loaded is reported with the
//! reason and the fix, never dropped from sight.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cwcode_protocol::{Event, EventKind, Mode, SessionInfo, SessionStatus, TodoItem};

use super::{INFO_FILE, JOURNAL_FILE, SYSTEM_PROMPT_FILE, SessionError, Work, write_info};
use crate::agent;
use crate::journal::Journal;
use crate::store::{Durability, atomic_write};
use crate::util::now_rfc3339;

/// Where a damaged `session.json` is kept once it has been rebuilt.
const DAMAGED_INFO_FILE: &str = "session.json.damaged";

/// A session directory read back.
pub(super) struct Loaded {
    pub info: SessionInfo,
    pub system_prompt: String,
    pub journal: Journal,
    pub events: Vec<Event>,
    /// What was repaired or left out on the way, for `doctor`.
    pub notes: Vec<String>,
}

/// Whether `dir` holds a session at all: a directory without any of its files is a leftover
/// (a creation that failed before writing anything) and not listed.
pub(super) fn looks_like_session(dir: &Path) -> bool {
    dir.is_dir()
        && [INFO_FILE, JOURNAL_FILE, SYSTEM_PROMPT_FILE]
            .iter()
            .any(|name| dir.join(name).exists())
}

/// Reads a session directory, or says why it cannot be used and how to fix it.
/// `default_profile` is the profile a rebuilt `session.json` gets when the journal names none.
pub(super) fn load(dir: &Path, default_profile: &str) -> Result<Loaded, String> {
    let id = dir_name(dir);
    let journal_path = dir.join(JOURNAL_FILE);
    if journal_path.is_dir() {
        return Err(format!(
            "{} is a directory, not a journal: move it aside to start this session's history \
             afresh, or delete the session with `cwcode-cli rm {id}`",
            journal_path.display()
        ));
    }
    let (journal, events) = Journal::open(&journal_path).map_err(|error| {
        format!(
            "{error}. Make the file readable (check the disk and its permissions) and restart \
             the daemon, or delete the session with `cwcode-cli rm {id}`"
        )
    })?;
    let mut notes: Vec<String> = journal
        .damage()
        .map(ToString::to_string)
        .into_iter()
        .collect();
    let info_path = dir.join(INFO_FILE);
    let mut info = match read_info(&info_path) {
        Ok(info) => info,
        Err(problem) => {
            let info = rebuild_info(dir, &events, default_profile).map_err(|why| {
                format!(
                    "{problem}, and it cannot be rebuilt: {why}. Restore the file from a backup, \
                     or delete the session with `cwcode-cli rm {id}`"
                )
            })?;
            notes.push(keep_rebuilt_info(dir, &info, &problem));
            info
        }
    };
    // The journal is the truth: a change it records may have missed session.json.
    reconcile(&mut info, &events);
    let system_prompt = match std::fs::read_to_string(dir.join(SYSTEM_PROMPT_FILE)) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let text = agent::prompt::system_prompt(Path::new(&info.cwd));
            let path = dir.join(SYSTEM_PROMPT_FILE);
            let saved = match atomic_write(&path, text.as_bytes(), Durability::Synced) {
                Ok(()) => "and saved".to_owned(),
                Err(error) => format!("but not saved ({error})"),
            };
            notes.push(format!(
                "{} was missing: rebuilt from the workspace {saved}",
                path.display()
            ));
            text
        }
        Err(error) => {
            return Err(format!(
                "cannot read {}: {error}. Make it readable and restart the daemon, or delete \
                 the session with `cwcode-cli rm {id}`",
                dir.join(SYSTEM_PROMPT_FILE).display()
            ));
        }
    };
    Ok(Loaded {
        info,
        system_prompt,
        journal,
        events,
        notes,
    })
}

/// What a session that cannot be loaded is listed as.
pub(super) fn damaged_info(dir: &Path, reason: String) -> SessionInfo {
    let readable = read_info(&dir.join(INFO_FILE)).ok();
    let updated = std::fs::metadata(dir)
        .and_then(|metadata| metadata.modified())
        .map(|time| humantime::format_rfc3339_millis(time).to_string())
        .unwrap_or_else(|_| now_rfc3339());
    let id = dir_name(dir);
    SessionInfo {
        title: readable
            .as_ref()
            .map_or_else(|| "(damaged)".to_owned(), |info| info.title.clone()),
        cwd: readable
            .as_ref()
            .map(|info| info.cwd.clone())
            .unwrap_or_default(),
        profile: readable
            .as_ref()
            .map(|info| info.profile.clone())
            .unwrap_or_default(),
        mode: readable.as_ref().map(|info| info.mode).unwrap_or_default(),
        status: SessionStatus::Idle,
        created: readable
            .as_ref()
            .map_or_else(|| updated.clone(), |info| info.created.clone()),
        updated,
        turns: 0,
        last_seq: 0,
        damaged: Some(reason),
        goal: None,
        id,
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_info(path: &Path) -> Result<SessionInfo, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let mut info: SessionInfo = serde_json::from_str(&text)
        .map_err(|error| format!("{} is not valid: {error}", path.display()))?;
    info.damaged = None;
    Ok(info)
}

/// The metadata as the journal and the system prompt tell it.
fn rebuild_info(
    dir: &Path,
    events: &[Event],
    default_profile: &str,
) -> Result<SessionInfo, String> {
    let prompt_path = dir.join(SYSTEM_PROMPT_FILE);
    let prompt = std::fs::read_to_string(&prompt_path).map_err(|error| {
        format!(
            "the workspace is named only there and in {}, which is unreadable: {error}",
            prompt_path.display()
        )
    })?;
    let cwd = workspace_of(&prompt).ok_or_else(|| {
        format!(
            "{} does not name the session's workspace",
            prompt_path.display()
        )
    })?;
    let now = now_rfc3339();
    let mut info = SessionInfo {
        id: dir_name(dir),
        title: default_title(Path::new(&cwd)),
        cwd,
        profile: default_profile.to_owned(),
        mode: Mode::default(),
        status: SessionStatus::Idle,
        created: events
            .first()
            .map_or_else(|| now.clone(), |event| event.time.clone()),
        updated: events.last().map_or(now, |event| event.time.clone()),
        turns: 0,
        last_seq: 0,
        damaged: None,
        goal: None,
    };
    reconcile(&mut info, events);
    Ok(info)
}

/// The workspace a system prompt was built for: the one that builds the same prompt, or, if
/// the prompt's wording has changed since, the directory it names when that still exists.
fn workspace_of(prompt: &str) -> Option<String> {
    const BEFORE: &str = "in the repository at ";
    const AFTER: &str = " on the user's machine.";
    let start = prompt.find(BEFORE)? + BEFORE.len();
    let length = prompt[start..].find(AFTER)?;
    let candidate = &prompt[start..start + length];
    let same = agent::prompt::system_prompt(Path::new(candidate)) == prompt;
    (same || Path::new(candidate).is_dir()).then(|| candidate.to_owned())
}

/// Saves the rebuilt metadata, keeping the damaged file beside it, and says what was done.
fn keep_rebuilt_info(dir: &Path, info: &SessionInfo, problem: &str) -> String {
    let info_path = dir.join(INFO_FILE);
    let kept: PathBuf = dir.join(DAMAGED_INFO_FILE);
    let mut note = format!("{problem}: rebuilt from the journal and system.md");
    if info_path.exists() {
        match std::fs::rename(&info_path, &kept) {
            Ok(()) => note.push_str(&format!(
                " (the damaged file is kept as {})",
                kept.display()
            )),
            Err(error) => note.push_str(&format!(" (cannot move the damaged file aside: {error})")),
        }
    }
    if let Err(error) = write_info(dir, info) {
        note.push_str(&format!("; not saved yet: {error}"));
    }
    note
}

/// Mode and profile as the journal last recorded them.
fn reconcile(info: &mut SessionInfo, events: &[Event]) {
    for event in events {
        match &event.kind {
            EventKind::ModeChanged { mode } => info.mode = *mode,
            EventKind::ProfileChanged { profile } => info.profile.clone_from(profile),
            _ => {}
        }
    }
}

/// The turn number after the largest one the journal mentions.
pub(super) fn next_turn(events: &[Event]) -> u32 {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::PromptQueued { turn, .. } | EventKind::TurnStarted { turn, .. } => {
                Some(*turn)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
        + 1
}

/// The todo list as the journal last recorded it.
pub(super) fn last_todos(events: &[Event]) -> Vec<TodoItem> {
    events
        .iter()
        .rev()
        .find_map(|event| match &event.kind {
            EventKind::TodoUpdated { todos } => Some(todos.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Prompts that were queued and never started, in order: they run after a restart.
pub(super) fn pending_prompts(events: &[Event]) -> Vec<Work> {
    let mut pending: BTreeMap<u32, String> = BTreeMap::new();
    for event in events {
        match &event.kind {
            EventKind::PromptQueued { turn, prompt } => {
                pending.insert(*turn, prompt.clone());
            }
            EventKind::TurnStarted { turn, .. } => {
                pending.remove(turn);
            }
            _ => {}
        }
    }
    pending
        .into_iter()
        .map(|(turn, text)| Work::Prompt { turn, text })
        .collect()
}

/// Writes a new session's files, each readable by its owner only, and opens its journal.
pub(super) fn write_new_session(
    dir: &Path,
    info: &SessionInfo,
    system_prompt: &str,
) -> Result<Journal, SessionError> {
    atomic_write(
        &dir.join(SYSTEM_PROMPT_FILE),
        system_prompt.as_bytes(),
        Durability::Synced,
    )?;
    write_info(dir, info)?;
    let (journal, _) = Journal::open(&dir.join(JOURNAL_FILE))?;
    Ok(journal)
}

pub(super) fn default_title(workspace: &Path) -> String {
    workspace
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| workspace.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_read_back_from_the_system_prompt() {
        let prompt = agent::prompt::system_prompt(Path::new("/src/shop"));
        assert_eq!(workspace_of(&prompt).as_deref(), Some("/src/shop"));
        assert_eq!(workspace_of("You are someone else."), None);
    }

    #[test]
    fn a_corrupt_session_json_is_rebuilt_from_the_journal_and_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("0193abcd");
        let workspace = dir.path().join("shop");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(
            session.join(SYSTEM_PROMPT_FILE),
            agent::prompt::system_prompt(&workspace),
        )
        .unwrap();
        let (mut journal, _) = Journal::open(&session.join(JOURNAL_FILE)).unwrap();
        journal
            .append(EventKind::ModeChanged { mode: Mode::Yolo })
            .unwrap();
        drop(journal);
        std::fs::write(session.join(INFO_FILE), "{\"id\": \"0193ab").unwrap();

        let loaded = load(&session, "fake").unwrap();
        assert_eq!(loaded.info.id, "0193abcd");
        assert_eq!(loaded.info.cwd, workspace.display().to_string());
        assert_eq!(loaded.info.title, "shop");
        assert_eq!(loaded.info.mode, Mode::Yolo);
        assert_eq!(loaded.info.profile, "fake");
        assert!(loaded.notes[0].contains("rebuilt"), "{:?}", loaded.notes);
        assert!(session.join(DAMAGED_INFO_FILE).is_file());
        assert_eq!(read_info(&session.join(INFO_FILE)).unwrap(), loaded.info);
    }

    #[test]
    fn a_session_that_cannot_be_rebuilt_says_which_file_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("0193abcd");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join(INFO_FILE), "not json").unwrap();
        let reason = load(&session, "fake").err().unwrap();
        assert!(reason.contains("session.json is not valid"), "{reason}");
        assert!(reason.contains("system.md"), "{reason}");
        assert!(reason.contains("cwcode-cli rm 0193abcd"), "{reason}");
        let info = damaged_info(&session, reason);
        assert_eq!(info.id, "0193abcd");
        assert!(info.damaged.is_some());
    }
}
