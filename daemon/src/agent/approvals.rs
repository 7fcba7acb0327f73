//! The approval gate of `code` mode: a mutating tool call waits here until a client answers.
//! A detached session waits indefinitely; nothing here ever approves by itself.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use cwcode_protocol::ApprovalDecision;
use tokio::sync::oneshot;

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

    pub fn is_always_allowed(&self, tool: &str) -> bool {
        self.state().always_allowed.contains(tool)
    }

    /// Opens a request and returns its id and the receiver its answer arrives on.
    pub fn open(&self, tool: &str) -> (String, oneshot::Receiver<Answer>) {
        let mut state = self.state();
        state.next_id += 1;
        let request_id = format!("r{}", state.next_id);
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
}
