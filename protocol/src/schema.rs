//! The JSON Schema of the whole API, generated from the types in this crate and checked in as
//! `api.schema.json`, so that any client in any language can be written against it.

use schemars::{JsonSchema, schema_for};
use serde_json::{Map, Value, json};

use crate::ErrorCode;
use crate::methods::{self, Method, Subscription, Visitor};

fn schema<T: JsonSchema>() -> Value {
    serde_json::to_value(schema_for!(T)).unwrap_or(Value::Null)
}

/// Collects each method's entry of the schema.
#[derive(Default)]
struct Entries(Map<String, Value>);

impl Visitor for Entries {
    fn method<M: Method>(&mut self) {
        let entry = json!({ "params": schema::<M::Params>(), "result": schema::<M::Result>() });
        self.0.insert(M::NAME.to_owned(), entry);
    }

    fn subscription<S: Subscription>(&mut self) {
        let entry = json!({
            "params": schema::<S::Params>(),
            "notification": S::NOTIFICATION,
            "unsubscribe": S::UNSUBSCRIBE,
            "event": schema::<S::Item>(),
        });
        self.0.insert(S::NAME.to_owned(), entry);
    }
}

/// Every method's params and result, and the event shape that subscriptions carry: one entry
/// per line of the API table in [`crate::methods`]; and the application error codes.
pub fn api_schema() -> Value {
    let mut entries = Entries::default();
    methods::visit(&mut entries);
    let errors: Vec<Value> = ErrorCode::ALL
        .iter()
        .map(|code| json!({ "code": code.code(), "name": code.name(), "meaning": code.meaning() }))
        .collect();
    sorted_keys(json!({
        "title": "cwcode daemon API (JSON-RPC 2.0 over HTTP and WebSocket on a Unix socket)",
        "methods": entries.0,
        "errors": errors,
    }))
}

/// `value` with every object's keys in sorted order, so that JSON text built from it (this schema,
/// the tool definitions the daemon sends) is the same bytes whether or not a dependency turns on
/// serde_json's `preserve_order` (the ACP crate does, in every build it is part of).
pub fn sorted_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sorted_keys(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
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

    /// A method added to the table is in the schema with nothing else to edit, and nothing
    /// outside the table is.
    #[test]
    fn the_schema_lists_exactly_the_tables_methods() {
        let schema = api_schema();
        let mut listed: Vec<&str> = schema["methods"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // An unsubscribe method is described inside its subscription's entry.
        let mut expected: Vec<&str> = methods::NAMES
            .iter()
            .copied()
            .filter(|name| *name != methods::SESSION_UNSUBSCRIBE)
            .collect();
        listed.sort_unstable();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        let subscribe = &schema["methods"][methods::SESSION_SUBSCRIBE];
        assert_eq!(subscribe["unsubscribe"], methods::SESSION_UNSUBSCRIBE);
        assert_eq!(subscribe["notification"], methods::SESSION_EVENT);
    }

    /// Every application error code is listed once, with its meaning.
    #[test]
    fn the_schema_lists_every_error_code() {
        let schema = api_schema();
        let listed: Vec<i64> = schema["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|error| error["code"].as_i64().unwrap())
            .collect();
        let defined: Vec<i64> = ErrorCode::ALL
            .iter()
            .map(|code| i64::from(code.code()))
            .collect();
        assert_eq!(listed, defined);
        assert_eq!(schema["errors"][0]["name"], "SessionNotFound");
    }

    /// Every result is a typed struct (or a list of them): the schema names its properties.
    #[test]
    fn every_result_has_a_typed_shape() {
        let schema = api_schema();
        for (name, entry) in schema["methods"].as_object().unwrap() {
            let Some(result) = entry.get("result") else {
                continue;
            };
            let shaped = result.get("properties").is_some()
                || result["items"].get("$ref").is_some()
                || result["items"].get("properties").is_some();
            assert!(shaped, "{name} has an untyped result: {result}");
        }
    }

    /// The doctor's default profile is an optional name, not a serialised Rust `Result`.
    #[test]
    fn the_doctor_report_is_camel_case_without_rust_shapes() {
        let result = &api_schema()["methods"][methods::DAEMON_DOCTOR]["result"];
        let properties = &result["properties"];
        assert!(properties.get("defaultProfile").is_some(), "{properties}");
        assert!(properties.get("defaultProfileProblem").is_some());
        let text = result.to_string();
        assert!(text.contains("alwaysWritable"), "{text}");
        assert!(!text.contains("\"Ok\""), "{text}");
        assert!(!text.contains("always_writable"), "{text}");
    }
}
