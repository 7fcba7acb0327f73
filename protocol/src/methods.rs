//! JSON-RPC method names (SPEC §4). They follow `resource/verb`.

pub const DAEMON_INFO: &str = "daemon/info";
pub const DAEMON_SHUTDOWN: &str = "daemon/shutdown";
pub const DAEMON_DOCTOR: &str = "daemon/doctor";
pub const SESSION_CREATE: &str = "session/create";
pub const SESSION_LIST: &str = "session/list";
pub const SESSION_GET: &str = "session/get";
pub const SESSION_DELETE: &str = "session/delete";
pub const SESSION_SEND: &str = "session/send";
pub const SESSION_CANCEL: &str = "session/cancel";
pub const SESSION_SET_MODE: &str = "session/setMode";
pub const SESSION_SET_PROFILE: &str = "session/setProfile";
pub const SESSION_CACHE: &str = "session/cache";
pub const SESSION_CHECKPOINTS: &str = "session/checkpoints";
pub const SESSION_REWIND: &str = "session/rewind";
pub const SESSION_UNDO_REWIND: &str = "session/undoRewind";
pub const SESSION_COMPACT: &str = "session/compact";
pub const SESSION_COST: &str = "session/cost";
pub const SESSION_SUBSCRIBE: &str = "session/subscribe";
/// Notification method name carried by every event of a `session/subscribe` subscription.
pub const SESSION_EVENT: &str = "session/event";
pub const SESSION_UNSUBSCRIBE: &str = "session/unsubscribe";
pub const APPROVAL_RESPOND: &str = "approval/respond";
pub const GOAL_ADD: &str = "goal/add";
pub const GOAL_START: &str = "goal/start";
pub const GOAL_STOP: &str = "goal/stop";
pub const GOAL_STATUS: &str = "goal/status";
pub const PROFILE_LIST: &str = "profile/list";
pub const CONFIG_SET_KEY: &str = "config/setKey";

/// The plain-HTTP health route, answered with the result of `daemon/info`.
pub const HEALTH_PATH: &str = "/health";
