//! Request, result and state types of the JSON-RPC API. Fields are camelCase on the wire.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the agent may do without asking (SPEC §5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Only non-mutating tools are offered.
    Plan,
    /// Every tool is offered; each mutating call waits for an approval.
    #[default]
    Code,
    /// Every tool is offered and approved without asking.
    Yolo,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Plan, Mode::Code, Mode::Yolo];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Code => "code",
            Mode::Yolo => "yolo",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{0}`: expected plan, code or yolo")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| UnknownMode(text.to_owned()))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    #[default]
    Idle,
    Running,
    AwaitingApproval,
}

/// A session's metadata, as stored in `sessions/<id>/session.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    pub title: String,
    /// The workspace: every path the tools touch is confined to it.
    pub cwd: String,
    pub profile: String,
    pub mode: Mode,
    pub status: SessionStatus,
    /// RFC 3339 timestamps.
    pub created: String,
    pub updated: String,
    /// Number of prompts accepted so far (prompt N is turn N).
    #[serde(default)]
    pub turns: u32,
    /// Sequence number of the newest journalled event.
    #[serde(default)]
    pub last_seq: u64,
    /// Set when the session could not be loaded: why, which file, and what to do. Such a
    /// session is listed so that it is not lost from sight, but cannot be used until fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
    /// Set while the session's goal loop runs: its state and which cycle it is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<GoalProgress>,
}

/// Where a running goal loop is, as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalProgress {
    pub state: GoalState,
    pub cycle: u32,
    pub cap: u32,
}

/// The goal loop's state (SPEC §5), machine-readable everywhere: `goal/status`, the
/// `goal_loop_stopped` event, `session/list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GoalState {
    /// No loop has run, or the last one left no state.
    #[default]
    Idle,
    /// A cycle runs or is about to.
    Running,
    /// A cycle waits for an approval from a client (code mode).
    AwaitingApproval,
    /// Every box is checked and every verified box passed its check.
    Complete,
    /// The loop ran its cap of cycles with goals still open.
    Capped,
    /// The token, cost or wall-clock budget is used up.
    BudgetExhausted,
    /// Three cycles in a row checked no box and changed no file.
    Stalled,
    /// The storm-breaker stopped the loop: the same call failed the same way again and again.
    Storm,
    /// The user stopped the loop.
    Stopped,
    /// A turn failed (the provider or the daemon); the summary says why.
    Failed,
}

impl GoalState {
    pub const ALL: [GoalState; 10] = [
        GoalState::Idle,
        GoalState::Running,
        GoalState::AwaitingApproval,
        GoalState::Complete,
        GoalState::Capped,
        GoalState::BudgetExhausted,
        GoalState::Stalled,
        GoalState::Storm,
        GoalState::Stopped,
        GoalState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GoalState::Idle => "idle",
            GoalState::Running => "running",
            GoalState::AwaitingApproval => "awaiting_approval",
            GoalState::Complete => "complete",
            GoalState::Capped => "capped",
            GoalState::BudgetExhausted => "budget_exhausted",
            GoalState::Stalled => "stalled",
            GoalState::Storm => "storm",
            GoalState::Stopped => "stopped",
            GoalState::Failed => "failed",
        }
    }

    /// True for the states a loop ends in.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            GoalState::Idle | GoalState::Running | GoalState::AwaitingApproval
        )
    }
}

impl fmt::Display for GoalState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionParams {
    /// Workspace directory; must exist. Clients send their own working directory.
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRef {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendParams {
    pub session_id: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    /// The prompt's number in the session; its turn events carry the same number.
    pub turn: u32,
    /// True when another turn was running and this prompt waits behind it.
    pub queued: bool,
}

/// The params of a method that takes none: `{}`, or no `params` at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NoParams {}

/// `daemon/shutdown`: the daemon drains its turns and exits after answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShutdownResult {
    pub stopping: bool,
}

/// `session/delete`: the session and its files are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteResult {
    pub deleted: bool,
}

/// `session/compact`: the summary runs after any queued turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    pub queued: bool,
}

/// The answer of a method whose only outcome is that it was done (`approval/respond`,
/// `config/setKey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Acknowledged {
    pub ok: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    /// False when no turn was running.
    pub cancelled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode: Mode,
}

/// Switches the provider profile the session's next requests use.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetProfileParams {
    pub session_id: String,
    pub profile: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeParams {
    pub session_id: String,
    /// Replay every journalled event with a larger `seq` before streaming live ones.
    /// `0` replays the whole journal; absent means live events only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    Approve,
    /// Run this call and, for the rest of the session, every later call of the same tool, or
    /// only those matching the answer's `pattern`.
    Always,
    /// Do not run it; the model is told, with the reason if one is given.
    Deny,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRespondParams {
    pub session_id: String,
    pub request_id: String,
    pub decision: ApprovalDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Only with `always`: allow later calls only when what they act on matches this glob (the
    /// command of `bash`, the `path` of a file tool), as `cargo test *`; the request's
    /// `suggestedPattern` is a good default. Absent: every later call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    pub version: String,
    pub pid: u32,
    pub home: String,
    pub socket: String,
    pub started: String,
    pub uptime_ms: u64,
    pub sessions: usize,
    pub running_turns: usize,
    /// Why the last edit of config.json was rejected; the previous configuration stays in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
    /// The MCP servers of config.json's `mcp_servers` and their state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServerStatus>,
}

/// One MCP server of config.json's `mcp_servers` (SPEC §7.4), as the daemon last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub name: String,
    /// `stdio` (a command the daemon starts) or `http` (a streamable-HTTP URL).
    pub transport: String,
    /// `not_started` (no session has needed it yet), `starting`, `running`, `exited` or `failed`.
    pub state: String,
    /// How many tools it offers new sessions.
    pub tools: usize,
    /// Why it failed or exited, or what of it is left out; what to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Stores an API key for a profile in config.json (mode 0600). The key is never sent back.
#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetKeyParams {
    pub profile: String,
    pub key: String,
}

impl fmt::Debug for SetKeyParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetKeyParams")
            .field("profile", &self.profile)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// A provider profile as the API shows it: never the key, only whether one is available.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileInfo {
    pub name: String,
    pub base_url: String,
    pub model: String,
    pub has_key: bool,
    pub is_default: bool,
    pub context_window: Option<u64>,
    /// Per 1M tokens; `None` until the user sets `pricing` on the profile.
    pub prices: Option<PriceTable>,
    /// The environment variable the daemon reads the key from (its name, never the key), when
    /// config.json holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
}

impl ProfileInfo {
    /// The variable that holds this profile's key in `env` (a client's environment) while the
    /// daemon has no key for it: a daemon started before the key was set.
    pub fn key_only_in<'a>(&'a self, env: &dyn Fn(&str) -> Option<String>) -> Option<&'a str> {
        let variable = self.key_env.as_deref()?;
        (!self.has_key && env(variable).is_some_and(|key| !key.trim().is_empty()))
            .then_some(variable)
    }

    /// What to tell the user when [`ProfileInfo::key_only_in`] found the key only on their side.
    pub fn key_only_in_client_advice(&self, variable: &str) -> String {
        format!(
            "profile `{}` has no key in the running daemon, but your environment has {variable}: \
             the daemon started without it. Run `cwcode-cli daemon stop` and try again (the next \
             command starts the daemon with your environment), or store the key with \
             `cwcode-cli config set-key {}`",
            self.name, self.name
        )
    }
}

/// Token usage of one model call, or summed over a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
    }
}

/// A tool call the model asked for. `arguments` is the JSON text exactly as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Byte-level facts about one request, for the sticky-prefix check (SPEC §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestStats {
    /// Size of the request body.
    pub request_bytes: u64,
    /// Length of the byte prefix this body shares with the session's previous request body.
    pub shared_prefix_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One entry of the session's todo list, as the model keeps it with `todo_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
}

/// Prompt-cache figures of one turn (SPEC §6).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCache {
    pub turn: u32,
    /// Model requests made during the turn.
    pub requests: u32,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// cached / prompt tokens of this turn; 0 when nothing was sent.
    pub hit_ratio: f64,
    /// Body size of the turn's last request.
    pub last_request_bytes: u64,
    /// How much of the last request's body equals the request before it, byte for byte.
    pub last_shared_prefix_bytes: u64,
    /// Requests whose provider reported no usage: their tokens are not in the figures above,
    /// which are then not the whole turn ("not reported", never a plain 0).
    #[serde(default)]
    pub unreported_requests: u32,
    /// cwcode's own estimate of the unreported requests' tokens, from the bytes it sent and
    /// received: an estimate, not the provider's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated: Option<Usage>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheReport {
    pub session_id: String,
    pub turns: Vec<TurnCache>,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// Cumulative cached / prompt tokens over the session.
    pub hit_ratio: f64,
    /// The session's first request body: system prompt plus tool definitions plus the prompt.
    pub first_request_bytes: u64,
    /// Requests over the session whose provider reported no usage (see [`TurnCache`]).
    #[serde(default)]
    pub unreported_requests: u32,
    /// cwcode's own estimate of those requests' tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated: Option<Usage>,
}

/// Prices per million tokens, in the currency the profile's table uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriceTable {
    pub input_hit: f64,
    pub input_miss: f64,
    pub output: f64,
    /// The profile's `pricing.currency`, e.g. "USD" (the default) or "CNY".
    #[serde(default = "default_currency")]
    pub currency: String,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self {
            input_hit: 0.0,
            input_miss: 0.0,
            output: 0.0,
            currency: default_currency(),
        }
    }
}

/// What a price table without a currency is in.
pub fn default_currency() -> String {
    "USD".to_owned()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCost {
    pub turn: u32,
    pub input_hit: f64,
    pub input_miss: f64,
    pub output: f64,
    pub total: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostReport {
    pub session_id: String,
    pub profile: String,
    /// `None` when the profile has no price table: set `pricing` in config.json.
    pub prices: Option<PriceTable>,
    pub turns: Vec<TurnCost>,
    /// The provider-reported tokens priced; see `estimatedTotal` for the rest.
    pub total: f64,
    /// The currency of every figure here: the price table's (`USD` without one).
    #[serde(default = "default_currency")]
    pub currency: String,
    /// Requests whose provider reported no usage: not in `total`.
    #[serde(default)]
    pub unreported_requests: u32,
    /// cwcode's own estimate of what those requests cost, when there are prices: an estimate,
    /// not a bill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_total: Option<f64>,
}

/// One prompt's checkpoint: what `/rewind` without a number lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    pub turn: u32,
    pub prompt: String,
    pub time: String,
    /// Workspace-relative paths the prompt changed, through tools or the shell.
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindParams {
    pub session_id: String,
    /// Restore every file to its state before this prompt, and the history with it.
    pub turn: u32,
}

/// What a rewind (or the undo of one) did. `prompt` is prompt N's text, for the input field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindResult {
    pub turn: u32,
    pub prompt: String,
    pub restored: Vec<String>,
    pub removed: Vec<String>,
    /// `path: reason` for each path that could not be put back; the others were.
    pub failed: Vec<String>,
}

/// What `cwcode-cli doctor` checks: the daemon's files, its configuration and its sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub version: String,
    pub home: String,
    pub socket: String,
    /// Permission bits, expected 0o700 and 0o600.
    pub home_mode: u32,
    pub socket_mode: u32,
    pub config_error: Option<String>,
    /// The profile new sessions get; `None` when there is none, and then
    /// `default_profile_problem` says what to set up.
    pub default_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile_problem: Option<String>,
    pub profiles: Vec<ProfileInfo>,
    /// What the sandbox can enforce on this machine (Landlock ABI, namespaces, process groups, …).
    pub sandbox: SandboxReport,
    /// Sessions that could not be loaded, or were loaded only after leaving something out.
    #[serde(default)]
    pub session_problems: Vec<SessionProblem>,
    /// Set when `config.json` holds an API key and users other than its owner can read it:
    /// what is wrong and the command that fixes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_key_exposed: Option<String>,
    /// The latest hook runs that failed, timed out or were dropped (config.json's `hooks`),
    /// newest last, each saying which hook and why.
    #[serde(default)]
    pub hook_failures: Vec<String>,
    /// The MCP servers of config.json's `mcp_servers`: each one's state, and for one that failed
    /// or died, why.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerStatus>,
}

/// What the sandbox can enforce on this machine, as the daemon probed it (SPEC §7.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    /// `linux`, `macos`, …
    pub os: String,
    /// Whether Landlock confines the writes of the commands tools run.
    pub landlock: LandlockSupport,
    /// macOS: commands run under `sandbox-exec` with the same write confinement.
    pub sandbox_exec: bool,
    /// Every command leads its own process group, killed whole on timeout, cancel or session end.
    pub process_groups: bool,
    /// Whether commands run in their own mount and pid namespaces, in which the daemon's home is
    /// hidden and everything a command starts dies with it.
    pub namespaces: NamespaceSupport,
    /// Commands get an allow-listed environment (never the daemon's socket, home or keys).
    pub environment_allow_list: bool,
    /// The daemon adopts what escapes a command's process group, so that it stays a descendant
    /// (refused as an API client) and is reaped.
    pub subreaper: bool,
    /// Connections from the daemon's own descendants (tool commands) are refused.
    pub descendants_refused: bool,
    /// Where a confined command may write besides its workspace and the config's extra roots.
    pub always_writable: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "status",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum NamespaceSupport {
    /// bubblewrap at `program` wraps every command; the home is hidden from it.
    Bubblewrap { program: String },
    /// Commands share the daemon's view: they can read its home (Landlock confines writes only).
    Unavailable { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "status",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum LandlockSupport {
    /// Every restriction cwcode asks for is enforced; `abi` is the kernel's Landlock ABI.
    Enforced { abi: u32 },
    /// Some are: the kernel's Landlock predates part of them (truncation is controlled from
    /// ABI 3, renames across directories from ABI 2).
    Partial { abi: u32 },
    /// Commands can write wherever the daemon's user can.
    Unsupported { reason: String },
}

/// A session `doctor` reports: damaged (listed, but unusable until fixed) or repaired on load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionProblem {
    pub session_id: String,
    /// The session's directory.
    pub path: String,
    /// What is wrong and what to do about it.
    pub problem: String,
    /// True when the session works despite it (something was left out or rebuilt).
    pub loaded: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalAddParams {
    pub session_id: String,
    pub text: String,
}

/// Starts the goal loop: consecutive turns until every goal is checked or a limit is hit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalStartParams {
    pub session_id: String,
    /// Most consecutive cycles (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
    /// Stop once the loop's turns used this many prompt plus completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Stop once the loop cost this much, priced with the profile's table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_budget: Option<f64>,
    /// Stop once the loop has run this many hours of wall-clock time (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours_budget: Option<f64>,
    /// Run without the default budgets of config.json's `goal` section (budgets given here
    /// are refused with it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_budget: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalItem {
    pub text: String,
    pub done: bool,
    /// The command of a `(verify: …)` goal: the box stays checked only if it succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalStatus {
    pub running: bool,
    pub cycle: u32,
    pub cap: u32,
    pub goals_file: String,
    pub goals: Vec<GoalItem>,
    pub done: usize,
    pub left: usize,
    pub tokens_used: u64,
    pub cost_used: f64,
    pub token_budget: Option<u64>,
    pub cost_budget: Option<f64>,
    /// Where the loop is; `summary` says the same in words.
    #[serde(default)]
    pub state: GoalState,
    /// Tokens left of the token budget; `None` without one.
    #[serde(default)]
    pub tokens_left: Option<u64>,
    /// Cost left of the cost budget; `None` without one.
    #[serde(default)]
    pub cost_left: Option<f64>,
    /// The currency of `costUsed`, `costBudget` and `costLeft`: the profile's price table's.
    #[serde(default = "default_currency")]
    pub currency: String,
    /// The wall-clock budget in hours; `None` without one.
    #[serde(default)]
    pub hours_budget: Option<f64>,
    /// Wall-clock seconds since the loop started (to its end, once it ended).
    #[serde(default)]
    pub seconds_used: u64,
    /// Wall-clock seconds left of the budget; `None` without one.
    #[serde(default)]
    pub seconds_left: Option<u64>,
    /// Why the last loop ended, in words; `None` while it runs or before it ever ran.
    pub stop_reason: Option<String>,
    /// The plain-language account of the loop.
    pub summary: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_only_the_client_has_is_named_with_both_fixes() {
        let profile = ProfileInfo {
            name: "deepseek-v4-pro".to_owned(),
            base_url: String::new(),
            model: String::new(),
            has_key: false,
            is_default: true,
            context_window: None,
            prices: None,
            key_env: Some("DEEPSEEK_API_KEY".to_owned()),
        };
        let client_env = |name: &str| (name == "DEEPSEEK_API_KEY").then(|| "sk-x".to_owned());
        let variable = profile.key_only_in(&client_env);
        assert_eq!(variable, Some("DEEPSEEK_API_KEY"));
        let advice = profile.key_only_in_client_advice("DEEPSEEK_API_KEY");
        assert!(advice.contains("cwcode-cli daemon stop"), "{advice}");
        assert!(
            advice.contains("cwcode-cli config set-key deepseek-v4-pro"),
            "{advice}"
        );
        assert!(!advice.contains("sk-x"));
        assert_eq!(profile.key_only_in(&|_| None), None, "unset on both sides");
        let keyed = ProfileInfo {
            has_key: true,
            ..profile
        };
        assert_eq!(keyed.key_only_in(&client_env), None, "the daemon has it");
    }
}
