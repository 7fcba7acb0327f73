//! `write_file`: creates a file or replaces its whole content, atomically (SPEC §7).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::store::{Durability, FileMode, replace_file};

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// Path relative to the workspace.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

impl ToolArgs for WriteFileArgs {
    fn touched_paths(&self) -> Vec<PathBuf> {
        vec![PathBuf::from(&self.path)]
    }
}

pub struct WriteFile;

impl Tool for WriteFile {
    type Args = WriteFileArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "write_file",
            description: "Create or overwrite a file (missing directories are created). To \
                          change part of a file, edit it instead.",
            effect: Effect::Workspace,
        }
    }

    async fn call(&self, args: WriteFileArgs, context: &ToolContext) -> Result<String, ToolError> {
        let path = context.workspace.resolve(&args.path)?;
        let shown_as = context.workspace.display(&path);
        let target = path.clone();
        let result = tokio::task::spawn_blocking(move || write(&target, &shown_as, &args.content))
            .await
            .map_err(|error| ToolError::new(format!("write_file stopped unexpectedly: {error}")))?;
        // Whatever read_file showed of the old content no longer anchors anything.
        context
            .reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .forget(&path);
        result
    }
}

fn write(path: &Path, shown_as: &str, content: &str) -> Result<String, ToolError> {
    let previous = match fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) if error.kind() == io::ErrorKind::NotADirectory => {
            return Err(ToolError::new(format!(
                "cannot create `{shown_as}`: part of its directory path is a file in the way"
            )));
        }
        Err(error) if error.kind() == io::ErrorKind::IsADirectory => {
            return Err(ToolError::new(format!(
                "`{shown_as}` is a directory: give a file path inside it"
            )));
        }
        Err(error) => {
            return Err(ToolError::new(format!(
                "cannot overwrite `{shown_as}`: {error}"
            )));
        }
    };
    let lines = line_count(content);
    if previous.as_deref() == Some(content.as_bytes()) {
        return Ok(format!(
            "`{shown_as}` already holds exactly this content ({lines}); nothing was written."
        ));
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|error| {
            ToolError::new(format!(
                "cannot create the directories for `{shown_as}`: {error} (is a file in the way?)"
            ))
        })?;
    }
    write_atomically(path, content.as_bytes()).map_err(|error| {
        ToolError::new(format!(
            "could not write `{shown_as}`: {error}; nothing was changed"
        ))
    })?;
    Ok(match previous {
        None => format!("Created `{shown_as}` ({lines})."),
        Some(_) => format!("Overwrote `{shown_as}` ({lines})."),
    })
}

/// Writes through a temporary file in the same directory and a rename, so that a reader never
/// sees half a file and a failure leaves the old one whole; synced, since the user's work must
/// survive a power cut once the tool said it was written. An existing file keeps its
/// permissions; a new one gets the usual 0666 less the umask.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mode = match fs::metadata(path) {
        Ok(metadata) => FileMode::Exactly(metadata.permissions().mode() & 0o7777),
        Err(error) if error.kind() == io::ErrorKind::NotFound => FileMode::FromUmask,
        Err(error) => return Err(error),
    };
    replace_file(path, bytes, mode, Durability::Synced).map_err(|error| error.source)
}

pub(super) fn line_count(text: &str) -> String {
    match text.lines().count() {
        1 => "1 line".to_owned(),
        count => format!("{count} lines"),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::tools::test_context;

    fn args(path: &str, content: &str) -> WriteFileArgs {
        WriteFileArgs {
            path: path.to_owned(),
            content: content.to_owned(),
        }
    }

    #[tokio::test]
    async fn creates_a_file_and_its_directories() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());

        let result = WriteFile
            .call(args("src/deep/new.rs", "fn a() {}\nfn b() {}\n"), &context)
            .await
            .unwrap();

        assert_eq!(result, "Created `src/deep/new.rs` (2 lines).");
        let written = fs::read_to_string(dir.path().join("src/deep/new.rs")).unwrap();
        assert_eq!(written, "fn a() {}\nfn b() {}\n");
        let mode = fs::metadata(dir.path().join("src/deep/new.rs"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o600, 0o600, "{mode:o}");
    }

    #[tokio::test]
    async fn overwrites_keeping_permissions_and_forgets_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.sh");
        fs::write(&file, "old\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o751)).unwrap();
        let context = test_context(dir.path());
        let key = context.workspace.root().join("run.sh");
        context
            .reads
            .lock()
            .unwrap()
            .record(key.clone(), 1, [(1, "old".to_owned())]);

        let result = WriteFile
            .call(args("run.sh", "#!/bin/sh\necho new"), &context)
            .await
            .unwrap();

        assert_eq!(result, "Overwrote `run.sh` (2 lines).");
        assert_eq!(fs::read_to_string(&file).unwrap(), "#!/bin/sh\necho new");
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o751
        );
        assert_eq!(context.reads.lock().unwrap().shown(&key, 1), None);
        let leftovers = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "the temporary file is gone");
    }

    #[tokio::test]
    async fn identical_content_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "same\n").unwrap();
        let result = WriteFile
            .call(args("a.txt", "same\n"), &test_context(dir.path()))
            .await
            .unwrap();
        assert_eq!(
            result,
            "`a.txt` already holds exactly this content (1 line); nothing was written."
        );
    }

    #[tokio::test]
    async fn an_empty_file_can_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let result = WriteFile
            .call(args("empty", ""), &test_context(dir.path()))
            .await
            .unwrap();
        assert_eq!(result, "Created `empty` (0 lines).");
        assert_eq!(fs::read(dir.path().join("empty")).unwrap(), b"");
    }

    #[tokio::test]
    async fn writes_through_a_symlink_inside_the_workspace_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("real.txt"), "old").unwrap();
        symlink(dir.path().join("real.txt"), dir.path().join("alias.txt")).unwrap();

        let result = WriteFile
            .call(args("alias.txt", "new"), &test_context(dir.path()))
            .await
            .unwrap();

        assert_eq!(result, "Overwrote `real.txt` (1 line).");
        assert!(
            fs::symlink_metadata(dir.path().join("alias.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("real.txt")).unwrap(),
            "new"
        );
    }

    #[tokio::test]
    async fn paths_outside_the_workspace_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        symlink(&outside, root.join("escape")).unwrap();
        let context = test_context(&root);

        for path in ["../x.txt", "escape/x.txt", "/tmp/cwcode-never-written.txt"] {
            let error = WriteFile.call(args(path, "x"), &context).await.unwrap_err();
            assert!(error.message.contains("refused"), "{path}: {error}");
        }
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn directories_and_blocked_parents_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        fs::write(dir.path().join("file"), "").unwrap();
        let context = test_context(dir.path());

        let directory = WriteFile
            .call(args("src", "x"), &context)
            .await
            .unwrap_err();
        assert_eq!(
            directory.message,
            "`src` is a directory: give a file path inside it"
        );
        let blocked = WriteFile
            .call(args("file/inner.txt", "x"), &context)
            .await
            .unwrap_err();
        assert!(
            blocked.message.contains("is a file in the way"),
            "{blocked}"
        );
    }

    #[test]
    fn touched_paths_name_the_file() {
        assert_eq!(
            args("src/a.rs", "").touched_paths(),
            vec![PathBuf::from("src/a.rs")]
        );
    }
}
