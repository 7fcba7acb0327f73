//! The registry: tools in the fixed order the model sees them (SPEC §6: a stable prefix), their
//! definitions built once, and calls dispatched by name from JSON argument text.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::arguments::{self, ArgumentsError};
use super::bash::Bash;
use super::bash_background::BashBackground;
use super::chrome_fetch::ChromeFetch;
use super::edit_file::EditFile;
use super::edit_lines::EditLines;
use super::glob::Glob;
use super::grep::Grep;
use super::ls::Ls;
use super::read_file::{self, ReadFile};
use super::recall::Recall;
use super::redacting_sink::RedactingSink;
use super::remember::Remember;
use super::task::Task;
use super::todo_write::TodoWrite;
use super::web_fetch::WebFetch;
use super::write_file::WriteFile;
use super::{
    EditTools, Effect, MAX_RESULT_BYTES, Tool, ToolArgs, ToolContext, ToolError, ToolOutput,
};
use crate::mcp::McpTool;
use crate::sandbox::secrets::Redactor;

/// What the model is shown of a tool, built once at registration so every request carries the
/// same bytes.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    pub effect: Effect,
}

/// A tool behind a uniform face, so tools of different argument types share one list: the
/// arguments are parsed from the model's JSON text before the call starts.
trait ErasedTool: Send + Sync {
    fn start<'a>(
        &'a self,
        arguments: &str,
        context: &'a ToolContext,
    ) -> Result<BoxFuture<'a, Result<ToolOutput, ToolError>>, serde_json::Error>;

    fn touched_paths(&self, arguments: &str) -> Vec<PathBuf>;
}

impl<T: Tool> ErasedTool for T {
    fn start<'a>(
        &'a self,
        arguments: &str,
        context: &'a ToolContext,
    ) -> Result<BoxFuture<'a, Result<ToolOutput, ToolError>>, serde_json::Error> {
        let args: T::Args = serde_json::from_str(arguments)?;
        Ok(Box::pin(async move {
            Tool::call(self, args, context).await.map(Into::into)
        }))
    }

    fn touched_paths(&self, arguments: &str) -> Vec<PathBuf> {
        serde_json::from_str::<T::Args>(arguments)
            .map(|args| args.touched_paths())
            .unwrap_or_default()
    }
}

/// An MCP server's tool: its arguments are whatever JSON object the server's schema asks for.
struct McpEntry(McpTool);

impl ErasedTool for McpEntry {
    fn start<'a>(
        &'a self,
        arguments: &str,
        context: &'a ToolContext,
    ) -> Result<BoxFuture<'a, Result<ToolOutput, ToolError>>, serde_json::Error> {
        let arguments = match serde_json::from_str::<Value>(arguments)? {
            Value::Object(object) => object,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expected a JSON object, not {other}"
                )));
            }
        };
        Ok(Box::pin(async move {
            self.0
                .call(arguments, &context.cancel)
                .await
                .map(ToolOutput::from)
                .map_err(ToolError::new)
        }))
    }

    fn touched_paths(&self, _arguments: &str) -> Vec<PathBuf> {
        Vec::new()
    }
}

#[derive(Clone)]
struct Entry {
    spec: ToolSpec,
    /// A one-line reminder of the arguments, for parse errors.
    usage: String,
    tool: Arc<dyn ErasedTool>,
}

/// The tools a session offers, in registration order.
#[derive(Default, Clone)]
pub struct Registry {
    entries: Vec<Entry>,
}

impl Registry {
    /// Every built-in tool. The order here is the order the model sees.
    pub fn standard() -> Self {
        let mut registry = Self::default();
        registry.register(ReadFile);
        registry.register(EditLines);
        registry.register(Bash);
        registry.register(BashBackground);
        registry.register(WriteFile);
        registry.register(EditFile);
        registry.register(Glob);
        registry.register(Grep);
        registry.register(Ls);
        registry.register(TodoWrite);
        registry.register(WebFetch::default());
        registry.register(ChromeFetch);
        registry.register(Remember);
        registry.register(Recall);
        registry.register(Task);
        registry
    }

    /// Adds a tool at the end; a tool of the same name is replaced where it stands.
    pub fn register<T: Tool>(&mut self, tool: T) -> &mut Self {
        let definition = tool.definition();
        let parameters = lean_schema::<T::Args>();
        let entry = Entry {
            usage: usage_line(definition.name, &parameters),
            spec: ToolSpec {
                name: definition.name.to_owned(),
                description: definition.description.to_owned(),
                parameters,
                effect: definition.effect,
            },
            tool: Arc::new(tool),
        };
        match self
            .entries
            .iter_mut()
            .find(|existing| existing.spec.name == entry.spec.name)
        {
            Some(existing) => *existing = entry,
            None => self.entries.push(entry),
        }
        self
    }

    /// These tools and, after them, a session's MCP tools (SPEC §7.4) in name order: the set a
    /// session keeps for its life. MCP tools are mutating unless their server marks them
    /// read-only, and may then change workspace files.
    pub fn with_mcp_tools(&self, tools: Vec<McpTool>) -> Self {
        let mut registry = self.clone();
        for tool in tools {
            if registry.entry(&tool.name).is_some() {
                continue;
            }
            registry.entries.push(Entry {
                usage: usage_line(&tool.name, &tool.parameters),
                spec: ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                    effect: if tool.read_only {
                        Effect::ReadOnly
                    } else {
                        Effect::Workspace
                    },
                },
                tool: Arc::new(McpEntry(tool)),
            });
        }
        registry
    }

    /// The tools to offer, in order; plan mode leaves out the mutating ones.
    pub fn specs(&self, include_mutating: bool) -> impl Iterator<Item = &ToolSpec> {
        self.entries
            .iter()
            .map(|entry| &entry.spec)
            .filter(move |spec| include_mutating || !spec.effect.mutates())
    }

    /// What a session is offered: [`Registry::specs`] narrowed to the profile's edit tools, with
    /// `read_file` described as it then shows lines.
    pub fn offered(
        &self,
        include_mutating: bool,
        edit_tools: EditTools,
    ) -> impl Iterator<Item = Cow<'_, ToolSpec>> {
        self.specs(include_mutating)
            .filter(move |spec| edit_tools.offers(&spec.name))
            .map(move |spec| {
                if spec.name == "read_file" && !edit_tools.anchors_lines() {
                    Cow::Owned(ToolSpec {
                        description: read_file::PLAIN_DESCRIPTION.to_owned(),
                        ..spec.clone()
                    })
                } else {
                    Cow::Borrowed(spec)
                }
            })
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.entry(name).map(|entry| &entry.spec)
    }

    /// Runs a tool on the model's argument text. Every failure is a message the model can act on,
    /// the result is bounded, and secret values are redacted from it and from streamed output.
    pub async fn call(
        &self,
        name: &str,
        arguments: &str,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let redactor = Redactor::new(&context.secret_values);
        let result = if redactor.is_empty() {
            self.call_unredacted(name, arguments, context).await
        } else {
            let sink = RedactingSink::new(redactor.clone(), context.output.clone());
            let redacting = ToolContext {
                output: sink.output(),
                ..context.clone()
            };
            let result = self.call_unredacted(name, arguments, &redacting).await;
            sink.flush();
            result
        };
        // Redacted before it is bounded, which could cut a secret in two.
        result
            .map(|output| ToolOutput {
                text: bounded(redactor.redact(output.text)),
                ..output
            })
            .map_err(|error| ToolError::new(bounded(redactor.redact(error.message))))
    }

    async fn call_unredacted(
        &self,
        name: &str,
        arguments: &str,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let entry = self.entry(name).ok_or_else(|| self.unknown_tool(name))?;
        if !context.edit_tools.offers(name) {
            let instead = if name == "edit_lines" {
                "edit_file"
            } else {
                "edit_lines"
            };
            return Err(ToolError::new(format!(
                "{name} is not offered with this profile's edit tools: use {instead}"
            )));
        }
        let invalid = |error: &dyn std::fmt::Display| {
            ToolError::new(format!(
                "invalid arguments for {name}: {error}. Expected {}",
                entry.usage
            ))
        };
        let normalised =
            arguments::normalise(arguments).map_err(|error: ArgumentsError| invalid(&error))?;
        let call = entry
            .tool
            .start(&normalised.text, context)
            .map_err(|error| invalid(&error))?;
        let result = call.await.map_err(|error| ToolError::new(error.message));
        let Some(note) = normalised.note() else {
            return result;
        };
        match result {
            Ok(output) => Ok(ToolOutput {
                text: format!("{}\n{note}", output.text),
                ..output
            }),
            Err(error) => Err(ToolError::new(format!("{}\n{note}", error.message))),
        }
    }

    /// The paths a call will modify, for a checkpoint before it runs. Nothing when the arguments
    /// do not parse: the call will fail without touching anything.
    pub fn touched_paths(&self, name: &str, arguments: &str) -> Vec<PathBuf> {
        let Ok(normalised) = arguments::normalise(arguments) else {
            return Vec::new();
        };
        self.entry(name)
            .map(|entry| entry.tool.touched_paths(&normalised.text))
            .unwrap_or_default()
    }

    /// Whether a call may change workspace files it cannot name beforehand (a shell command):
    /// such a call is covered by a snapshot of the whole workspace instead of its paths.
    pub fn snapshots_workspace(&self, name: &str, arguments: &str) -> bool {
        self.get(name)
            .is_some_and(|spec| spec.effect.changes_workspace())
            && self.touched_paths(name, arguments).is_empty()
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.spec.name == name)
    }

    fn unknown_tool(&self, name: &str) -> ToolError {
        let available: Vec<&str> = self
            .entries
            .iter()
            .map(|entry| entry.spec.name.as_str())
            .collect();
        ToolError::new(format!(
            "there is no tool named `{name}`; the tools are: {}",
            available.join(", ")
        ))
    }
}

/// Cuts a result at [`MAX_RESULT_BYTES`], with a note saying how to get the rest.
fn bounded(mut text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let total = text.len();
    let mut cut = MAX_RESULT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[result cut at {cut} of {total} bytes: ask for less at once (a line range, a narrower \
         pattern, or output redirected to a file and read in parts)]"
    ));
    text
}

/// The argument schema as the model sees it: subschemas inlined (some providers reject `$ref`),
/// and without what costs tokens on every request and tells the model nothing or trips strict
/// validators: the meta-schema URL, the title, Rust's integer `format`s (`uint64`), and the
/// `null` alternative of optional fields.
fn lean_schema<A: ToolArgs>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = Value::from(generator.into_root_schema_for::<A>());
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("$schema");
    }
    strip_schema_noise(&mut schema);
    cwcode_protocol::schema::sorted_keys(schema)
}

/// Walks schema positions only (not property names, which may be any word).
fn strip_schema_noise(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("format");
    if let Some(Value::Array(types)) = object.get("type") {
        let non_null: Vec<&Value> = types.iter().filter(|kind| *kind != "null").collect();
        if let [only] = non_null.as_slice() {
            let only = (*only).clone();
            object.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(strip_schema_noise);
    }
    if let Some(items) = object.get_mut("items") {
        strip_schema_noise(items);
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alternatives)) = object.get_mut(combinator) {
            alternatives.iter_mut().for_each(strip_schema_noise);
        }
    }
}

/// `read_file {path: string, limit?: integer, offset?: integer}`: required arguments first.
fn usage_line(name: &str, schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments: Vec<(bool, String)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(property, definition)| {
                    let is_required = required.contains(&property.as_str());
                    let marker = if is_required { "" } else { "?" };
                    (
                        !is_required,
                        format!("{property}{marker}: {}", type_name(definition)),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    arguments.sort_by_key(|(optional, _)| *optional);
    let arguments: Vec<String> = arguments.into_iter().map(|(_, text)| text).collect();
    format!("{name} {{{}}}", arguments.join(", "))
}

fn type_name(definition: &Value) -> &str {
    definition
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("value")
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::sync::Arc;

    use schemars::JsonSchema;
    use serde::Deserialize;

    use super::*;
    use crate::tools::{ToolDefinition, test_context};

    #[derive(Debug, Deserialize, JsonSchema)]
    struct EchoArgs {
        text: String,
    }

    impl ToolArgs for EchoArgs {}

    /// Returns its text, to exercise the registry without a real tool's side effects.
    struct Echo;

    impl Tool for Echo {
        type Args = EchoArgs;
        type Output = String;

        fn definition(&self) -> ToolDefinition {
            ToolDefinition {
                name: "echo",
                description: "Returns its text.",
                effect: Effect::ReadOnly,
            }
        }

        async fn call(&self, args: EchoArgs, _: &ToolContext) -> Result<String, ToolError> {
            Ok(args.text)
        }
    }

    fn names<'a>(specs: impl Iterator<Item = &'a ToolSpec>) -> Vec<&'a str> {
        specs.map(|spec| spec.name.as_str()).collect()
    }

    #[test]
    fn the_standard_tools_come_in_registration_order() {
        let registry = Registry::standard();
        assert_eq!(
            names(registry.specs(true)),
            [
                "read_file",
                "edit_lines",
                "bash",
                "bash_background",
                "write_file",
                "edit_file",
                "glob",
                "grep",
                "ls",
                "todo_write",
                "web_fetch",
                "chrome_fetch",
                "remember",
                "recall",
                "task"
            ]
        );
    }

    #[test]
    fn plan_mode_sees_only_tools_that_do_not_mutate() {
        let registry = Registry::standard();
        assert_eq!(
            names(registry.specs(false)),
            [
                "read_file",
                "glob",
                "grep",
                "ls",
                "todo_write",
                "web_fetch",
                "chrome_fetch",
                "recall",
                "task"
            ]
        );
        assert_eq!(registry.get("bash").unwrap().effect, Effect::Workspace);
        assert_eq!(
            registry.get("bash_background").unwrap().effect,
            Effect::Workspace
        );
        assert!(registry.get("nothing").is_none());
    }

    #[test]
    fn only_calls_that_may_change_workspace_files_snapshot_the_workspace() {
        let registry = Registry::standard().with_mcp_tools(vec![
            McpTool::unstarted("write", false),
            McpTool::unstarted("look", true),
        ]);
        let snapshots = |name: &str| registry.snapshots_workspace(name, "{}");
        assert!(snapshots("bash"));
        assert!(
            !snapshots("remember"),
            "a note changes no workspace file, though it asks in code mode"
        );
        assert!(registry.get("remember").unwrap().effect.mutates());
        assert!(!snapshots("read_file"));
        assert!(
            snapshots("srv__write"),
            "an unmarked MCP tool may write files"
        );
        assert!(!snapshots("srv__look"));
    }

    #[test]
    fn parameters_are_lean_self_contained_schemas() {
        let registry = Registry::standard();
        let read_file = &registry.get("read_file").unwrap().parameters;
        assert_eq!(read_file["type"], "object");
        assert_eq!(read_file["required"], serde_json::json!(["path"]));
        assert_eq!(
            read_file["properties"]["path"]["description"],
            "Path relative to the workspace."
        );
        for spec in registry.specs(true) {
            let text = spec.parameters.to_string();
            for absent in ["$schema", "\"title\"", "$ref", "$defs", "format", "null"] {
                assert!(!text.contains(absent), "{}: {text}", spec.name);
            }
        }
        let edit_lines = &registry.get("edit_lines").unwrap().parameters;
        let edit_ops = &edit_lines["properties"]["edits"]["items"]["properties"]["op"];
        assert!(edit_ops.to_string().contains("insert_after"), "{edit_ops}");
    }

    /// With the system prompt they make the first request, which must stay under 10 KB (the
    /// end-to-end check of that is in tests/tests/memory.rs).
    #[test]
    fn all_definitions_together_stay_small() {
        let registry = Registry::standard();
        let bytes: usize = registry
            .specs(true)
            .map(|spec| {
                spec.name.len() + spec.description.len() + spec.parameters.to_string().len()
            })
            .sum();
        assert!(bytes < 6800, "{bytes} bytes");
    }

    #[tokio::test]
    async fn calls_are_dispatched_by_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let context = test_context(dir.path());
        let registry = Registry::standard();

        let result = registry
            .call("read_file", r#"{"path": "a.txt"}"#, &context)
            .await
            .unwrap()
            .text;

        assert_eq!(result, crate::tools::hashline::format_line(1, "hello"));
    }

    #[tokio::test]
    async fn arguments_a_local_model_got_wrong_are_repaired_and_the_model_is_told() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let result = Registry::standard()
            .call("read_file", "{'path': 'a.txt',}", &test_context(dir.path()))
            .await
            .unwrap()
            .text;
        assert!(result.starts_with(&crate::tools::hashline::format_line(1, "hello")));
        assert!(
            result.ends_with("(trailing commas, single-quoted strings); they were repaired. Send plain JSON next time.]"),
            "{result}"
        );
    }

    #[tokio::test]
    async fn an_unknown_tool_lists_the_available_ones() {
        let dir = tempfile::tempdir().unwrap();
        let error = Registry::standard()
            .call("write", "{}", &test_context(dir.path()))
            .await
            .unwrap_err();
        assert_eq!(
            error.message,
            "there is no tool named `write`; the tools are: read_file, edit_lines, bash, \
             bash_background, write_file, edit_file, glob, grep, ls, todo_write, web_fetch, chrome_fetch, \
             remember, recall, task"
        );
    }

    #[tokio::test]
    async fn bad_arguments_name_the_problem_and_the_expected_shape() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let registry = Registry::standard();

        let missing = registry.call("read_file", "", &context).await.unwrap_err();
        assert!(
            missing
                .message
                .starts_with("invalid arguments for read_file: missing field `path`"),
            "{missing}"
        );
        assert!(
            missing
                .message
                .ends_with("Expected read_file {path: string, limit?: integer, offset?: integer}"),
            "{missing}"
        );

        let broken = registry
            .call("bash", r#"{"command": "ls"#, &context)
            .await
            .unwrap_err();
        assert!(
            broken
                .message
                .contains("invalid arguments for bash: the arguments end in the middle"),
            "{broken}"
        );
        assert!(
            broken
                .message
                .contains("bash {command: string, timeout_secs?: integer}"),
            "{broken}"
        );
    }

    #[tokio::test]
    async fn results_are_bounded_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = Registry::default();
        registry.register(Echo);
        let long = "é".repeat(MAX_RESULT_BYTES);
        let arguments = serde_json::json!({ "text": long }).to_string();

        let result = registry
            .call("echo", &arguments, &test_context(dir.path()))
            .await
            .unwrap()
            .text;

        let (kept, note) = result.split_once("\n[result cut").unwrap();
        assert_eq!(kept.len(), MAX_RESULT_BYTES);
        assert!(
            note.starts_with(&format!(" at {MAX_RESULT_BYTES} of {} bytes", long.len())),
            "{note}"
        );
    }

    #[tokio::test]
    async fn secret_values_are_redacted_from_results() {
        let dir = tempfile::tempdir().unwrap();
        let mut context = test_context(dir.path());
        context.secret_values = Arc::from(vec!["sk-0123456789".to_owned(), "tiny".to_owned()]);
        let mut registry = Registry::default();
        registry.register(Echo);

        let result = registry
            .call(
                "echo",
                r#"{"text": "key sk-0123456789 and sk-0123456789; tiny stays"}"#,
                &context,
            )
            .await
            .unwrap();

        assert_eq!(result.text, "key [redacted] and [redacted]; tiny stays");
    }

    #[test]
    fn the_profile_edit_tools_choose_between_edit_lines_and_edit_file() {
        let registry = Registry::standard();
        let offered = |edit_tools| -> Vec<String> {
            registry
                .offered(true, edit_tools)
                .map(|spec| spec.name.clone())
                .filter(|name| name.starts_with("edit") || *name == "read_file")
                .collect()
        };
        assert_eq!(
            offered(EditTools::Both),
            ["read_file", "edit_lines", "edit_file"]
        );
        assert_eq!(offered(EditTools::Hashline), ["read_file", "edit_lines"]);
        assert_eq!(offered(EditTools::Replace), ["read_file", "edit_file"]);
        let read_file = |edit_tools| {
            registry
                .offered(false, edit_tools)
                .find(|spec| spec.name == "read_file")
                .unwrap()
                .description
                .clone()
        };
        assert!(read_file(EditTools::Hashline).contains("LINE:HASH|content"));
        assert!(read_file(EditTools::Replace).contains("LINE|content"));
        assert!(!read_file(EditTools::Replace).contains("edit_lines"));
    }

    #[tokio::test]
    async fn a_tool_the_profile_does_not_offer_is_refused_with_the_one_to_use() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let mut context = test_context(dir.path());
        context.edit_tools = EditTools::Replace;

        let error = Registry::standard()
            .call("edit_lines", r#"{"path": "a.txt", "edits": []}"#, &context)
            .await
            .unwrap_err();

        assert_eq!(
            error.message,
            "edit_lines is not offered with this profile's edit tools: use edit_file"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "hello\n"
        );
    }

    #[test]
    fn registering_a_name_again_replaces_the_tool_in_place() {
        let mut registry = Registry::default();
        registry.register(Echo).register(Bash).register(Echo);
        let names: Vec<&str> = registry
            .specs(true)
            .map(|spec| spec.name.as_str())
            .collect();
        assert_eq!(names, ["echo", "bash"]);
    }

    #[test]
    fn touched_paths_come_from_the_arguments() {
        let registry = Registry::standard();
        assert_eq!(
            registry.touched_paths("edit_lines", r#"{"path": "src/a.rs", "edits": []}"#),
            vec![PathBuf::from("src/a.rs")]
        );
        assert!(
            registry
                .touched_paths("bash", r#"{"command": "ls"}"#)
                .is_empty()
        );
        assert!(registry.touched_paths("edit_lines", "not json").is_empty());
        assert!(registry.touched_paths("nothing", "{}").is_empty());
    }
}
