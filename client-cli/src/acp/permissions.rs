//! Approvals: a daemon approval request becomes `session/request_permission` (allow once, allow
//! always (for the request's suggested pattern, such as `cargo test *`, when it has one), reject), the editor's choice goes back as `approval/respond`, and a request answered
//! from another client (TUI, CLI) is withdrawn from the editor with `$/cancel_request`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client as AcpClient;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use cwcode_protocol::{ApprovalDecision, ApprovalRespondParams, Client, ErrorCode};
use serde_json::Value;
use tokio::sync::oneshot;

use super::updates;

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject";
/// Requests open in the editor at once; past it the oldest stays with the other clients (the
/// daemon never approves by itself, so nothing runs unasked).
const OPEN_REQUESTS: usize = 64;

/// What the editor is asked.
pub fn request(
    session_id: &str,
    call_id: &str,
    tool: &str,
    arguments: &str,
    suggested_pattern: Option<&str>,
) -> RequestPermissionRequest {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let fields = ToolCallUpdateFields::new()
        .title(updates::title(tool, &args))
        .kind(updates::kind(tool))
        .status(ToolCallStatus::Pending)
        .raw_input(args);
    let options = vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            match suggested_pattern {
                Some(pattern) => format!("Always allow `{pattern}` in this session"),
                None => format!("Always allow {tool} in this session"),
            },
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
    ];
    RequestPermissionRequest::new(
        session_id.to_owned(),
        ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// The daemon's decision for the editor's answer. A cancelled request (the editor cancelled the
/// prompt) and an option this bridge did not offer are denials, never approvals.
pub fn decision(outcome: &RequestPermissionOutcome) -> (ApprovalDecision, Option<String>) {
    match outcome {
        RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
            ALLOW_ONCE => (ApprovalDecision::Approve, None),
            ALLOW_ALWAYS => (ApprovalDecision::Always, None),
            REJECT => (
                ApprovalDecision::Deny,
                Some("rejected in the editor".to_owned()),
            ),
            other => (
                ApprovalDecision::Deny,
                Some(format!("the editor chose an unknown option `{other}`")),
            ),
        },
        _ => (
            ApprovalDecision::Deny,
            Some("the editor cancelled the request".to_owned()),
        ),
    }
}

/// The requests of one session open in the editor, by daemon request id: resolving one withdraws
/// it.
#[derive(Debug, Default, Clone)]
pub struct OpenRequests(Arc<Mutex<HashMap<String, oneshot::Sender<()>>>>);

impl OpenRequests {
    /// The request was answered (here or elsewhere): stop asking the editor.
    pub fn resolved(&self, request_id: &str) {
        let withdraw = self
            .0
            .lock()
            .ok()
            .and_then(|mut open| open.remove(request_id));
        if let Some(withdraw) = withdraw {
            let _ = withdraw.send(());
        }
    }

    fn open(&self, request_id: &str) -> Option<oneshot::Receiver<()>> {
        let mut open = self.0.lock().ok()?;
        if open.len() >= OPEN_REQUESTS {
            return None;
        }
        let (sender, receiver) = oneshot::channel();
        open.insert(request_id.to_owned(), sender);
        Some(receiver)
    }
}

/// Asks the editor about one daemon approval request and passes its answer on. Runs as its own
/// task: the editor may take as long as the user does.
pub async fn ask(
    editor: ConnectionTo<AcpClient>,
    daemon: Arc<Client>,
    open: OpenRequests,
    session_id: String,
    request_id: String,
    request: RequestPermissionRequest,
    always_pattern: Option<String>,
) {
    let Some(withdrawn) = open.open(&request_id) else {
        return;
    };
    let answer = editor.send_request(request).block_task();
    let response = tokio::select! {
        response = answer => response,
        // Dropping `answer` sends `$/cancel_request` for the editor's open request.
        _ = withdrawn => return,
    };
    open.resolved(&request_id);
    let (decision, reason) = match &response {
        Ok(response) => decision(&response.outcome),
        Err(error) => (
            ApprovalDecision::Deny,
            Some(format!("the editor failed to answer: {error}")),
        ),
    };
    let pattern = always_pattern.filter(|_| decision == ApprovalDecision::Always);
    let params = ApprovalRespondParams {
        session_id,
        request_id,
        decision,
        reason,
        pattern,
    };
    // Answered elsewhere in the meantime: the other answer stands, nothing to do.
    if let Err(error) = daemon.respond_approval(&params).await
        && error.rpc_code() != Some(ErrorCode::ApprovalNotFound.code())
    {
        let text = format!("\n(cwcode: the editor's answer did not reach cwcoded: {error})\n");
        let _ =
            editor.send_notification(agent_client_protocol::v1::schema::SessionNotification::new(
                params.session_id.clone(),
                updates::thought(&text),
            ));
    }
}

/// The connection handle type handlers get, named once.
pub type EditorConnection = ConnectionTo<AcpClient>;

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;

    #[test]
    fn the_three_choices_map_to_daemon_decisions() {
        let pick = |id: &str| {
            decision(&RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(id.to_owned()),
            ))
        };
        assert_eq!(pick(ALLOW_ONCE).0, ApprovalDecision::Approve);
        assert_eq!(pick(ALLOW_ALWAYS).0, ApprovalDecision::Always);
        assert_eq!(pick(REJECT).0, ApprovalDecision::Deny);
        assert_eq!(pick("sudo").0, ApprovalDecision::Deny);
        assert_eq!(
            decision(&RequestPermissionOutcome::Cancelled).0,
            ApprovalDecision::Deny
        );
    }

    #[test]
    fn the_request_offers_once_always_and_reject() {
        let json =
            serde_json::to_value(request("s", "c", "bash", r#"{"command":"ls"}"#, None)).unwrap();
        let kinds: Vec<&str> = json["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|option| option["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
        assert_eq!(json["toolCall"]["toolCallId"], "c");
        assert_eq!(json["toolCall"]["kind"], "execute");
        assert_eq!(
            json["options"][1]["name"],
            "Always allow bash in this session"
        );
    }

    #[test]
    fn always_names_the_pattern_the_daemon_offers() {
        let asked = request(
            "s",
            "c",
            "bash",
            r#"{"command":"cargo test -q"}"#,
            Some("cargo test *"),
        );
        let json = serde_json::to_value(asked).unwrap();
        assert_eq!(
            json["options"][1]["name"],
            "Always allow `cargo test *` in this session"
        );
    }
}
