//! Project instructions: the user's `~/.cwcode/AGENTS.md` and the workspace's `AGENTS.md` (or
//! `CLAUDE.md` where there is no AGENTS.md). They enter a session once, at its start, at the end
//! of the system prompt, so the prompt's bytes stay the same for the whole session (SPEC §6); a
//! change made while the session runs reaches the model as a message at the end of the history.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The line that opens the instructions in the system prompt; what follows it to the end of the
/// prompt is the block in force when the session started.
const HEADER: &str = "# Project instructions\n";
/// The most read of one file: instructions are context, not a corpus, and every byte of them is
/// paid for in every request.
const MAX_FILE_BYTES: usize = 32 * 1024;

/// Where a session's instructions come from.
#[derive(Debug, Clone)]
pub struct InstructionFiles {
    user: PathBuf,
    workspace: PathBuf,
}

/// The instructions as read at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Instructions {
    /// The files they came from, as shown to the user (`~/.cwcode/AGENTS.md`, `AGENTS.md`).
    pub sources: Vec<String>,
    /// The text that goes to the model, starting with [`HEADER`]; empty when there are none.
    pub block: String,
}

impl InstructionFiles {
    pub fn new(home: &Path, workspace: &Path) -> Self {
        Self {
            user: home.join("AGENTS.md"),
            workspace: workspace.to_owned(),
        }
    }

    /// Reads the files as they are now. Blocking: call it off the async workers.
    pub fn read(&self) -> Instructions {
        let mut sections = Vec::new();
        if let Some(text) = read_bounded(&self.user) {
            sections.push(("~/.cwcode/AGENTS.md".to_owned(), text));
        }
        let project = ["AGENTS.md", "CLAUDE.md"]
            .into_iter()
            .find_map(|name| read_bounded(&self.workspace.join(name)).map(|text| (name, text)));
        if let Some((name, text)) = project {
            sections.push((name.to_owned(), text));
        }
        if sections.is_empty() {
            return Instructions::default();
        }
        let mut block = HEADER.to_owned();
        block.push_str("Follow these instructions from the user and the repository unless the user says otherwise.\n");
        for (source, text) in &sections {
            block.push_str(&format!("\n## {source}\n{}\n", text.trim_end()));
        }
        Instructions {
            sources: sections.into_iter().map(|(source, _)| source).collect(),
            block,
        }
    }
}

/// The system prompt with the instructions appended.
pub fn with_instructions(prompt: String, instructions: &Instructions) -> String {
    if instructions.block.is_empty() {
        return prompt;
    }
    format!("{prompt}\n\n{}", instructions.block)
}

/// The instructions block a system prompt was built with (empty when it has none).
pub fn in_prompt(system_prompt: &str) -> &str {
    system_prompt
        .find(&format!("\n\n{HEADER}"))
        .map_or("", |start| &system_prompt[start + 2..])
}

/// How a change of the instructions during a session is put to the model.
pub fn notice(block: &str) -> String {
    if block.is_empty() {
        "[cwcode] The project instructions (AGENTS.md) were removed during this session: the earlier ones no longer apply.".to_owned()
    } else {
        format!(
            "[cwcode] The project instructions changed during this session; from now on they are:\n\n{block}"
        )
    }
}

/// A file's text, at most [`MAX_FILE_BYTES`] of it (with a note when cut); `None` when it is
/// missing, empty or cannot be read.
fn read_bounded(path: &Path) -> Option<String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read project instructions");
            return None;
        }
    };
    if !file.metadata().is_ok_and(|metadata| metadata.is_file()) {
        return None;
    }
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_FILE_BYTES).unwrap_or(u64::MAX) + 1;
    if let Err(error) = file.take(limit).read_to_end(&mut bytes) {
        tracing::warn!(path = %path.display(), %error, "cannot read project instructions");
        return None;
    }
    let cut = bytes.len() > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        // A multi-byte character split by the cut shows as one replacement character.
        text.push_str(&format!(
            "\n[cwcode: cut at {} KiB; the rest of this file is not shown]",
            MAX_FILE_BYTES / 1024
        ));
    }
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(home: &Path, workspace: &Path) -> InstructionFiles {
        InstructionFiles::new(home, workspace)
    }

    #[test]
    fn reads_the_users_and_the_workspaces_agents_md_in_that_order() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("AGENTS.md"), "Answer in English.\n").unwrap();
        std::fs::write(workspace.path().join("AGENTS.md"), "Run `make check`.\n").unwrap();
        std::fs::write(workspace.path().join("CLAUDE.md"), "ignored").unwrap();
        let read = files(home.path(), workspace.path()).read();
        assert_eq!(read.sources, ["~/.cwcode/AGENTS.md", "AGENTS.md"]);
        let user = read.block.find("Answer in English.").unwrap();
        let project = read.block.find("Run `make check`.").unwrap();
        assert!(user < project);
        assert!(!read.block.contains("ignored"));
    }

    #[test]
    fn falls_back_to_claude_md_and_to_nothing() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        assert_eq!(
            files(home.path(), workspace.path()).read(),
            Instructions::default()
        );
        std::fs::write(workspace.path().join("CLAUDE.md"), "Use tabs.").unwrap();
        let read = files(home.path(), workspace.path()).read();
        assert_eq!(read.sources, ["CLAUDE.md"]);
        assert!(read.block.contains("Use tabs."));
    }

    #[test]
    fn a_huge_file_is_cut_with_a_note() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("AGENTS.md"), "x".repeat(1 << 20)).unwrap();
        let read = files(home.path(), workspace.path()).read();
        assert!(read.block.len() < MAX_FILE_BYTES + 512);
        assert!(read.block.contains("cut at 32 KiB"));
    }

    #[test]
    fn the_block_is_found_again_in_the_prompt_it_was_appended_to() {
        let instructions = Instructions {
            sources: vec!["AGENTS.md".into()],
            block: format!("{HEADER}\n## AGENTS.md\nbe brief\n"),
        };
        let prompt = with_instructions("You are cwcode.".into(), &instructions);
        assert_eq!(in_prompt(&prompt), instructions.block);
        assert_eq!(in_prompt("You are cwcode."), "");
        assert_eq!(
            with_instructions("You are cwcode.".into(), &Instructions::default()),
            "You are cwcode."
        );
    }
}
