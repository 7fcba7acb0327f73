//! Params and results of the `memory/*` methods: notes kept across sessions in `memory.db`
//! (SPEC §3, §7), written by the `remember` tool or a client and ranked by `recall`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One stored note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryNote {
    pub id: i64,
    pub text: String,
    pub tags: Vec<String>,
    /// The workspace the note was written in (an absolute path).
    pub workspace: String,
    /// The session that wrote it; `None` for a note written by a client.
    pub session_id: Option<String>,
    /// RFC 3339.
    pub created: String,
}

/// `memory/remember`: stores a note.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRememberParams {
    pub text: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The workspace the note belongs to (an absolute path); clients send their working
    /// directory.
    pub workspace: String,
}

/// `memory/recall`: the notes that best match a query, the workspace's first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRecallParams {
    pub query: String,
    /// How many notes at most (default 5, at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Notes of this workspace rank before every other; without it all notes rank together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// Where a recalled note came from, relative to the workspace asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    Workspace,
    Global,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecalledNote {
    pub note: MemoryNote,
    pub scope: MemoryScope,
    /// Relevance blended with recency, in 0..=1: higher ranks first within a scope.
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRecallResult {
    /// Best first.
    pub notes: Vec<RecalledNote>,
}

/// `memory/list`: the newest notes first.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryListParams {
    /// Only this workspace's notes; without it, every note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// How many notes at most (default 50, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryListResult {
    pub notes: Vec<MemoryNote>,
}

/// `memory/delete`: removes one note.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDeleteParams {
    pub id: i64,
}
