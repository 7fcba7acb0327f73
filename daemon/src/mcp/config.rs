//! One entry of `config.json`'s `mcp_servers`: a command cwcode starts and speaks to over its
//! stdin and stdout, or the URL of a streamable-HTTP server.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// How long a call may take unless the server's `timeout_secs` says otherwise.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TIMEOUT_SECS: u64 = 3600;
/// Server names become a prefix of tool names (`name__tool`), which providers limit to 64
/// characters of `[A-Za-z0-9_-]`: a short name leaves room for the tool's own.
const MAX_NAME_CHARS: usize = 32;

/// A server as `config.json` writes it: either `command` (with `args` and `env`) or `url` (with
/// `headers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program of a stdio server, found on the daemon's PATH unless it is a path.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables the server gets besides the allow-listed tool environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long one tool call may take before it is abandoned with an error.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// How cwcode reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

impl ServerConfig {
    pub fn transport(&self) -> Transport {
        if self.url.is_some() {
            Transport::Http
        } else {
            Transport::Stdio
        }
    }

    pub fn call_timeout(&self) -> Duration {
        self.timeout_secs
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs)
    }

    /// What is wrong with this entry, as `(field, reason)` under `mcp_servers.NAME`.
    pub fn problem(&self, name: &str) -> Option<(String, String)> {
        let field = |suffix: &str| format!("mcp_servers.{name}{suffix}");
        let name_ok = !name.is_empty()
            && name.chars().count() <= MAX_NAME_CHARS
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !name.contains("__");
        if !name_ok {
            return Some((
                field(""),
                format!(
                    "a server name is 1 to {MAX_NAME_CHARS} letters, digits, `-` or `_`, without \
                     `__` (it prefixes the tool names, as `{name}__tool`): rename it"
                ),
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Some((
                field(""),
                "give either `command` (a stdio server) or `url` (a streamable-HTTP server), not \
                 both"
                    .to_owned(),
            )),
            (None, None) => Some((
                field(""),
                "say how to reach the server: `command` (with `args`, `env`) or `url` (with \
                 `headers`)"
                    .to_owned(),
            )),
            (Some(command), None) if command.trim().is_empty() => Some((
                field(".command"),
                "is empty: name the program to run".to_owned(),
            )),
            (Some(_), None) if !self.headers.is_empty() => Some((
                field(".headers"),
                "only a `url` server takes headers; a stdio server takes `env`".to_owned(),
            )),
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Some((
                    field(".url"),
                    format!("`{url}` is not an http:// or https:// URL"),
                ))
            }
            (None, Some(_)) if !self.args.is_empty() || !self.env.is_empty() => Some((
                field(""),
                "`args` and `env` belong to a `command` server; a `url` server takes `headers`"
                    .to_owned(),
            )),
            _ => match self.timeout_secs {
                Some(secs) if !(1..=MAX_TIMEOUT_SECS).contains(&secs) => Some((
                    field(".timeout_secs"),
                    format!("must be 1 to {MAX_TIMEOUT_SECS} seconds, not {secs}"),
                )),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> ServerConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_stdio_and_an_http_server_are_accepted() {
        let stdio = parse(r#"{"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}}"#);
        assert_eq!(stdio.problem("everything"), None);
        assert_eq!(stdio.transport(), Transport::Stdio);
        let http = parse(r#"{"url": "https://example.com/mcp", "headers": {"X": "y"}}"#);
        assert_eq!(http.problem("remote-1"), None);
        assert_eq!(http.transport(), Transport::Http);
    }

    #[test]
    fn bad_entries_say_what_to_fix() {
        let both = parse(r#"{"command": "x", "url": "http://h"}"#);
        assert!(both.problem("s").unwrap().1.contains("not both"));
        let neither = parse("{}");
        assert!(neither.problem("s").unwrap().1.contains("`command`"));
        let bad_name = parse(r#"{"command": "x"}"#);
        assert!(bad_name.problem("a__b").unwrap().1.contains("rename"));
        assert!(bad_name.problem("a b").is_some());
        let ftp = parse(r#"{"url": "ftp://h"}"#);
        assert_eq!(ftp.problem("s").unwrap().0, "mcp_servers.s.url");
        let slow = parse(r#"{"command": "x", "timeout_secs": 0}"#);
        assert_eq!(slow.problem("s").unwrap().0, "mcp_servers.s.timeout_secs");
        assert!(serde_json::from_str::<ServerConfig>(r#"{"cmd": "x"}"#).is_err());
    }
}
