//! What the turn loop asks before a mutating tool call runs in `code` mode. The agent defines
//! the question; the session owns the answers (its pending requests, the "always" rules, the
//! ids handed out) and gives each turn a gate to ask through.

use cwcode_protocol::ApprovalDecision;
use tokio::sync::oneshot;

/// A client's answer to one approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub decision: ApprovalDecision,
    pub reason: Option<String>,
    /// With `always`: the glob later calls must match (see `cwcode_protocol::allow`).
    pub pattern: Option<String>,
}

/// Where a turn asks for approvals.
pub trait ApprovalGate: Send + Sync {
    /// Whether an "always" answer earlier in the session covers this call of `tool`.
    fn is_always_allowed(&self, tool: &str, arguments: &str) -> bool;

    /// Opens a request for a call of `tool` with these arguments: its id (unique in the
    /// session, across restarts too) and the receiver its answer arrives on.
    fn open(&self, tool: &str, arguments: &str) -> (String, oneshot::Receiver<Answer>);

    /// Drops a request whose turn stopped waiting for it.
    fn withdraw(&self, request_id: &str);
}
