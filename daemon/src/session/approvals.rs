//! A session's approval state in `code` mode: the requests waiting for a client's answer, the
//! tools allowed "always", and the ids handed out. The agent asks through the
//! [`ApprovalGate`] it defines; a detached session waits indefinitely, and nothing here ever
//! approves by itself. What outlives a restart is rebuilt from the journal with
//! [`Approvals::from_journal`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use cwcode_protocol::{ApprovalDecision, Event, EventKind};
use tokio::sync::oneshot;

use crate::agent::approvals::{Answer, ApprovalGate};

const REQUEST_ID_PREFIX: &str = "r";

#[derive(Debug, thiserror::Error)]
#[error(
    "no pending approval `{0}` in this session: it was already answered, or its turn ended; list events to see open requests"
)]
pub struct ApprovalNotFound(pub String);

struct Pending {
    tool: String,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, Pending>,
    always_allowed: BTreeSet<String>,
    next_id: u64,
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

    /// The approval state as the journal left it: every tool answered "always" stays allowed,
    /// and request ids continue after the highest one already issued, so an id answered (or
    /// left waiting) before the restart is never handed out again.
    pub fn from_journal(events: &[Event]) -> Self {
        let mut tool_of: HashMap<&str, &str> = HashMap::new();
        let mut always_allowed = BTreeSet::new();
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
                    ..
                } => {
                    if let Some(tool) = tool_of.get(request_id.as_str()) {
                        always_allowed.insert((*tool).to_owned());
                    }
                }
                _ => {}
            }
        }
        Self {
            state: Mutex::new(State {
                pending: HashMap::new(),
                always_allowed,
                next_id: issued.into_iter().max().unwrap_or(0),
            }),
        }
    }

    /// Hands a client's answer to the call waiting for it.
    pub fn resolve(&self, request_id: &str, answer: Answer) -> Result<(), ApprovalNotFound> {
        let mut state = self.state();
        let pending = state
            .pending
            .remove(request_id)
            .ok_or_else(|| ApprovalNotFound(request_id.to_owned()))?;
        if answer.decision == ApprovalDecision::Always {
            state.always_allowed.insert(pending.tool);
        }
        // The waiting turn may have been cancelled in the meantime; then nobody needs the answer.
        let _ = pending.answer.send(answer);
        Ok(())
    }

    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }
}

impl ApprovalGate for Approvals {
    fn is_always_allowed(&self, tool: &str) -> bool {
        self.state().always_allowed.contains(tool)
    }

    fn open(&self, tool: &str) -> (String, oneshot::Receiver<Answer>) {
        let mut state = self.state();
        state.next_id += 1;
        let request_id = format!("{REQUEST_ID_PREFIX}{}", state.next_id);
        let (sender, receiver) = oneshot::channel();
        state.pending.insert(
            request_id.clone(),
            Pending {
                tool: tool.to_owned(),
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
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiting_call_once() {
        let approvals = Approvals::default();
        let (id, receiver) = approvals.open("bash");
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
        assert!(!approvals.is_always_allowed("bash"));
    }

    #[test]
    fn always_allows_the_tool_for_the_rest_of_the_session() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("edit_lines");
        approvals
            .resolve(&id, answer(ApprovalDecision::Always))
            .unwrap();
        assert!(approvals.is_always_allowed("edit_lines"));
        assert!(!approvals.is_always_allowed("bash"));
    }

    #[test]
    fn a_withdrawn_request_cannot_be_answered() {
        let approvals = Approvals::default();
        let (id, _receiver) = approvals.open("bash");
        approvals.withdraw(&id);
        assert_eq!(approvals.pending(), 0);
        assert!(
            approvals
                .resolve(&id, answer(ApprovalDecision::Always))
                .is_err()
        );
        assert!(!approvals.is_always_allowed("bash"));
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
            },
        )
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
        assert!(approvals.is_always_allowed("bash"));
        assert!(!approvals.is_always_allowed("write_file"));
        assert!(!approvals.is_always_allowed("edit_lines"));
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
        assert_eq!(approvals.open("bash").0, "r6");
        assert_eq!(Approvals::from_journal(&[]).open("bash").0, "r1");
    }
}
