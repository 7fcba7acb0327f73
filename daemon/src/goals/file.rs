//! `goals.md`: plain Markdown that the user edits by hand whenever they like, and the model edits
//! with its ordinary tools to check a box. Each task-list item (`- [ ] text`, `- [x] text`) is a
//! goal; every other line is the user's and is never touched.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::store::{AtomicFile, Durability, FileMode};

/// Written above the first goal when `append` creates the file; an HTML comment, so it does not
/// show when the Markdown is rendered.
const HEADER: &str = "# Goals\n\n<!-- cwcode's goal loop works on every unchecked `- [ ]` item \
                      and checks it (`- [x]`) when done. Edit this file freely.\n\
                      A goal may carry a check: `the tests pass (verify: cargo test -q)` at the \
                      end of its line. When its box is checked, cwcode runs the command in the \
                      workspace (sandboxed, with a timeout); if it fails, the box is unchecked \
                      and the next cycle gets the command's output. -->\n\n";

static APPENDING: Mutex<()> = Mutex::new(());

/// How often `append` starts over because the file changed under it before giving up.
const ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum GoalsError {
    #[error("a goal needs some text")]
    EmptyGoal,
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} kept changing while a goal was being added, so nothing was written; try again",
        .path.display()
    )]
    KeptChanging { path: PathBuf },
    /// A request the loop cannot take as given (a budget that is none, a second start), with
    /// what to do instead.
    #[error("{0}")]
    Refused(&'static str),
    #[error(
        "a cost budget needs prices: add \"pricing\" to profile `{profile}` in config.json, or use \
         a token budget"
    )]
    CostWithoutPrices { profile: String },
    #[error(transparent)]
    State(#[from] super::state::StateError),
    #[error("the cycle's events could not be read back: {0}")]
    CycleEvents(#[source] crate::journal::JournalError),
}

/// One task-list item of `goals.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    /// The item's text, trimmed.
    pub text: String,
    pub done: bool,
    /// 1-based line number in the file.
    pub line: usize,
    /// The command of a trailing `(verify: COMMAND)`: the box stays checked only once it
    /// succeeds in the workspace.
    pub verify: Option<String>,
}

/// The goals of one `goals.md`, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoalList {
    pub items: Vec<Goal>,
}

impl GoalList {
    /// Reads the goals of `path`; a missing file has none.
    pub fn load(path: &Path) -> Result<Self, GoalsError> {
        match read_bytes(path)? {
            Some(bytes) => Ok(Self::parse(&String::from_utf8_lossy(&bytes))),
            None => Ok(Self::default()),
        }
    }

    /// Finds the task-list items of Markdown text, skipping fenced code blocks (an example of
    /// the syntax is not a goal).
    pub fn parse(text: &str) -> Self {
        let mut items = Vec::new();
        let mut fence: Option<(char, usize)> = None;
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim_start_matches([' ', '\t']);
            if let Some((marker, length)) = fence_of(trimmed) {
                match fence {
                    None => fence = Some((marker, length)),
                    Some((open, open_length)) if open == marker && length >= open_length => {
                        fence = None;
                    }
                    Some(_) => {}
                }
                continue;
            }
            if fence.is_some() {
                continue;
            }
            if let Some((done, text)) = task_item(trimmed) {
                items.push(Goal {
                    text: text.to_owned(),
                    done,
                    line: index + 1,
                    verify: verify_command(text).map(str::to_owned),
                });
            }
        }
        Self { items }
    }

    pub fn unchecked(&self) -> impl Iterator<Item = &Goal> {
        self.items.iter().filter(|goal| !goal.done)
    }

    pub fn done_count(&self) -> usize {
        self.items.iter().filter(|goal| goal.done).count()
    }

    pub fn left_count(&self) -> usize {
        self.unchecked().count()
    }
}

/// The most bytes a verify command may have; a longer one is no check (and stays plain text).
const MAX_VERIFY_BYTES: usize = 1000;

/// The command of a goal text ending in `(verify: COMMAND)`, backticks around it allowed:
/// `the tests pass (verify: cargo test -q)` gives `cargo test -q`. The first `(verify:` opens
/// it, so the command may hold parentheses of its own.
pub fn verify_command(text: &str) -> Option<&str> {
    let start = text.find("(verify:")?;
    let inner = text[start + "(verify:".len()..].strip_suffix(')')?.trim();
    let inner = inner
        .strip_prefix('`')
        .and_then(|rest| rest.strip_suffix('`'))
        .map_or(inner, str::trim);
    (!inner.is_empty() && inner.len() <= MAX_VERIFY_BYTES && !inner.contains('\n')).then_some(inner)
}

/// A fence line (three or more backticks or tildes) as its character and length.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let marker = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let length = line.chars().take_while(|c| *c == marker).count();
    (length >= 3).then_some((marker, length))
}

/// `- [ ] text` (or `*`, `+`, `1.`, `1)` as the bullet; `[x]` or `[X]` when checked) as
/// (done, text). As in GitHub's task lists, the box must stand alone and be followed by text.
fn task_item(line: &str) -> Option<(bool, &str)> {
    split_task(line).filter(|(_, text)| !text.is_empty())
}

/// A bullet and a box, then whitespace or the end of the line, as (done, the rest trimmed).
fn split_task(line: &str) -> Option<(bool, &str)> {
    let after_bullet = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        line[digits..].strip_prefix(['.', ')'])?
    };
    let rest = after_bullet
        .strip_prefix([' ', '\t'])?
        .trim_start_matches([' ', '\t']);
    let (done, rest) = if let Some(rest) = rest.strip_prefix("[ ]") {
        (false, rest)
    } else if let Some(rest) = rest
        .strip_prefix("[x]")
        .or_else(|| rest.strip_prefix("[X]"))
    {
        (true, rest)
    } else {
        return None;
    };
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((done, rest.trim()))
}

/// Adds `- [ ] TEXT` at the end of `path`, creating it with a short header if it is missing.
///
/// The file is replaced through a temporary file and a rename, so a reader (the daemon's
/// watcher, an editor) never sees half a write. A hand edit saved meanwhile is not lost: the
/// file is read again right before the rename and, if it changed, the append starts over from
/// the user's new bytes. Only a save landing between that last read and the rename itself (a
/// few microseconds) can still be overwritten; editors offer no lock to close that gap. The
/// file keeps its permissions, and a symlink keeps pointing at it.
pub fn append(path: &Path, text: &str) -> Result<(), GoalsError> {
    append_with(path, text, || {})
}

/// `append`, with `meanwhile` run after the new content is written out and before the file is
/// read again: the moment a hand edit would slip in, which the tests use to make one.
fn append_with(path: &Path, text: &str, meanwhile: impl FnMut()) -> Result<(), GoalsError> {
    let goal = goal_text(text).ok_or(GoalsError::EmptyGoal)?;
    rewrite(path, |before| Some(with_goal(before, &goal)), meanwhile).map(drop)
}

/// Unchecks the checked goal whose text is `text` (its check failed), keeping every other byte
/// of the file, the way `append` writes. False when no checked goal has that text any more
/// (the user edited it meanwhile): then nothing is written.
pub fn uncheck(path: &Path, text: &str) -> Result<bool, GoalsError> {
    rewrite(path, |before| without_check(before?, text), || {})
}

/// The file's bytes with the box of the checked goal `text` emptied, or `None` if none is.
fn without_check(bytes: &[u8], text: &str) -> Option<Vec<u8>> {
    let content = String::from_utf8_lossy(bytes);
    let goal = GoalList::parse(&content)
        .items
        .into_iter()
        .find(|goal| goal.done && goal.text == text)?;
    let mut offset = 0;
    for (index, line) in bytes.split_inclusive(|byte| *byte == b'\n').enumerate() {
        if index + 1 == goal.line {
            let at = line
                .windows(3)
                .position(|window| window == b"[x]" || window == b"[X]")?;
            let mut edited = bytes.to_vec();
            edited[offset + at + 1] = b' ';
            return Some(edited);
        }
        offset += line.len();
    }
    None
}

/// Replaces `path` with what `edit` makes of its bytes (`None` when missing), atomically and
/// without losing a hand edit saved meanwhile (see `append`). False when `edit` wanted no change.
fn rewrite(
    path: &Path,
    edit: impl Fn(Option<&[u8]>) -> Option<Vec<u8>>,
    mut meanwhile: impl FnMut(),
) -> Result<bool, GoalsError> {
    // Two appends racing in the daemon (two clients adding goals at once) could both pass the
    // re-read and the second rename would drop the first goal; one at a time, none is lost.
    let _one_at_a_time = APPENDING.lock().unwrap_or_else(PoisonError::into_inner);
    let target = match std::fs::canonicalize(path) {
        Ok(target) => target,
        Err(error) if error.kind() == io::ErrorKind::NotFound => path.to_owned(),
        Err(source) => {
            return Err(GoalsError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let write_error = |source| GoalsError::Write {
        path: target.clone(),
        source,
    };
    for _ in 0..ATTEMPTS {
        let before = read_bytes(&target)?;
        let Some(after) = edit(before.as_deref()) else {
            return Ok(false);
        };
        let mode = match &before {
            Some(_) => FileMode::Exactly(
                std::fs::metadata(&target)
                    .map_err(|source| GoalsError::Read {
                        path: target.clone(),
                        source,
                    })?
                    .permissions()
                    .mode()
                    & 0o7777,
            ),
            // What an editor would create: 0644 under the usual umask.
            None => FileMode::FromUmask,
        };
        let dir = target.parent().unwrap_or_else(|| Path::new("."));
        let mut temp =
            AtomicFile::new_in(dir, ".goals-", mode).map_err(|error| write_error(error.source))?;
        temp.write_all(&after).map_err(write_error)?;
        // Synced before the last read, so that the gap a hand edit could still slip into is
        // the rename alone, not an fsync.
        temp.as_file_mut().sync_all().map_err(write_error)?;
        meanwhile();
        if read_bytes(&target)? != before {
            continue;
        }
        let committed = match before {
            Some(_) => temp.commit(&target, Durability::Synced),
            // Never replace a file someone created since we looked.
            None => temp.commit_new(&target, Durability::Synced),
        };
        match committed {
            Ok(()) => return Ok(true),
            Err(error) if error.source.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(write_error(error.source)),
        }
    }
    Err(GoalsError::KeptChanging { path: target })
}

/// A goal is one line: newlines and runs of spaces become single spaces, and a task-list prefix
/// typed by habit (`- [ ] fix it`) is not doubled.
fn goal_text(text: &str) -> Option<String> {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = split_task(&line).map_or(line.as_str(), |(_, text)| text);
    (!line.is_empty()).then(|| line.to_owned())
}

/// The file's bytes with the goal appended, in the file's own line-ending style.
fn with_goal(existing: Option<&[u8]>, goal: &str) -> Vec<u8> {
    let mut bytes = existing.map_or_else(|| HEADER.as_bytes().to_vec(), <[u8]>::to_vec);
    let newline: &[u8] = if bytes.windows(2).any(|pair| pair == b"\r\n") {
        b"\r\n"
    } else {
        b"\n"
    };
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        bytes.extend_from_slice(newline);
    }
    bytes.extend_from_slice(b"- [ ] ");
    bytes.extend_from_slice(goal.as_bytes());
    bytes.extend_from_slice(newline);
    bytes
}

fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, GoalsError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(GoalsError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The message that starts each cycle of the goal loop. It is billed every cycle, so it says
/// only what the model cannot see for itself: which goals are open, and how to close one.
/// `goals_file` is the file as the model should name it (relative to the workspace when inside).
/// A check that failed is reported first, with its command's bounded output, so the model sees
/// why its box was unchecked.
pub fn continuation_message(
    goals: &GoalList,
    goals_file: &str,
    cycle: u32,
    cap: u32,
    failed_checks: &[super::CheckFailure],
) -> String {
    let mut message =
        format!("[cwcode goal loop, cycle {cycle} of {cap}] Unchecked goals in {goals_file}:\n");
    for goal in goals.unchecked() {
        message.push_str("- ");
        message.push_str(&goal.text);
        message.push('\n');
    }
    for failure in failed_checks {
        message.push_str(&format!(
            "The check of \"{}\" failed, so its box was unchecked again. `{}` printed:\n```\n{}\n```\n",
            failure.goal,
            failure.command,
            failure.output.trim_end()
        ));
    }
    message.push_str(&format!(
        "Work on them in order. When a goal is done, check its box by editing {goals_file} \
         (`- [ ]` → `- [x]`). If a goal cannot be done, say so plainly and why, and leave its \
         box unchecked."
    ));
    message
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
