//! `glob`: files matching a pattern, newest first (SPEC §7). Also home to the walk and the path
//! filter that `grep` and `ls` share, so that the three tools agree on what a workspace holds.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::Workspace;

const MAX_FILES: usize = 200;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// E.g. src/**/*.rs; without / it matches names at any depth.
    pub pattern: String,
    /// Directory to search (default: workspace root).
    pub path: Option<String>,
}

impl ToolArgs for GlobArgs {}

pub struct Glob;

impl Tool for Glob {
    type Args = GlobArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "glob",
            description: "Find files by glob pattern, newest first. Skips gitignored files, and \
                          hidden ones unless the pattern names them.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: GlobArgs, context: &ToolContext) -> Result<String, ToolError> {
        let filter = PathGlob::new(&args.pattern)?;
        let root = search_root(&context.workspace, args.path.as_deref())?;
        if !root.is_dir() {
            return Err(ToolError::new(format!(
                "`{}` is not a directory: give a directory as path, and the file name in the \
                 pattern",
                context.workspace.display(&root)
            )));
        }
        let context = context.clone();
        tokio::task::spawn_blocking(move || find(&context, &root, &args.pattern, &filter))
            .await
            .map_err(|error| ToolError::new(format!("glob stopped unexpectedly: {error}")))?
    }
}

fn find(
    context: &ToolContext,
    root: &Path,
    pattern: &str,
    filter: &PathGlob,
) -> Result<String, ToolError> {
    let workspace = &context.workspace;
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    for entry in walker(
        workspace,
        &walk_start(workspace, root, pattern),
        names_hidden(pattern),
    )
    .build()
    .flatten()
    {
        if context.cancel.is_cancelled() {
            return Err(ToolError::new("cancelled: the search was stopped"));
        }
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if filter.is_match(relative) {
            let modified = entry
                .metadata()
                .ok()
                .and_then(|metadata| metadata.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((modified, workspace.display(entry.path())));
        }
    }
    if found.is_empty() {
        return Ok(format!(
            "No files match `{pattern}` under `{}` (gitignored files are skipped, and hidden \
             ones unless the pattern names them).",
            workspace.display(root)
        ));
    }
    found.sort_by(|(a_time, a_path), (b_time, b_path)| {
        b_time.cmp(a_time).then_with(|| a_path.cmp(b_path))
    });
    let total = found.len();
    let mut text = found
        .into_iter()
        .take(MAX_FILES)
        .map(|(_, path)| path)
        .collect::<Vec<_>>()
        .join("\n");
    if total > MAX_FILES {
        let _ = write!(
            text,
            "\n[{MAX_FILES} of {total} files shown, newest first: narrow the pattern or the path \
             to see the others]"
        );
    }
    Ok(text)
}

/// Where the walk begins: the pattern's leading literal directories, when there are some, so that
/// `crates/foo/**/*.rs` does not walk the whole workspace. They are resolved like any path, so a
/// symlink there cannot lead the walk outside.
fn walk_start(workspace: &Workspace, root: &Path, pattern: &str) -> PathBuf {
    let mut components: Vec<&str> = pattern.split('/').collect();
    components.pop();
    let literal: PathBuf = components
        .into_iter()
        .take_while(|component| {
            !component.is_empty()
                && *component != "."
                && *component != ".."
                && !component.contains(['*', '?', '[', '{', '\\'])
        })
        .collect();
    if literal.as_os_str().is_empty() {
        return root.to_path_buf();
    }
    match workspace.resolve(&root.join(&literal).to_string_lossy()) {
        Ok(start) if start.starts_with(root) && start.is_dir() => start,
        _ => root.to_path_buf(),
    }
}

/// The directory a search covers: the workspace root, or `path` confined to the workspace.
pub(super) fn search_root(workspace: &Workspace, path: Option<&str>) -> Result<PathBuf, ToolError> {
    let root = workspace.resolve(path.unwrap_or("."))?;
    if !root.exists() {
        return Err(ToolError::new(format!(
            "`{}` does not exist: check the path (ls shows what a directory holds)",
            workspace.display(&root)
        )));
    }
    Ok(root)
}

/// A walk as ripgrep does it: .gitignore, .ignore and git's excludes honoured (also outside a
/// git repository, since a workspace need not be one), symlinks not followed (so the walk cannot
/// leave the workspace), and `.git` itself never entered, even when hidden files are included.
pub(super) fn walker(workspace: &Workspace, root: &Path, include_hidden: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(!include_hidden)
        .require_git(false)
        // The global gitignore is matched relative to this, not to the daemon's own directory.
        .current_dir(workspace.root())
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// Whether a glob names hidden entries (a component starting with `.`): walks skip them unless
/// asked for them this way.
pub(super) fn names_hidden(pattern: &str) -> bool {
    pattern
        .split('/')
        .any(|component| component.starts_with('.') && component != "." && component != "..")
}

/// A file filter. As in .gitignore and `rg -g`, a pattern without `/` matches the file name at
/// any depth; one with `/` matches the path relative to the search root, `*` staying within one
/// directory.
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl PathGlob {
    pub(super) fn new(pattern: &str) -> Result<Self, ToolError> {
        if pattern.trim().is_empty() {
            return Err(ToolError::new(
                "the glob is empty: give one such as `*.rs` or `src/**/*.ts`",
            ));
        }
        if Path::new(pattern).is_absolute() {
            return Err(ToolError::new(format!(
                "the glob `{pattern}` is absolute: put the directory in path and keep the \
                 pattern relative to it"
            )));
        }
        let relative = pattern.strip_prefix("./").unwrap_or(pattern);
        let glob = GlobBuilder::new(relative)
            .literal_separator(true)
            .build()
            .map_err(|error| ToolError::new(format!("invalid glob: {error}")))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            whole_path: relative.contains('/'),
        })
    }

    pub(super) fn is_match(&self, relative: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .components()
                .next_back()
                .is_some_and(|name| match name {
                    Component::Normal(name) => self.matcher.is_match(name),
                    _ => false,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    use super::*;
    use crate::tools::test_context;

    async fn glob(root: &Path, pattern: &str, path: Option<&str>) -> Result<String, ToolError> {
        let args = GlobArgs {
            pattern: pattern.to_owned(),
            path: path.map(str::to_owned),
        };
        Glob.call(args, &test_context(root)).await
    }

    #[allow(clippy::unwrap_used)]
    fn write(root: &Path, path: &str, content: &str) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    #[allow(clippy::unwrap_used)]
    fn set_age(root: &Path, path: &str, seconds_ago: u64) {
        let file = fs::File::options()
            .write(true)
            .open(root.join(path))
            .unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(seconds_ago))
            .unwrap();
    }

    #[tokio::test]
    async fn finds_files_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "src/old.rs", "");
        write(dir.path(), "src/new.rs", "");
        write(dir.path(), "src/deep/mid.rs", "");
        write(dir.path(), "src/notes.md", "");
        set_age(dir.path(), "src/old.rs", 300);
        set_age(dir.path(), "src/deep/mid.rs", 200);
        set_age(dir.path(), "src/new.rs", 100);

        let output = glob(dir.path(), "src/**/*.rs", None).await.unwrap();

        assert_eq!(output, "src/new.rs\nsrc/deep/mid.rs\nsrc/old.rs");
    }

    #[tokio::test]
    async fn a_pattern_without_a_slash_matches_names_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.toml", "");
        write(dir.path(), "x/y/b.toml", "");
        write(dir.path(), "x/c.rs", "");

        let mut found: Vec<String> = glob(dir.path(), "*.toml", None)
            .await
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        found.sort();
        assert_eq!(found, ["a.toml", "x/y/b.toml"]);

        let top_only = glob(dir.path(), "x/*.rs", None).await.unwrap();
        assert_eq!(top_only, "x/c.rs");
        assert!(
            glob(dir.path(), "*/c.rs", None)
                .await
                .unwrap()
                .starts_with("x/c.rs")
        );
    }

    #[tokio::test]
    async fn path_narrows_the_search_and_results_stay_workspace_relative() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a/one.rs", "");
        write(dir.path(), "b/two.rs", "");

        let output = glob(dir.path(), "*.rs", Some("b")).await.unwrap();

        assert_eq!(output, "b/two.rs");
    }

    #[tokio::test]
    async fn gitignored_and_hidden_files_are_skipped_unless_named() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".gitignore", "target/\n*.log\n");
        write(dir.path(), "target/debug/out.rs", "");
        write(dir.path(), "run.log", "");
        write(dir.path(), "src/main.rs", "");
        write(dir.path(), ".github/ci.yml", "");
        write(dir.path(), ".git/config", "");

        assert_eq!(
            glob(dir.path(), "**/*.rs", None).await.unwrap(),
            "src/main.rs"
        );
        assert!(
            glob(dir.path(), "*.log", None)
                .await
                .unwrap()
                .starts_with("No files match `*.log`")
        );
        assert_eq!(
            glob(dir.path(), "*.yml", None).await.unwrap(),
            "No files match `*.yml` under `.` (gitignored files are skipped, and hidden ones unless the pattern names them)."
        );
        assert_eq!(
            glob(dir.path(), ".github/*.yml", None).await.unwrap(),
            ".github/ci.yml"
        );
        let hidden: Vec<String> = glob(dir.path(), ".*", None)
            .await
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(hidden, [".gitignore"]);
    }

    #[tokio::test]
    async fn results_are_bounded_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        for number in 0..MAX_FILES + 5 {
            write(dir.path(), &format!("f{number}.txt"), "");
        }

        let output = glob(dir.path(), "*.txt", None).await.unwrap();

        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), MAX_FILES + 1);
        assert_eq!(
            lines[MAX_FILES],
            "[200 of 205 files shown, newest first: narrow the pattern or the path to see the \
             others]"
        );
    }

    #[tokio::test]
    async fn bad_inputs_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.rs", "");

        let invalid = glob(dir.path(), "src/[a", None).await.unwrap_err();
        assert!(invalid.message.starts_with("invalid glob:"), "{invalid}");
        let empty = glob(dir.path(), " ", None).await.unwrap_err();
        assert!(empty.message.contains("the glob is empty"), "{empty}");
        let absolute = glob(dir.path(), "/etc/*", None).await.unwrap_err();
        assert!(absolute.message.contains("is absolute"), "{absolute}");
        let missing = glob(dir.path(), "*.rs", Some("nope")).await.unwrap_err();
        assert!(
            missing.message.contains("`nope` does not exist"),
            "{missing}"
        );
        let file = glob(dir.path(), "*.rs", Some("a.rs")).await.unwrap_err();
        assert!(file.message.contains("is not a directory"), "{file}");
    }

    #[tokio::test]
    async fn escapes_are_refused_and_symlinks_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        write(&outside, "secret.rs", "");
        write(&root, "inside.rs", "");
        symlink(&outside, root.join("link")).unwrap();

        let error = glob(&root, "*.rs", Some("..")).await.unwrap_err();
        assert!(error.message.contains("refused `..`"), "{error}");
        let through_link = glob(&root, "*.rs", Some("link")).await.unwrap_err();
        assert!(through_link.message.contains("symlink"), "{through_link}");
        assert_eq!(glob(&root, "**/*.rs", None).await.unwrap(), "inside.rs");
        assert!(
            glob(&root, "link/*.rs", None)
                .await
                .unwrap()
                .starts_with("No files match")
        );
        assert!(
            glob(&root, "../outside/*.rs", None)
                .await
                .unwrap()
                .starts_with("No files match")
        );
    }

    #[test]
    fn hidden_components_are_recognised() {
        assert!(names_hidden(".env*"));
        assert!(names_hidden("**/.github/**"));
        assert!(!names_hidden("*.rs"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("../x"));
    }
}
