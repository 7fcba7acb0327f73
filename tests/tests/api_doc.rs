//! docs/api.md against the protocol types: the page must list every method of the API table
//! with every field of its params and result, every event kind with its fields, and every error
//! code, and nothing that no longer exists. A type that changes without its documentation fails
//! here.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::collections::{BTreeMap, BTreeSet};

use cwcode_protocol::ErrorCode;
use cwcode_protocol::methods::NAMES;
use cwcode_protocol::schema::api_schema;
use serde_json::Value;

const DOC: &str = include_str!("../../docs/api.md");

/// The `### \`name\`` sections under the `## title` heading, each with its text.
fn sections(title: &str) -> BTreeMap<String, String> {
    let heading = format!("## {title}\n");
    let start = DOC
        .find(&heading)
        .unwrap_or_else(|| panic!("docs/api.md has no `## {title}` section"));
    let body = &DOC[start + heading.len()..];
    let body = body.find("\n## ").map_or(body, |end| &body[..end]);
    let mut found = BTreeMap::new();
    for part in body.split("\n### `").skip(1) {
        let (name, text) = part.split_once('`').unwrap();
        assert!(
            found.insert(name.to_owned(), text.to_owned()).is_none(),
            "`{name}` is documented twice under {title}"
        );
    }
    found
}

/// The top-level fields of a schema, following `$ref` and array items into its `$defs`.
fn fields(schema: &Value) -> Vec<String> {
    let defs = &schema["$defs"];
    let mut shape = schema;
    if shape["type"] == "array" {
        shape = &shape["items"];
    }
    if let Some(reference) = shape["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap();
        shape = &defs[name];
    }
    shape["properties"]
        .as_object()
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

fn assert_fields_listed(section: &str, name: &str, fields: &[String]) {
    for field in fields {
        assert!(
            section.contains(&format!("| `{field}` |")),
            "docs/api.md: `{name}` does not document its field `{field}`"
        );
    }
}

#[test]
fn every_method_is_documented_with_its_fields() {
    let documented = sections("Methods");
    let names: BTreeSet<&str> = documented.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = NAMES.iter().copied().collect();
    assert_eq!(
        names, expected,
        "docs/api.md's methods differ from the API table in protocol/src/methods.rs"
    );
    let schema = api_schema();
    for (name, entry) in schema["methods"].as_object().unwrap() {
        let section = &documented[name];
        assert_fields_listed(section, name, &fields(&entry["params"]));
        if let Some(result) = entry.get("result") {
            assert_fields_listed(section, name, &fields(result));
        }
    }
}

#[test]
fn every_event_kind_is_documented_with_its_fields() {
    let documented = sections("Events");
    let schema = api_schema();
    let event = &schema["methods"]["session/subscribe"]["event"];
    let mut kinds = BTreeMap::new();
    for variant in event["oneOf"].as_array().unwrap() {
        let tag = &variant["properties"]["type"];
        let kind = tag["const"]
            .as_str()
            .or_else(|| tag["enum"][0].as_str())
            .unwrap();
        // What a reader makes of a kind it does not know; never sent.
        if kind == "unknown" {
            continue;
        }
        let own: Vec<String> = variant["properties"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|field| *field != "type")
            .cloned()
            .collect();
        kinds.insert(kind.to_owned(), own);
    }
    let names: BTreeSet<&String> = documented.keys().collect();
    assert_eq!(
        names,
        kinds.keys().collect(),
        "docs/api.md's events differ from EventKind in protocol/src/event.rs"
    );
    for (kind, own) in &kinds {
        assert_fields_listed(&documented[kind], kind, own);
    }
    for common in fields(event) {
        assert!(
            DOC.contains(&format!("`{common}`")),
            "docs/api.md does not say what an event's `{common}` is"
        );
    }
}

#[test]
fn every_error_code_is_documented() {
    let expected: BTreeSet<(i32, String)> = (-33099..=-33000)
        .filter_map(ErrorCode::from_code)
        .map(|code| (code.code(), format!("{code:?}")))
        .collect();
    let start = DOC.find("### Application codes").expect("an error table");
    let table = &DOC[start..];
    let table = &table[..table.find("\n### ").unwrap_or(table.len())];
    let documented: BTreeSet<(i32, String)> = table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells.get(1)?.parse::<i32>().ok()?;
            Some((code, cells.get(2)?.trim_matches('`').to_owned()))
        })
        .collect();
    assert_eq!(
        documented, expected,
        "docs/api.md's error codes differ from ErrorCode in protocol/src/error.rs"
    );
}
