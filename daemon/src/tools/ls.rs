//! `ls`: one directory's entries with their types and sizes, gitignored ones left out (SPEC §7).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use ignore::WalkBuilder;
use schemars::JsonSchema;
use serde::Deserialize;

use super::glob::search_root;
use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::Workspace;

const MAX_ENTRIES: usize = 500;
/// Names of left-out entries listed in the note.
const MAX_OMITTED_NAMED: usize = 10;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsArgs {
    /// Directory (default: workspace root).
    pub path: Option<String>,
}

impl ToolArgs for LsArgs {}

pub struct Ls;

impl Tool for Ls {
    type Args = LsArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "ls",
            description: "List a directory: type, size, name; directories first. Gitignored \
                          entries are left out.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: LsArgs, context: &ToolContext) -> Result<String, ToolError> {
        let directory = search_root(&context.workspace, args.path.as_deref())?;
        let workspace = context.workspace.clone();
        tokio::task::spawn_blocking(move || list(&workspace, &directory))
            .await
            .map_err(|error| ToolError::new(format!("ls stopped unexpectedly: {error}")))?
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

struct Entry {
    kind: Kind,
    name: String,
    size: u64,
    target: Option<String>,
}

fn list(workspace: &Workspace, directory: &Path) -> Result<String, ToolError> {
    let shown_as = workspace.display(directory);
    if !directory.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown_as}` is a file, not a directory: read it with read_file"
        )));
    }
    let read = fs::read_dir(directory)
        .map_err(|error| ToolError::new(format!("cannot list `{shown_as}`: {error}")))?;
    let kept = not_ignored(workspace, directory);
    let mut entries = Vec::new();
    let mut omitted = Vec::new();
    for dir_entry in read.flatten() {
        let name = dir_entry.file_name();
        if !kept.contains(&name) {
            omitted.push(name.to_string_lossy().into_owned());
            continue;
        }
        // The entry's own type: a symlink is shown as one, not as what it points to.
        let metadata = dir_entry.metadata().ok();
        let file_type = metadata.as_ref().map(fs::Metadata::file_type);
        let kind = match file_type {
            Some(kind) if kind.is_dir() => Kind::Dir,
            Some(kind) if kind.is_file() => Kind::File,
            Some(kind) if kind.is_symlink() => Kind::Symlink,
            _ => Kind::Other,
        };
        let target = (kind == Kind::Symlink)
            .then(|| fs::read_link(dir_entry.path()).ok())
            .flatten()
            .map(|target| target.display().to_string());
        entries.push(Entry {
            kind,
            name: name.to_string_lossy().into_owned(),
            size: metadata.map_or(0, |metadata| metadata.len()),
            target,
        });
    }
    entries.sort_by(|a, b| {
        (a.kind != Kind::Dir)
            .cmp(&(b.kind != Kind::Dir))
            .then_with(|| a.name.cmp(&b.name))
    });
    omitted.sort();
    Ok(render(&shown_as, &entries, &omitted))
}

/// The names the walk keeps at depth 1: what .gitignore and the other ignore files leave in.
/// Hidden entries are kept, since a listing is how one finds `.github` or `.env.example`.
fn not_ignored(workspace: &Workspace, directory: &Path) -> HashSet<OsString> {
    WalkBuilder::new(directory)
        .max_depth(Some(1))
        .hidden(false)
        .require_git(false)
        .current_dir(workspace.root())
        .build()
        .flatten()
        .filter(|entry| entry.depth() == 1)
        .map(|entry| entry.file_name().to_owned())
        .collect()
}

fn render(shown_as: &str, entries: &[Entry], omitted: &[String]) -> String {
    let mut out = String::new();
    if entries.is_empty() && omitted.is_empty() {
        return format!("`{shown_as}` is empty.");
    }
    for entry in entries.iter().take(MAX_ENTRIES) {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = match (&entry.kind, &entry.target) {
            (Kind::Dir, _) => write!(out, "dir  {}/", entry.name),
            (Kind::File, _) => write!(out, "file {} {}", entry.name, human_size(entry.size)),
            (Kind::Symlink, Some(target)) => write!(out, "link {} -> {target}", entry.name),
            (Kind::Symlink, None) => write!(out, "link {}", entry.name),
            (Kind::Other, _) => write!(out, "other {}", entry.name),
        };
    }
    if entries.len() > MAX_ENTRIES {
        let _ = write!(
            out,
            "\n[{MAX_ENTRIES} of {} entries shown: find the others with glob (a pattern under \
             `{shown_as}`)]",
            entries.len()
        );
    }
    if !omitted.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let mut names: Vec<&str> = omitted
            .iter()
            .take(MAX_OMITTED_NAMED)
            .map(String::as_str)
            .collect();
        if omitted.len() > MAX_OMITTED_NAMED {
            names.push("…");
        }
        let _ = write!(
            out,
            "[{} gitignored not shown: {}; ls one by path to see inside]",
            omitted.len(),
            names.join(", ")
        );
    }
    out
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::tools::test_context;

    async fn ls(root: &Path, path: Option<&str>) -> Result<String, ToolError> {
        let args = LsArgs {
            path: path.map(str::to_owned),
        };
        Ls.call(args, &test_context(root)).await
    }

    #[tokio::test]
    async fn lists_directories_first_then_files_with_sizes() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        fs::create_dir(dir.path().join("Docs")).unwrap();
        fs::write(dir.path().join("b.txt"), "x".repeat(2048)).unwrap();
        fs::write(dir.path().join("a.txt"), "hello").unwrap();
        fs::write(dir.path().join(".env.example"), "").unwrap();
        symlink("a.txt", dir.path().join("c-link")).unwrap();

        let output = ls(dir.path(), None).await.unwrap();

        assert_eq!(
            output,
            "dir  Docs/\ndir  src/\nfile .env.example 0 B\nfile a.txt 5 B\nfile b.txt 2.0 KiB\n\
             link c-link -> a.txt"
        );
    }

    #[tokio::test]
    async fn gitignored_entries_are_left_out_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".gitignore"), "target/\n*.log\n").unwrap();
        fs::create_dir(dir.path().join("target")).unwrap();
        fs::write(dir.path().join("target/out"), "").unwrap();
        fs::write(dir.path().join("a.log"), "").unwrap();
        fs::write(dir.path().join("main.rs"), "").unwrap();

        let output = ls(dir.path(), None).await.unwrap();
        assert_eq!(
            output,
            "file .gitignore 14 B\nfile main.rs 0 B\n[2 gitignored not shown: a.log, target; ls \
             one by path to see inside]"
        );

        let inside = ls(dir.path(), Some("target")).await.unwrap();
        assert_eq!(inside, "file out 0 B");
    }

    #[tokio::test]
    async fn a_subdirectory_and_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/empty")).unwrap();
        fs::write(dir.path().join("a/x.rs"), "fn x() {}\n").unwrap();

        assert_eq!(
            ls(dir.path(), Some("a")).await.unwrap(),
            "dir  empty/\nfile x.rs 10 B"
        );
        assert_eq!(
            ls(dir.path(), Some("a/empty")).await.unwrap(),
            "`a/empty` is empty."
        );
    }

    #[tokio::test]
    async fn long_listings_are_bounded_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        for number in 0..MAX_ENTRIES + 3 {
            fs::write(dir.path().join(format!("f{number:04}")), "").unwrap();
        }

        let output = ls(dir.path(), None).await.unwrap();

        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), MAX_ENTRIES + 1);
        assert_eq!(lines[0], "file f0000 0 B");
        assert_eq!(
            lines[MAX_ENTRIES],
            "[500 of 503 entries shown: find the others with glob (a pattern under `.`)]"
        );
    }

    #[tokio::test]
    async fn bad_paths_are_explained_and_escapes_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("a.txt"), "").unwrap();
        symlink(&outside, root.join("escape")).unwrap();

        let file = ls(&root, Some("a.txt")).await.unwrap_err();
        assert!(file.message.contains("read it with read_file"), "{file}");
        let missing = ls(&root, Some("nope")).await.unwrap_err();
        assert!(missing.message.contains("does not exist"), "{missing}");
        for path in ["..", "escape", "/"] {
            let error = ls(&root, Some(path)).await.unwrap_err();
            assert!(error.message.starts_with("refused"), "{path}: {error}");
        }
    }

    #[test]
    fn sizes_are_readable() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }
}
