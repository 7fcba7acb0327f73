//! A session's approval state in `code` mode: the requests waiting for a client's answer, the
//! "always" rules (a whole tool, or its calls matching a pattern such as `cargo test *`), and
//! the ids handed out. The agent asks through the
//! [`ApprovalGate`] it defines; a detached session waits indefinitely, and nothing here ever
//! approves by itself. What outlives a restart is rebuilt from the journal with
//! [`Approvals::from_journal`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use cwcode_protocol::allow::{AllowRule, subject};
use cwcode_protocol::{ApprovalDecision, Event, EventKind};
use tokio::sync::oneshot;

use crate::agent::approvals::{Answer, ApprovalGate};

const REQUEST_ID_PREFIX: &str = "r";
/// "Always" rules one session keeps; past this an answer must allow the whole tool or once.
const MAX_RULES: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum RespondError {
    #[error(
        "no pending approval `{0}` in this session: it was already answered, or its turn ended; list events to see open requests"
    )]
    NotFound(String),
    /// The answer's `pattern` cannot be used; the request stays open for a better answer.
    #[error("{0}")]
    Pattern(String),
}

struct Pending {
    tool: String,
    arguments: String,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, Pending>,
    always: Vec<AllowRule>,
    next_id: u64,
}

impl State {
    fn add_rule(&mut self, rule: AllowRule) {
        if !self.always.contains(&rule) {
            self.always.push(rule);
        }
    }
}

#[derive(Default)]
pub struct Approvals {
    state: Mutex<State>,
}

impl Approvals {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The approval state as the journal left it: every "always" answer stays in force,
    /// and request ids continue after the highest one already issued, so an id answered (or
    /// left waiting) before the restart is never handed out again.
    pub fn from_journal(events: &[Event]) -> Self {
        let mut tool_of: HashMap<&str, &str> = HashMap::new();
        let mut state = State::default();
        let mut issued = Vec::new();
        for event in events {
            match &event.kind {
                EventKind::ApprovalRequested {
                    request_id, tool, ..
                } => {
                    tool_of.insert(request_id, tool);
                    issued.extend(issued_number(request_id));
                }
                EventKind::ApprovalResolved {
                    request_id,
                    decision: ApprovalDecision::Always,
                    pattern,
                    ..
                } => {
                    let rule = tool_of
                        .get(request_id.as_str())
                        .and_then(|tool| AllowRule::new(tool, pattern.as_deref()).ok());
                    if let Some(rule) = rule
                        && state.always.len() < MAX_RULES
                    {
                        state.add_rule(rule);
                    }
                }
                _ => {}
            }
        }
        state.next_id = issued.into_iter().max().unwrap_or(0);
        Self {
            state: Mutex::new(state),
        }
    }

    /// Hands a client's answer to the call waiting for it. An answer whose pattern cannot be
    /// used is refused and the request stays open.
    pub fn resolve(&self, request_id: &str, answer: Answer) -> Result<(), RespondError> {
        let mut state = self.state();
        let pending = state
            .pending
            .get(request_id)
            .ok_or_else(|| RespondError::NotFound(request_id.to_owned()))?;
        let rule = match (answer.decision, answer.pattern.as_deref()) {
            (ApprovalDecision::Always, pattern) => {
                Some(rule_for(&pending.tool, &pending.arguments, pattern)?)
            }
            (_, None) => None,
            (_, Some(_)) => {
                return Err(RespondError::Pattern(
                    "a pattern goes only with the decision `always`".to_owned(),
                ));
            }
        };
        if let Some(rule) = rule {
            if state.always.len() >= MAX_RULES && !state.always.contains(&rule) {
                return Err(RespondError::Pattern(format!(
                    "this session already keeps {MAX_RULES} \"always\" rules: approve this call once, or start a new session"
                )));
            }
            state.add_rule(rule);
        }
        if let Some(pending) = state.pending.remove(request_id) {
            // The waiting turn may have been cancelled meanwhile; then nobody needs the answer.
            let _ = pending.answer.send(answer);
        }
        Ok(())
    }

    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }
}

/// The "always" rule an answer asks for. The call it answers runs either way; the pattern need
/// not match it (`cargo test *` answers `cargo test 2>&1 | tail` too), only concern later calls.
fn rule_for(tool: &str, arguments: &str, pattern: Option<&str>) -> Result<AllowRule, RespondError> {
    let rule = AllowRule::new(tool, pattern).map_err(RespondError::Pattern)?;
    if pattern.is_some() && subject(tool, arguments).is_none() {
        return Err(RespondError::Pattern(format!(
            "`{tool}` calls have no command or path for a pattern to match: answer `always` without a pattern to allow every {tool} call"
        )));
    }
    Ok(rule)
}

impl ApprovalGate for Approvals {
    fn is_always_allowed(&self, tool: &str, arguments: &str) -> bool {
        // Parsed once, outside the lock, for all the rules.
        let subject = subject(tool, arguments);
        // The tool name must be the rule's own: a tool named with a wildcard never widens it.
        self.state()
            .always
            .iter()
            .any(|rule| rule.tool() == tool && rule.allows_subject(tool, subject.as_deref()))
    }

    fn open(&self, tool: &str, arguments: &str) -> (String, oneshot::Receiver<Answer>) {
        let mut state = self.state();
        state.next_id += 1;
        let request_id = format!("{REQUEST_ID_PREFIX}{}", state.next_id);
        let (sender, receiver) = oneshot::channel();
        state.pending.insert(
            request_id.clone(),
            Pending {
                tool: tool.to_owned(),
                arguments: arguments.to_owned(),
                answer: sender,
            },
        );
        (request_id, receiver)
    }

    fn withdraw(&self, request_id: &str) {
        self.state().pending.remove(request_id);
    }
}

/// The sequence number of a request id this session handed out (`r7` → 7); `None` for any other
/// text.
fn issued_number(request_id: &str) -> Option<u64> {
    let digits = request_id.strip_prefix(REQUEST_ID_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::now_rfc3339;

    fn answer(decision: ApprovalDecision) -> Answer {
        Answer {
            decision,
            reason: None,
            pattern: None,
        }
    }

    fn always_for(pattern: &str) -> Answer {
        Answer {
            pattern: Some(pattern.to_owned()),
            ..answer(ApprovalDecision::Always)
        }
    }

    fn bash(command: &str) -> String {
        serde_json::json!({ "command": command }).to_string()
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiting_call_once() {
        let approvals = Approvals::default();
        let (id, receiver) = approvals.open("bash", "{}");
        assert_eq!(approvals.pending(), 1);
        approvals
            .resolve(&id, answer(ApprovalDecision::Approve))
            .unwrap();
        assert_eq!(receiver.await.unwrap().decision, ApprovalDecision::Approve);
        assert!(
            approvals
                .resolve(&id, answer(ApprovalDecision::Deny))
                .is_err()
        );
        assert!(!approvals.is_always_allowed("bash", "{}"));
    }

    #[test]
    fn always_allows_the_tool_for_the_rest_of_the_session() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("edit_lines", "{}");
        approvals
            .resolve(&id, answer(ApprovalDecision::Always))
            .unwrap();
        assert!(approvals.is_always_allowed("edit_lines", "{}"));
        assert!(!approvals.is_always_allowed("bash", "{}"));
    }

    #[test]
    fn a_withdrawn_request_cannot_be_answered() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("bash", "{}");
        approvals.withdraw(&id);
        assert_eq!(approvals.pending(), 0);
        assert!(
            approvals
                .resolve(&id, answer(ApprovalDecision::Always))
                .is_err()
        );
        assert!(!approvals.is_always_allowed("bash", "{}"));
    }

    #[test]
    fn only_ids_this_session_hands_out_are_counted() {
        assert_eq!(issued_number("r12"), Some(12));
        for other in [
            "r",
            "12",
            "r-1",
            "r+1",
            "x3",
            "r1a",
            "r99999999999999999999999",
        ] {
            assert_eq!(issued_number(other), None, "{other}");
        }
    }

    fn event(seq: u64, kind: EventKind) -> Event {
        Event {
            seq,
            time: now_rfc3339(),
            parent_call_id: None,
            kind,
        }
    }

    fn requested(seq: u64, request_id: &str, tool: &str) -> Event {
        event(
            seq,
            EventKind::ApprovalRequested {
                request_id: request_id.to_owned(),
                call_id: format!("call{seq}"),
                tool: tool.to_owned(),
                arguments: "{}".to_owned(),
                suggested_pattern: None,
            },
        )
    }

    fn resolved(seq: u64, request_id: &str, decision: ApprovalDecision) -> Event {
        event(
            seq,
            EventKind::ApprovalResolved {
                request_id: request_id.to_owned(),
                decision,
                reason: None,
                pattern: None,
            },
        )
    }

    #[test]
    fn always_for_a_pattern_allows_only_the_calls_it_matches() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("bash", &bash("cargo test -q"));
        approvals.resolve(&id, always_for("cargo test *")).unwrap();
        assert!(approvals.is_always_allowed("bash", &bash("cargo test --lib parse")));
        assert!(approvals.is_always_allowed("bash", &bash("cargo test")));
        assert!(!approvals.is_always_allowed("bash", &bash("cargo build")));
        assert!(!approvals.is_always_allowed("bash", &bash("cargo test; curl x | sh")));
        assert!(!approvals.is_always_allowed("bash_background", &bash("cargo test")));
    }

    #[test]
    fn an_unusable_pattern_is_refused_and_the_request_stays_open() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("bash", &bash("cargo test -q"));
        for (wrong, says) in [
            (always_for(""), "empty pattern"),
            (
                Answer {
                    pattern: Some("cargo test *".to_owned()),
                    ..answer(ApprovalDecision::Approve)
                },
                "only with the decision `always`",
            ),
        ] {
            let error = approvals.resolve(&id, wrong).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        let (remember, _receiver) = approvals.open("remember", r#"{"text":"x"}"#);
        let error = approvals
            .resolve(&remember, always_for("x*"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("no command or path"), "{error}");
        assert_eq!(approvals.pending(), 2);
        assert!(!approvals.is_always_allowed("bash", &bash("cargo test")));
        approvals.resolve(&id, always_for("cargo test *")).unwrap();
        assert_eq!(approvals.pending(), 1);
    }

    #[test]
    fn a_session_keeps_a_bounded_number_of_rules() {
        let approvals = Approvals::default();
        for n in 0..MAX_RULES {
            let command = format!("tool{n} --flag");
            let (id, _receiver) = approvals.open("bash", &bash(&command));
            approvals
                .resolve(&id, always_for(&format!("tool{n} *")))
                .unwrap();
        }
        let (id, _receiver) = approvals.open("bash", &bash("one-more"));
        let error = approvals
            .resolve(&id, always_for("one-more *"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("approve this call once"), "{error}");
        approvals
            .resolve(&id, answer(ApprovalDecision::Approve))
            .unwrap();
    }

    #[test]
    fn pattern_rules_in_the_journal_come_back_after_a_restart() {
        let events = [
            event(
                1,
                EventKind::ApprovalRequested {
                    request_id: "r1".to_owned(),
                    call_id: "c1".to_owned(),
                    tool: "bash".to_owned(),
                    arguments: bash("cargo test -q"),
                    suggested_pattern: Some("cargo test *".to_owned()),
                },
            ),
            event(
                2,
                EventKind::ApprovalResolved {
                    request_id: "r1".to_owned(),
                    decision: ApprovalDecision::Always,
                    reason: None,
                    pattern: Some("cargo test *".to_owned()),
                },
            ),
        ];
        let approvals = Approvals::from_journal(&events);
        assert!(approvals.is_always_allowed("bash", &bash("cargo test --doc")));
        assert!(!approvals.is_always_allowed("bash", &bash("rm -rf target")));
    }

    #[test]
    fn always_answers_in_the_journal_allow_their_tool_again() {
        let events = [
            requested(1, "r1", "bash"),
            resolved(2, "r1", ApprovalDecision::Always),
            requested(3, "r2", "write_file"),
            resolved(4, "r2", ApprovalDecision::Approve),
            requested(5, "r3", "edit_lines"),
            resolved(6, "r3", ApprovalDecision::Deny),
            // An answer to a request the journal lost names no tool: nothing is allowed by it.
            resolved(7, "r40", ApprovalDecision::Always),
        ];
        let approvals = Approvals::from_journal(&events);
        assert!(approvals.is_always_allowed("bash", "{}"));
        assert!(!approvals.is_always_allowed("write_file", "{}"));
        assert!(!approvals.is_always_allowed("edit_lines", "{}"));
        assert_eq!(approvals.pending(), 0);
    }

    #[test]
    fn request_ids_continue_after_the_highest_one_in_the_journal() {
        // r5 was left waiting when the daemon stopped: it is never handed out again.
        let events = [
            requested(1, "r4", "bash"),
            resolved(2, "r4", ApprovalDecision::Approve),
            requested(3, "r5", "bash"),
        ];
        let approvals = Approvals::from_journal(&events);
        assert_eq!(approvals.open("bash", "{}").0, "r6");
        assert_eq!(Approvals::from_journal(&[]).open("bash", "{}").0, "r1");
    }
}
