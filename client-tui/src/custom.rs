//! Custom slash commands: each `NAME.md` in the workspace's `.cwcode/commands/` or the user's
//! `~/.cwcode/commands/` (CWCODE_HOME's) is the prompt `/NAME` sends, with `$ARGUMENTS`
//! replaced by what follows the name. A workspace's command overrides the user's of the same
//! name; a built-in command is never overridden. The files are read once, at start.

use std::path::Path;

use crate::commands::{Candidate, is_builtin};
use crate::format::shorten;

/// Where the argument goes in a command's text.
pub const ARGUMENTS: &str = "$ARGUMENTS";
/// The most commands read from one directory; the rest are named as skipped.
const MAX_COMMANDS: usize = 200;
/// The largest file read as a prompt.
const MAX_BYTES: u64 = 64 * 1024;
/// What completion shows of a command's description.
const ABOUT_CHARS: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    pub name: String,
    /// The prompt, `$ARGUMENTS` still in it.
    pub text: String,
    /// The `description:` of its front matter, else its first line.
    pub about: String,
    /// "workspace" or "user", as `/help` says where it came from.
    pub origin: &'static str,
}

impl CustomCommand {
    /// The prompt for `/NAME arguments`. Arguments given to a text without `$ARGUMENTS` follow
    /// it after a blank line, so nothing typed is lost.
    pub fn prompt(&self, arguments: &str) -> String {
        let arguments = arguments.trim();
        if self.text.contains(ARGUMENTS) {
            self.text.replace(ARGUMENTS, arguments)
        } else if arguments.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n\n{arguments}", self.text.trim_end())
        }
    }

    fn takes_arguments(&self) -> bool {
        self.text.contains(ARGUMENTS)
    }
}

/// The custom commands found, and what was skipped and why (said by `/help`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomCommands {
    pub commands: Vec<CustomCommand>,
    pub skipped: Vec<String>,
}

impl CustomCommands {
    /// Reads `workspace/.cwcode/commands` and `home/commands` (blocking: call it off the async
    /// workers). A directory that does not exist has no commands.
    pub fn load(workspace: &Path, home: &Path) -> Self {
        let mut found = Self::default();
        found.read_dir(&workspace.join(".cwcode").join("commands"), "workspace");
        found.read_dir(&home.join("commands"), "user");
        found.commands.sort_by(|a, b| a.name.cmp(&b.name));
        found
    }

    fn read_dir(&mut self, dir: &Path, origin: &'static str) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => {
                self.skipped
                    .push(format!("{}: cannot be read ({error})", dir.display()));
                return;
            }
        };
        let mut paths: Vec<_> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
            .collect();
        paths.sort();
        if paths.len() > MAX_COMMANDS {
            self.skipped.push(format!(
                "{}: only the first {MAX_COMMANDS} of {} commands are read",
                dir.display(),
                paths.len()
            ));
            paths.truncate(MAX_COMMANDS);
        }
        for path in paths {
            match read_command(&path, origin) {
                Ok(command) => self.add(command, &path),
                Err(why) => self.skipped.push(format!("{}: {why}", path.display())),
            }
        }
    }

    fn add(&mut self, command: CustomCommand, path: &Path) {
        if is_builtin(&command.name) {
            self.skipped.push(format!(
                "{}: /{} is a built-in command; rename the file",
                path.display(),
                command.name
            ));
        } else if self.find(&command.name).is_none() {
            // The workspace's directory is read first: its command wins.
            self.commands.push(command);
        }
    }

    pub fn find(&self, name: &str) -> Option<&CustomCommand> {
        self.commands.iter().find(|command| command.name == name)
    }

    /// `/NAME arguments` when NAME is one of these commands: the command and the arguments.
    pub fn invocation<'a>(&self, input: &'a str) -> Option<(&CustomCommand, &'a str)> {
        let typed = input.trim().strip_prefix('/')?;
        let (name, arguments) = typed.split_once(char::is_whitespace).unwrap_or((typed, ""));
        Some((self.find(name)?, arguments))
    }

    /// Completion candidates for a command name being typed (`/par`).
    pub fn complete(&self, input: &str) -> Vec<Candidate> {
        let Some(typed) = input.strip_prefix('/') else {
            return Vec::new();
        };
        if typed.contains(char::is_whitespace) || typed.starts_with('/') {
            return Vec::new();
        }
        self.commands
            .iter()
            .filter(|command| command.name.starts_with(typed))
            .map(|command| Candidate {
                replacement: if command.takes_arguments() {
                    format!("/{} ", command.name)
                } else {
                    format!("/{}", command.name)
                },
                label: if command.takes_arguments() {
                    format!("/{} ARGS", command.name)
                } else {
                    format!("/{}", command.name)
                },
                about: command.about.clone(),
            })
            .collect()
    }

    /// The lines `/help` adds for these commands.
    pub fn help(&self) -> String {
        if self.commands.is_empty() && self.skipped.is_empty() {
            return String::new();
        }
        let mut text = String::from(
            "\nCustom commands (.cwcode/commands/NAME.md here, ~/.cwcode/commands/NAME.md; $ARGUMENTS is what follows the name)",
        );
        for command in &self.commands {
            let usage = if command.takes_arguments() {
                format!("/{} ARGS", command.name)
            } else {
                format!("/{}", command.name)
            };
            text.push_str(&format!(
                "\n  {usage:<20} {} ({})",
                command.about, command.origin
            ));
        }
        for skipped in &self.skipped {
            text.push_str(&format!("\n  skipped {skipped}"));
        }
        text
    }
}

fn read_command(path: &Path, origin: &'static str) -> Result<CustomCommand, String> {
    let name = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .filter(|stem| {
            !stem.is_empty()
                && stem
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .ok_or("a command's name is letters, digits, - and _ (e.g. review-pr.md)")?
        .to_owned();
    let size = std::fs::metadata(path)
        .map_err(|error| format!("cannot be read ({error})"))?
        .len();
    if size > MAX_BYTES {
        return Err(format!(
            "{size} bytes, more than the {MAX_BYTES} a command may have"
        ));
    }
    let raw = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot be read as UTF-8 text ({error})"))?;
    let (description, text) = split_front_matter(&raw);
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err("empty: the file's text is the prompt".to_owned());
    }
    let about = description
        .or_else(|| {
            text.lines()
                .map(|line| line.trim_start_matches('#').trim())
                .find(|line| !line.is_empty())
        })
        .unwrap_or_default();
    Ok(CustomCommand {
        name,
        about: shorten(about, ABOUT_CHARS),
        text,
        origin,
    })
}

/// A leading `---` block's `description:` value, and the text after the block.
fn split_front_matter(raw: &str) -> (Option<&str>, &str) {
    let Some(rest) = raw.strip_prefix("---\n") else {
        return (None, raw);
    };
    let Some((block, body)) = rest.split_once("\n---") else {
        return (None, raw);
    };
    let description = block.lines().find_map(|line| {
        line.strip_prefix("description:")
            .map(|value| value.trim().trim_matches('"'))
    });
    let body = body.split_once('\n').map_or("", |(_, body)| body);
    (description, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn commands_come_from_the_workspace_and_the_home_and_the_workspace_wins() {
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("work");
        let home = root.path().join("home");
        let here = workspace.join(".cwcode/commands");
        write(&here, "review.md", "Review $ARGUMENTS for bugs.");
        write(&home.join("commands"), "review.md", "the user's review");
        write(
            &home.join("commands"),
            "standup.md",
            "---\ndescription: \"what changed since yesterday\"\n---\nSum up git log --since=yesterday.\n",
        );
        write(&here, "help.md", "not allowed");
        write(&home.join("commands"), "clear.md", "an alias of /new");
        write(&here, "bad name.md", "x");
        write(&here, "empty.md", "  \n");
        write(&here, "notes.txt", "not a command");
        let found = CustomCommands::load(&workspace, &home);
        let names: Vec<&str> = found.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["review", "standup"]);
        let review = found.find("review").unwrap();
        assert_eq!(review.origin, "workspace");
        assert_eq!(review.prompt("cart.rs"), "Review cart.rs for bugs.");
        let standup = found.find("standup").unwrap();
        assert_eq!(standup.about, "what changed since yesterday");
        assert_eq!(standup.prompt(""), "Sum up git log --since=yesterday.");
        assert_eq!(
            standup.prompt("only mine"),
            "Sum up git log --since=yesterday.\n\nonly mine"
        );
        let skipped = found.skipped.join("\n");
        assert!(skipped.contains("/help is a built-in command"), "{skipped}");
        assert!(
            skipped.contains("/clear is a built-in command"),
            "{skipped}"
        );
        assert!(
            skipped.contains("bad name.md: a command's name"),
            "{skipped}"
        );
        assert!(skipped.contains("empty.md: empty"), "{skipped}");
        assert!(!skipped.contains("notes.txt"), "{skipped}");
    }

    #[test]
    fn an_oversized_file_is_skipped_and_said() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(".cwcode/commands");
        write(&dir, "huge.md", &"x".repeat(MAX_BYTES as usize + 1));
        let found = CustomCommands::load(root.path(), &root.path().join("nohome"));
        assert!(found.commands.is_empty());
        assert!(
            found.skipped[0].contains("more than the 65536"),
            "{found:?}"
        );
    }

    #[test]
    fn invocation_and_completion_know_the_names() {
        let found = CustomCommands {
            commands: vec![CustomCommand {
                name: "review".to_owned(),
                text: "Review $ARGUMENTS".to_owned(),
                about: "Review".to_owned(),
                origin: "user",
            }],
            skipped: Vec::new(),
        };
        let (command, arguments) = found.invocation("/review  src/cart.rs ").unwrap();
        assert_eq!(
            (command.name.as_str(), arguments),
            ("review", " src/cart.rs")
        );
        assert!(found.invocation("/reviewer").is_none());
        assert!(found.invocation("review").is_none());
        let candidates = found.complete("/re");
        assert_eq!(candidates[0].replacement, "/review ");
        assert_eq!(candidates[0].label, "/review ARGS");
        assert!(found.complete("/review x").is_empty());
    }
}
