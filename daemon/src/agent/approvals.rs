//! What the turn loop asks before a mutating tool call runs in `code` mode. The agent defines
//! the question; the session owns the answers (its pending requests, the tools allowed
//! "always", the ids handed out) and gives each turn a gate to ask through.

use cwcode_protocol::ApprovalDecision;
use tokio::sync::oneshot;

/// A client's answer to one approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub decision: ApprovalDecision,
    pub reason: Option<String>,
}

/// Where a turn asks for approvals.
pub trait ApprovalGate: Send + Sync {
    /// Whether the user answered "always" for this tool earlier in the session.
    fn is_always_allowed(&self, tool: &str) -> bool;

    /// Opens a request for a call of `tool`: its id (unique in the session, across restarts too)
    /// and the receiver its answer arrives on.
    fn open(&self, tool: &str) -> (String, oneshot::Receiver<Answer>);

    /// Drops a request whose turn stopped waiting for it.
    fn withdraw(&self, request_id: &str);
}
