//! The approval gate of `code` mode: a mutating tool call waits here until a client answers.
//! A detached session waits indefinitely; nothing here ever approves by itself. What outlives a
//! restart ("always" answers, the ids already handed out) is rebuilt from the journal with
//! [`Approvals::resume`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use cwcode_protocol::ApprovalDecision;
use tokio::sync::oneshot;

const REQUEST_ID_PREFIX: &str = "r";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub decision: ApprovalDecision,
    pub reason: Option<String>,
}

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

    /// The gate of a session reopened from its journal: the tools already allowed "always"
    /// stay allowed, and new request ids continue after the highest one the journal holds, so
    /// an id answered (or left waiting) before the restart is never handed out again.
    pub fn resume(always_allowed: BTreeSet<String>, issued: impl IntoIterator<Item = u64>) -> Self {
        let next_id = issued.into_iter().max().unwrap_or(0);
        Self {
            state: Mutex::new(State {
                pending: HashMap::new(),
                always_allowed,
                next_id,
            }),
        }
    }

    /// The sequence number of a request id this gate handed out (`r7` → 7); `None` for any
    /// other text.
    pub fn issued_number(request_id: &str) -> Option<u64> {
        let digits = request_id.strip_prefix(REQUEST_ID_PREFIX)?;
        if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    pub fn is_always_allowed(&self, tool: &str) -> bool {
        self.state().always_allowed.contains(tool)
    }

    /// Opens a request and returns its id and the receiver its answer arrives on.
    pub fn open(&self, tool: &str) -> (String, oneshot::Receiver<Answer>) {
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

    /// Drops a request whose turn stopped waiting for it.
    pub fn withdraw(&self, request_id: &str) {
        self.state().pending.remove(request_id);
    }

    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_resumed_gate_keeps_always_and_never_reissues_an_id() {
        let approvals = Approvals::resume(BTreeSet::from(["bash".to_owned()]), [3, 9, 4]);
        assert!(approvals.is_always_allowed("bash"));
        assert!(!approvals.is_always_allowed("write_file"));
        let (id, _receiver) = approvals.open("write_file");
        assert_eq!(id, "r10");
        let fresh = Approvals::resume(BTreeSet::new(), []);
        assert_eq!(fresh.open("bash").0, "r1");
    }

    #[test]
    fn only_ids_this_gate_hands_out_are_counted() {
        assert_eq!(Approvals::issued_number("r12"), Some(12));
        for other in [
            "r",
            "12",
            "r-1",
            "r+1",
            "x3",
            "r1a",
            "r99999999999999999999999",
        ] {
            assert_eq!(Approvals::issued_number(other), None, "{other}");
        }
    }
}
