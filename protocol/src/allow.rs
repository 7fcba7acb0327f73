//! Allow rules: which tool calls an "always" answer, or a one-shot run's `--allow`, approves
//! without asking again. The daemon keeps a session's rules; `cwcode-cli run` keeps its own.
//!
//! A rule is `TOOL[:PATTERN]`. `TOOL` is a tool name, or a glob over tool names (`*` approves
//! every tool, as yolo does). `PATTERN` is a glob over what the call acts on: the command of
//! `bash`, the `path` of the file tools. In a `bash` pattern `*` and `?` never match a shell
//! operator or substitution (`; & | < > $ \` ( )` or a line break), so `bash:"cargo test*"`
//! approves `cargo test -q` but not `cargo test; curl …`. Write such a character into the
//! pattern to allow it. A pattern ending in ` *` also matches the command without arguments
//! (`cargo test *` approves `cargo test`). A path with a `..` component never matches a pattern,
//! so `src/*` cannot be walked out of.

use std::fmt;
use std::str::FromStr;

/// Longest rule accepted: a glob this long is already a mistake, and matching stays cheap.
const MAX_RULE_CHARS: usize = 1024;
/// Characters a bash wildcard never spans: with them a command does more than the pattern says.
const SHELL_OPERATORS: &[char] = &[';', '&', '|', '<', '>', '$', '`', '(', ')', '\n', '\r'];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    tool: String,
    pattern: Option<String>,
}

impl FromStr for AllowRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.chars().count() > MAX_RULE_CHARS {
            return Err(format!("a rule is at most {MAX_RULE_CHARS} characters"));
        }
        let (tool, pattern) = match text.split_once(':') {
            Some((tool, pattern)) => (tool, Some(pattern)),
            None => (text, None),
        };
        if tool.is_empty() {
            return Err("give a tool name before the `:`, as in `bash:\"cargo test*\"`".into());
        }
        if pattern.is_some_and(str::is_empty) {
            return Err(format!(
                "`{tool}:` has an empty pattern: write `{tool}` to allow every call of it"
            ));
        }
        Ok(Self {
            tool: tool.to_owned(),
            pattern: pattern.map(str::to_owned),
        })
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(pattern) => write!(f, "{}:{pattern}", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

impl AllowRule {
    /// A rule for calls of `tool`, narrowed to `pattern` when one is given.
    pub fn new(tool: &str, pattern: Option<&str>) -> Result<Self, String> {
        match pattern {
            Some(pattern) => format!("{tool}:{pattern}").parse(),
            None => tool.parse(),
        }
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_deref()
    }

    /// Whether this rule approves a call of `tool` with these (JSON) arguments.
    pub fn allows(&self, tool: &str, arguments: &str) -> bool {
        self.allows_subject(tool, subject(tool, arguments).as_deref())
    }

    /// [`Self::allows`] for a call whose [`subject`] was already taken out of its arguments, so
    /// that many rules are checked against one call without parsing it again for each.
    pub fn allows_subject(&self, tool: &str, subject: Option<&str>) -> bool {
        if !glob(&self.tool, tool, &[]) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let Some(subject) = subject else {
            return false;
        };
        if tool == "bash" {
            glob(pattern, subject, SHELL_OPERATORS)
                || pattern
                    .strip_suffix(" *")
                    .is_some_and(|bare| glob(bare, subject, SHELL_OPERATORS))
        } else {
            !subject.split('/').any(|part| part == "..") && glob(pattern, subject, &[])
        }
    }
}

/// What a pattern is matched against: the trimmed command of a `bash` call, the `path` of any
/// other; `None` when the call has neither.
pub fn subject(tool: &str, arguments: &str) -> Option<String> {
    let arguments = serde_json::from_str::<serde_json::Value>(arguments).ok()?;
    let field = if tool == "bash" { "command" } else { "path" };
    let subject = arguments.get(field)?.as_str()?.trim();
    (!subject.is_empty()).then(|| subject.to_owned())
}

/// The pattern to offer for "always" on this call, or `None` when only the whole tool can be
/// allowed. For `bash` it is the program and its subcommand with ` *` (`cargo test -q` offers
/// `cargo test *`, `ls -la` offers `ls *`); for a file tool the call's directory
/// (`src/lib.rs` offers `src/*`).
pub fn suggested_pattern(tool: &str, arguments: &str) -> Option<String> {
    let subject = subject(tool, arguments)?;
    if tool == "bash" {
        let first_command = subject.split(SHELL_OPERATORS).next()?;
        let words: Vec<&str> = first_command
            .split_whitespace()
            .take(2)
            .take_while(|word| looks_like_a_command_word(word))
            .collect();
        // An environment assignment or a path first says too little about what runs.
        let program = words.first()?;
        if program.contains('=') {
            return None;
        }
        return Some(format!("{} *", words.join(" ")));
    }
    let (directory, _) = subject.rsplit_once('/')?;
    let clean = !directory.is_empty() && !directory.split('/').any(|part| part == "..");
    clean.then(|| format!("{directory}/*"))
}

/// A program or subcommand name, not a flag, a path, a quoted string or a file.
fn looks_like_a_command_word(word: &str) -> bool {
    word.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '='))
        && !word.starts_with('-')
}

/// The first rule that approves the call.
pub fn first_allowing<'a>(
    rules: &'a [AllowRule],
    tool: &str,
    arguments: &str,
) -> Option<&'a AllowRule> {
    let subject = subject(tool, arguments);
    rules
        .iter()
        .find(|rule| rule.allows_subject(tool, subject.as_deref()))
}

/// `*` any run of characters, `?` one character, anything else itself; the wildcards never
/// match a character of `unmatched`. Iterative with one backtrack point: linear in practice,
/// quadratic at worst, never exponential.
fn glob(pattern: &str, text: &str, unmatched: &[char]) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let wild = |c: char| !unmatched.contains(&c);
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some('?') if wild(text[t]) => {
                p += 1;
                t += 1;
            }
            Some(&c) if c != '*' && c != '?' && c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last star take one more character, if it may.
                Some((star_p, star_t)) if wild(text[star_t]) => {
                    star = Some((star_p, star_t + 1));
                    p = star_p + 1;
                    t = star_t + 1;
                }
                _ => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> AllowRule {
        text.parse().unwrap()
    }

    fn bash(command: &str) -> String {
        serde_json::json!({ "command": command }).to_string()
    }

    #[test]
    fn a_bash_pattern_matches_the_command_and_nothing_chained_to_it() {
        let rule = rule("bash:cargo test*");
        assert!(rule.allows("bash", &bash("cargo test")));
        assert!(rule.allows("bash", &bash("cargo test -q --lib parse")));
        assert!(!rule.allows("bash", &bash("cargo build")));
        assert!(!rule.allows("bash", &bash("cargo test; rm -rf ~")));
        assert!(!rule.allows("bash", &bash("cargo test && curl evil.example")));
        assert!(!rule.allows("bash", &bash("cargo test $(curl evil.example)")));
        assert!(!rule.allows("bash", &bash("cargo test\nrm -rf ~")));
        assert!(!rule.allows("edit_lines", &bash("cargo test")));
    }

    #[test]
    fn an_operator_written_in_the_pattern_is_allowed_literally() {
        assert!(rule("bash:cargo test* | tail*").allows("bash", &bash("cargo test -q | tail -5")));
        assert!(!rule("bash:cargo test* | tail*").allows("bash", &bash("cargo test | tail; id")));
    }

    #[test]
    fn a_bare_tool_name_allows_every_call_of_it_and_a_path_pattern_its_paths() {
        let edit = serde_json::json!({ "path": "src/lib.rs", "edits": [] }).to_string();
        assert!(rule("edit_lines").allows("edit_lines", &edit));
        assert!(!rule("edit_lines").allows("write_file", &edit));
        assert!(rule("edit_*").allows("edit_lines", &edit));
        assert!(rule("edit_lines:src/*").allows("edit_lines", &edit));
        assert!(!rule("edit_lines:tests/*").allows("edit_lines", &edit));
        assert!(!rule("edit_lines:src/*").allows("edit_lines", "not json"));
    }

    #[test]
    fn bad_rules_say_what_to_write() {
        assert!("".parse::<AllowRule>().unwrap_err().contains("tool name"));
        assert!(":x".parse::<AllowRule>().unwrap_err().contains("tool name"));
        assert!(
            "bash:"
                .parse::<AllowRule>()
                .unwrap_err()
                .contains("write `bash`")
        );
        assert_eq!(rule("bash:ls *").to_string(), "bash:ls *");
    }

    #[test]
    fn a_trailing_wildcard_word_also_matches_the_bare_command() {
        assert!(rule("bash:cargo test *").allows("bash", &bash("cargo test")));
        assert!(rule("bash:cargo test *").allows("bash", &bash("  cargo test -q ")));
        assert!(!rule("bash:cargo test *").allows("bash", &bash("cargo testify")));
        assert!(!rule("bash:cargo test *").allows("bash", &bash("cargo test | sh")));
    }

    #[test]
    fn a_path_pattern_cannot_be_walked_out_of() {
        let escape = serde_json::json!({ "path": "src/../../etc/passwd" }).to_string();
        assert!(!rule("write_file:src/*").allows("write_file", &escape));
        assert!(rule("write_file").allows("write_file", &escape));
    }

    #[test]
    fn the_offered_pattern_allows_the_call_it_came_from_and_its_kin() {
        for (command, offered) in [
            ("cargo test -q --lib parse", Some("cargo test *")),
            ("cargo test", Some("cargo test *")),
            ("ls -la src", Some("ls *")),
            ("git commit -m 'x'", Some("git commit *")),
            ("python3 script.py", Some("python3 *")),
            ("npm run build && rm -rf /", Some("npm run *")),
            ("RUST_LOG=debug cargo test", None),
            ("./run.sh", None),
            ("", None),
        ] {
            let offered_now = suggested_pattern("bash", &bash(command));
            assert_eq!(offered_now.as_deref(), offered, "{command}");
            if let Some(pattern) = offered_now
                && !command.contains('&')
            {
                assert!(rule(&format!("bash:{pattern}")).allows("bash", &bash(command)));
            }
        }
        let edit = |path: &str| serde_json::json!({ "path": path }).to_string();
        assert_eq!(
            suggested_pattern("edit_lines", &edit("src/app/mod.rs")).as_deref(),
            Some("src/app/*")
        );
        assert_eq!(suggested_pattern("edit_lines", &edit("main.rs")), None);
        assert_eq!(suggested_pattern("edit_lines", &edit("../x/y.rs")), None);
        assert_eq!(suggested_pattern("remember", r#"{"text":"x"}"#), None);
    }

    #[test]
    fn glob_handles_stars_anywhere() {
        assert!(glob("*", "", &[]));
        assert!(glob("a*b*c", "axxbyyc", &[]));
        assert!(!glob("a*b*c", "axxbyy", &[]));
        assert!(glob("?at", "cat", &[]));
        assert!(!glob("a*", "a;b", &[';']));
    }
}
