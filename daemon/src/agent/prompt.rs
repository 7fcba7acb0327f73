//! The system prompt. It is built once per session, stored beside the journal, and never
//! changes: no clock, no counters, no per-turn state (SPEC §6). What changes later enters the
//! conversation as new messages at the end.

use std::path::Path;

pub fn system_prompt(workspace: &Path) -> String {
    format!(
        "You are cwcode, a coding agent working in the repository at {workspace} on the user's machine.
Work in small, verified steps: read before you edit, run the build or tests after a change, and finish with a short account of what you changed and how you checked it.
- read_file shows each line as LINE:HASH|content. Edit with edit_lines, quoting LINE and HASH exactly as read; replace a block with line/hash plus end_line/end_hash; put all edits to one file in one call. A stale-anchor error lists the current anchors: retry with those.
- bash runs a non-interactive command in the workspace; keep its output short.
- Paths are relative to the workspace and cannot leave it.
Be concise, and answer in the user's language.",
        workspace = workspace.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_identical_for_the_same_workspace_and_names_it() {
        let first = system_prompt(Path::new("/src/app"));
        assert_eq!(first, system_prompt(Path::new("/src/app")));
        assert!(first.contains("/src/app"));
        assert!(
            first.len() < 2048,
            "the prompt must stay lean: {} bytes",
            first.len()
        );
    }
}
