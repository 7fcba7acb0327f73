//! `run --allow TOOL[:PATTERN]`: which approval requests a one-shot run answers by itself.
//!
//! `TOOL` is a tool name, or a glob over tool names (`*` approves every tool, as yolo does).
//! `PATTERN` is a glob over what the call acts on: the command of `bash`, the `path` of the
//! file tools. In a `bash` pattern `*` and `?` never match a shell operator or substitution
//! (`; & | < > $ \` ( )` or a line break), so `bash:"cargo test*"` approves `cargo test -q`
//! but not `cargo test; curl …`. Write such a character into the pattern to allow it.

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
    /// Whether this rule approves a call of `tool` with these (JSON) arguments.
    pub fn allows(&self, tool: &str, arguments: &str) -> bool {
        if !glob(&self.tool, tool, &[]) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let Ok(arguments) = serde_json::from_str::<serde_json::Value>(arguments) else {
            return false;
        };
        let (subject, unmatched) = if tool == "bash" {
            (arguments.get("command"), SHELL_OPERATORS)
        } else {
            (arguments.get("path"), &[][..])
        };
        subject
            .and_then(serde_json::Value::as_str)
            .is_some_and(|subject| glob(pattern, subject.trim(), unmatched))
    }
}

/// The first rule that approves the call.
pub fn first_allowing<'a>(
    rules: &'a [AllowRule],
    tool: &str,
    arguments: &str,
) -> Option<&'a AllowRule> {
    rules.iter().find(|rule| rule.allows(tool, arguments))
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
    fn glob_handles_stars_anywhere() {
        assert!(glob("*", "", &[]));
        assert!(glob("a*b*c", "axxbyyc", &[]));
        assert!(!glob("a*b*c", "axxbyy", &[]));
        assert!(glob("?at", "cat", &[]));
        assert!(!glob("a*", "a;b", &[';']));
    }
}
