//! The JSON Schema of the whole API, generated from the types in this crate and checked in as
//! `api.schema.json`, so that any client in any language can be written against it.

use schemars::{JsonSchema, schema_for};
use serde_json::{Value, json};

use crate::event::Event;
use crate::methods;
use crate::types::*;

fn schema<T: JsonSchema>() -> Value {
    serde_json::to_value(schema_for!(T)).unwrap_or(Value::Null)
}

fn method<P: JsonSchema, R: JsonSchema>() -> Value {
    json!({ "params": schema::<P>(), "result": schema::<R>() })
}

/// Every method's params and result, and the event shape that subscriptions carry.
pub fn api_schema() -> Value {
    let no_params = || json!({ "type": "object" });
    let plain = |params: Value, result: Value| json!({ "params": params, "result": result });
    let entries: Vec<(&str, Value)> = vec![
        (
            methods::DAEMON_INFO,
            plain(no_params(), schema::<DaemonInfo>()),
        ),
        (
            methods::DAEMON_DOCTOR,
            plain(no_params(), schema::<DoctorReport>()),
        ),
        (methods::DAEMON_SHUTDOWN, plain(no_params(), no_params())),
        (
            methods::SESSION_CREATE,
            method::<CreateSessionParams, SessionInfo>(),
        ),
        (
            methods::SESSION_LIST,
            plain(no_params(), schema::<Vec<SessionInfo>>()),
        ),
        (methods::SESSION_GET, method::<SessionRef, SessionInfo>()),
        (
            methods::SESSION_DELETE,
            plain(schema::<SessionRef>(), no_params()),
        ),
        (methods::SESSION_SEND, method::<SendParams, SendResult>()),
        (
            methods::SESSION_CANCEL,
            method::<SessionRef, CancelResult>(),
        ),
        (
            methods::SESSION_SET_MODE,
            method::<SetModeParams, SessionInfo>(),
        ),
        (
            methods::SESSION_SET_PROFILE,
            method::<SetProfileParams, SessionInfo>(),
        ),
        (
            methods::SESSION_CHECKPOINTS,
            method::<SessionRef, Vec<CheckpointInfo>>(),
        ),
        (
            methods::SESSION_REWIND,
            method::<RewindParams, RewindResult>(),
        ),
        (
            methods::SESSION_UNDO_REWIND,
            method::<SessionRef, RewindResult>(),
        ),
        (
            methods::SESSION_COMPACT,
            plain(schema::<SessionRef>(), no_params()),
        ),
        (methods::SESSION_CACHE, method::<SessionRef, CacheReport>()),
        (methods::SESSION_COST, method::<SessionRef, CostReport>()),
        (
            methods::SESSION_SUBSCRIBE,
            json!({
                "params": schema::<SubscribeParams>(),
                "notification": methods::SESSION_EVENT,
                "unsubscribe": methods::SESSION_UNSUBSCRIBE,
                "event": schema::<Event>(),
            }),
        ),
        (
            methods::APPROVAL_RESPOND,
            plain(schema::<ApprovalRespondParams>(), no_params()),
        ),
        (methods::GOAL_ADD, method::<GoalAddParams, GoalStatus>()),
        (methods::GOAL_START, method::<GoalStartParams, GoalStatus>()),
        (methods::GOAL_STOP, method::<SessionRef, GoalStatus>()),
        (methods::GOAL_STATUS, method::<SessionRef, GoalStatus>()),
        (
            methods::PROFILE_LIST,
            plain(no_params(), schema::<Vec<ProfileInfo>>()),
        ),
        (
            methods::CONFIG_SET_KEY,
            plain(schema::<SetKeyParams>(), no_params()),
        ),
    ];
    let methods: serde_json::Map<String, Value> = entries
        .into_iter()
        .map(|(name, entry)| (name.to_owned(), entry))
        .collect();
    json!({
        "title": "cwcode daemon API (JSON-RPC 2.0 over HTTP and WebSocket on a Unix socket)",
        "methods": methods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/api.schema.json");

    /// Fails when the types changed and the checked-in schema did not; regenerate with
    /// `CWCODE_WRITE_SCHEMA=1 cargo test -p cwcode-protocol schema`.
    #[test]
    fn the_checked_in_schema_matches_the_types() {
        let generated = serde_json::to_string_pretty(&api_schema()).unwrap() + "\n";
        if std::env::var_os("CWCODE_WRITE_SCHEMA").is_some() {
            std::fs::write(CHECKED_IN, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(CHECKED_IN).unwrap_or_default();
        assert!(
            checked_in == generated,
            "api.schema.json is out of date: run CWCODE_WRITE_SCHEMA=1 cargo test -p cwcode-protocol schema"
        );
    }
}
