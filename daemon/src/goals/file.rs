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
    failed_checks: &[super::state::CheckFailure],
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
mod tests {
    use super::*;

    const HAND_WRITTEN: &str = "\
# Release 1.2

Some notes the user keeps here.

- [ ] write the changelog
- [x] bump the version
* [X] tag the release candidate
+ [ ]   announce it\t
  - [ ] nested: update the docs site
1. [ ] numbered goal
2) [x] numbered and done
- [] not a box
- [ ]no space after the box
-[ ] no space after the bullet
- [ ]
- [x]   
- a plain list item
> - [ ] quoted, not a goal

```markdown
- [ ] an example in a fence, not a goal
```
~~~~
- [ ] still fenced
```
- [ ] still fenced: a shorter or different fence does not close it
~~~~
- [ ] after the fences
";

    #[test]
    fn task_items_are_found_with_any_bullet_box_case_and_indentation() {
        let goals = GoalList::parse(HAND_WRITTEN);
        let found: Vec<(&str, bool, usize)> = goals
            .items
            .iter()
            .map(|goal| (goal.text.as_str(), goal.done, goal.line))
            .collect();
        assert_eq!(
            found,
            [
                ("write the changelog", false, 5),
                ("bump the version", true, 6),
                ("tag the release candidate", true, 7),
                ("announce it", false, 8),
                ("nested: update the docs site", false, 9),
                ("numbered goal", false, 10),
                ("numbered and done", true, 11),
                ("after the fences", false, 28),
            ]
        );
        assert_eq!(goals.done_count(), 3);
        assert_eq!(goals.left_count(), 5);
        let unchecked: Vec<&str> = goals.unchecked().map(|goal| goal.text.as_str()).collect();
        assert_eq!(unchecked[0], "write the changelog");
        assert_eq!(unchecked[4], "after the fences");
    }

    #[test]
    fn crlf_files_parse_without_carriage_returns() {
        let goals = GoalList::parse("- [ ] one\r\n- [x] two\r\n");
        assert_eq!(goals.items[0].text, "one");
        assert_eq!(goals.items[1].text, "two");
        assert!(goals.items[1].done);
    }

    #[test]
    fn a_missing_file_has_no_goals() {
        let dir = tempfile::tempdir().unwrap();
        let goals = GoalList::load(&dir.path().join("goals.md")).unwrap();
        assert!(goals.items.is_empty());
        assert_eq!(goals.left_count(), 0);
    }

    #[test]
    fn append_creates_the_file_with_a_header_and_readable_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        append(&path, "first goal").unwrap();
        append(&path, "  second\n goal  ").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(HEADER), "{text}");
        assert!(
            text.ends_with("- [ ] first goal\n- [ ] second goal\n"),
            "{text}"
        );
        let goals = GoalList::parse(&text);
        assert_eq!(goals.left_count(), 2, "the header's example is no goal");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o600,
            0o600,
            "not a 0600 temp file's mode only: {mode:o}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["goals.md"], "no temporary file is left behind");
    }

    #[test]
    fn append_keeps_every_byte_of_a_hand_edited_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        let mut original = HAND_WRITTEN.as_bytes().to_vec();
        original.extend_from_slice(b"trailing line without newline \xff\xfe");
        std::fs::write(&path, &original).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();

        append(&path, "- [ ] typed with its box").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(&original));
        assert_eq!(&bytes[original.len()..], b"\n- [ ] typed with its box\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn append_follows_the_files_line_endings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        std::fs::write(&path, "# Goals\r\n- [x] done").unwrap();
        append(&path, "next").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Goals\r\n- [x] done\r\n- [ ] next\r\n"
        );
    }

    #[test]
    fn append_writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.md");
        let link = dir.path().join("goals.md");
        std::fs::write(&real, "- [ ] one\n").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        append(&link, "two").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(&real).unwrap(),
            "- [ ] one\n- [ ] two\n"
        );
    }

    #[test]
    fn an_empty_goal_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        for text in ["", "  \n\t ", "- [ ] "] {
            assert!(matches!(append(&path, text), Err(GoalsError::EmptyGoal)));
        }
        assert!(!path.exists());
    }

    #[test]
    fn a_hand_edit_saved_during_an_append_is_kept_and_the_goal_still_added() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        std::fs::write(&path, "- [ ] one\n").unwrap();
        let mut saves = 0;
        append_with(&path, "two", || {
            if saves == 0 {
                std::fs::write(&path, "- [x] one\n- [ ] typed by hand\n").unwrap();
            }
            saves += 1;
        })
        .unwrap();
        assert_eq!(saves, 2, "the append started over once");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "- [x] one\n- [ ] typed by hand\n- [ ] two\n"
        );
    }

    #[test]
    fn a_file_that_never_settles_is_left_as_the_user_saved_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        let mut saves = 0;
        let result = append_with(&path, "two", || {
            saves += 1;
            std::fs::write(&path, format!("save {saves}\n")).unwrap();
        });
        assert!(matches!(result, Err(GoalsError::KeptChanging { .. })));
        assert_eq!(saves, ATTEMPTS);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("save {ATTEMPTS}\n")
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn a_file_created_during_the_first_append_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        let mut created = false;
        append_with(&path, "mine", || {
            if !created {
                std::fs::write(&path, "- [ ] theirs\n").unwrap();
                created = true;
            }
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "- [ ] theirs\n- [ ] mine\n"
        );
    }

    #[test]
    fn goals_added_at_once_by_several_clients_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        std::thread::scope(|scope| {
            for client in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    for index in 0..10 {
                        append(path, &format!("goal {client}.{index}")).unwrap();
                    }
                });
            }
        });
        assert_eq!(GoalList::load(&path).unwrap().left_count(), 40);
    }

    #[test]
    fn the_continuation_message_lists_only_unchecked_goals_and_says_how_to_check_one() {
        let goals = GoalList::parse("- [x] done already\n- [ ] write tests\n* [ ] fix the bug\n");
        let message = continuation_message(&goals, "goals.md", 3, 20, &[]);
        assert!(
            message.starts_with("[cwcode goal loop, cycle 3 of 20]"),
            "{message}"
        );
        assert!(
            message.contains("\n- write tests\n- fix the bug\n"),
            "{message}"
        );
        assert!(!message.contains("done already"));
        assert!(message.contains("`- [ ]` → `- [x]`"));
        assert!(message.contains("cannot be done, say so plainly"));
        assert!(message.len() < 400, "billed every cycle: {}", message.len());
    }

    #[test]
    fn a_trailing_verify_gives_the_goal_its_check() {
        let cases = [
            (
                "the tests pass (verify: cargo test -q)",
                Some("cargo test -q"),
            ),
            (
                "lint (verify: `cargo clippy -- -D warnings`)",
                Some("cargo clippy -- -D warnings"),
            ),
            (
                "cores (verify: test $(nproc) -gt 0)",
                Some("test $(nproc) -gt 0"),
            ),
            ("no check (verify: )", None),
            ("not at the end (verify: true) really", None),
            ("(verify:true)", Some("true")),
            ("plain goal", None),
        ];
        for (text, command) in cases {
            assert_eq!(verify_command(text), command, "{text}");
        }
        assert_eq!(
            verify_command(&format!("x (verify: {})", "a".repeat(2000))),
            None
        );
        let goals = GoalList::parse("- [ ] the tests pass (verify: cargo test -q)\n- [ ] plain\n");
        assert_eq!(goals.items[0].verify.as_deref(), Some("cargo test -q"));
        assert_eq!(
            goals.items[0].text,
            "the tests pass (verify: cargo test -q)"
        );
        assert_eq!(goals.items[1].verify, None);
    }

    #[test]
    fn the_header_documents_the_verify_syntax() {
        assert!(HEADER.contains("(verify: cargo test -q)"));
        assert_eq!(GoalList::parse(HEADER).items.len(), 0);
    }

    #[test]
    fn uncheck_empties_only_that_box_and_keeps_every_other_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        let text =
            "# Mine\r\n- [x] other [x] text\r\n* [X] tests pass (verify: make test)\r\nnote\r\n";
        std::fs::write(&path, text).unwrap();
        assert!(uncheck(&path, "tests pass (verify: make test)").unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Mine\r\n- [x] other [x] text\r\n* [ ] tests pass (verify: make test)\r\nnote\r\n"
        );
        assert!(
            !uncheck(&path, "tests pass (verify: make test)").unwrap(),
            "already open"
        );
        assert!(!uncheck(&path, "no such goal").unwrap());
        assert!(!uncheck(&dir.path().join("missing.md"), "x").unwrap());
    }

    #[test]
    fn a_failed_check_is_reported_to_the_next_cycle_with_its_output() {
        let goals = GoalList::parse("- [ ] tests pass (verify: make test)\n");
        let failure = crate::goals::CheckFailure {
            goal: "tests pass (verify: make test)".to_owned(),
            command: "make test".to_owned(),
            output: "FAILED: test_parse\nexit code 2\n".to_owned(),
        };
        let message = continuation_message(&goals, "goals.md", 2, 20, &[failure]);
        assert!(
            message.contains("- tests pass (verify: make test)\n"),
            "{message}"
        );
        assert!(
            message.contains("The check of \"tests pass (verify: make test)\" failed, so its box was unchecked again. `make test` printed:\n```\nFAILED: test_parse\nexit code 2\n```"),
            "{message}"
        );
    }
}
