//! The API table (SPEC §4): every JSON-RPC method defined once, with its name, its params type
//! and its result type. Names follow `resource/verb`.
//!
//! Everything else is derived from the table below:
//! - the daemon serves each method through one generic helper that parses `M::Params` and
//!   whose handler must answer `M::Result` (`daemon/src/server/rpc.rs`), and a daemon test
//!   checks that it registers exactly [`NAMES`];
//! - the client calls any method as [`Client::call::<M>`](crate::Client::call), typed by it;
//! - the JSON Schema ([`crate::schema::api_schema`]) walks the table with [`visit`], and a test
//!   checks that it lists exactly [`NAMES`].
//!
//! A method's type is named after its wire name (`session/setMode` is [`SessionSetMode`]); where
//! that is also the name of its result type, the table spells the result `crate::types::…`.
//!
//! To add a method:
//! 1. add one line to the `api_table!` invocation below: the method's type, a constant for its
//!    name, the wire name, the params type and the result type (both in [`crate::types`]);
//! 2. serve it in the daemon's `rpc::module` with `api.serve(methods::NewOne, handler)`;
//! 3. regenerate `api.schema.json` with `CWCODE_WRITE_SCHEMA=1 cargo test -p cwcode-protocol
//!    schema`.
//!
//! Clients can call it at once with `client.call::<methods::NewOne>(&params)`; add a named
//! convenience method on [`crate::Client`] only if frontends call it often. The tests fail until
//! the daemon serves the new method and the checked-in schema lists it.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::event::{Event, EventPage, EventsParams};
use crate::memory::*;
use crate::types::*;

/// One JSON-RPC request/response method.
pub trait Method {
    /// The wire name, `resource/verb`.
    const NAME: &'static str;
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static;
    type Result: Serialize + DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static;
}

/// A subscription method: its params open a stream of `Item` notifications.
pub trait Subscription {
    const NAME: &'static str;
    /// The notification method name every item carries.
    const NOTIFICATION: &'static str;
    const UNSUBSCRIBE: &'static str;
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static;
    type Item: Serialize + DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static;
}

/// Something that looks at every method of the table, each with its own types.
pub trait Visitor {
    fn method<M: Method>(&mut self);
    fn subscription<S: Subscription>(&mut self);
}

macro_rules! api_table {
    (
        methods {
            $( $(#[$doc:meta])* $method:ident, $constant:ident = $name:literal: $params:ty => $result:ty; )*
        }
        subscriptions {
            $( $(#[$sub_doc:meta])* $subscription:ident, $sub_constant:ident = $sub_name:literal: $sub_params:ty => $item:ty,
               notification $notification:ident = $notification_name:literal,
               unsubscribe $unsubscribe:ident = $unsubscribe_name:literal; )*
        }
    ) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $method;

            impl Method for $method {
                const NAME: &'static str = $name;
                type Params = $params;
                type Result = $result;
            }

            pub const $constant: &str = $name;
        )*
        $(
            $(#[$sub_doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $subscription;

            impl Subscription for $subscription {
                const NAME: &'static str = $sub_name;
                const NOTIFICATION: &'static str = $notification_name;
                const UNSUBSCRIBE: &'static str = $unsubscribe_name;
                type Params = $sub_params;
                type Item = $item;
            }

            pub const $sub_constant: &str = $sub_name;
            pub const $notification: &str = $notification_name;
            pub const $unsubscribe: &str = $unsubscribe_name;
        )*

        /// Every name a client may call: the methods, the subscriptions and their unsubscribe
        /// methods (notification names are sent by the daemon, never called).
        pub const NAMES: &[&str] = &[$($name,)* $($sub_name, $unsubscribe_name,)*];

        /// Calls `visitor` once per method and once per subscription, in table order.
        pub fn visit(visitor: &mut impl Visitor) {
            $( visitor.method::<$method>(); )*
            $( visitor.subscription::<$subscription>(); )*
        }
    };
}

api_table! {
    methods {
        DaemonInfo, DAEMON_INFO = "daemon/info": NoParams => crate::types::DaemonInfo;
        DaemonShutdown, DAEMON_SHUTDOWN = "daemon/shutdown": NoParams => ShutdownResult;
        DaemonDoctor, DAEMON_DOCTOR = "daemon/doctor": NoParams => DoctorReport;
        SessionCreate, SESSION_CREATE = "session/create": CreateSessionParams => SessionInfo;
        SessionList, SESSION_LIST = "session/list": NoParams => Vec<SessionInfo>;
        SessionGet, SESSION_GET = "session/get": SessionRef => SessionInfo;
        SessionDelete, SESSION_DELETE = "session/delete": SessionRef => DeleteResult;
        SessionSend, SESSION_SEND = "session/send": SendParams => SendResult;
        SessionCancel, SESSION_CANCEL = "session/cancel": SessionRef => CancelResult;
        SessionSetMode, SESSION_SET_MODE = "session/setMode": SetModeParams => SessionInfo;
        SessionSetProfile, SESSION_SET_PROFILE = "session/setProfile": SetProfileParams => SessionInfo;
        SessionCache, SESSION_CACHE = "session/cache": SessionRef => CacheReport;
        SessionCheckpoints, SESSION_CHECKPOINTS = "session/checkpoints": SessionRef => Vec<CheckpointInfo>;
        SessionRewind, SESSION_REWIND = "session/rewind": RewindParams => RewindResult;
        SessionUndoRewind, SESSION_UNDO_REWIND = "session/undoRewind": SessionRef => RewindResult;
        SessionCompact, SESSION_COMPACT = "session/compact": SessionRef => CompactResult;
        SessionCost, SESSION_COST = "session/cost": SessionRef => CostReport;
        /// The journal from a `seq`, a page at a time: what a script reads over plain HTTP.
        SessionEvents, SESSION_EVENTS = "session/events": EventsParams => EventPage;
        ApprovalRespond, APPROVAL_RESPOND = "approval/respond": ApprovalRespondParams => Acknowledged;
        GoalAdd, GOAL_ADD = "goal/add": GoalAddParams => crate::types::GoalStatus;
        GoalStart, GOAL_START = "goal/start": GoalStartParams => crate::types::GoalStatus;
        GoalStop, GOAL_STOP = "goal/stop": SessionRef => crate::types::GoalStatus;
        GoalStatus, GOAL_STATUS = "goal/status": SessionRef => crate::types::GoalStatus;
        ProfileList, PROFILE_LIST = "profile/list": NoParams => Vec<ProfileInfo>;
        ConfigSetKey, CONFIG_SET_KEY = "config/setKey": SetKeyParams => Acknowledged;
        MemoryRemember, MEMORY_REMEMBER = "memory/remember": MemoryRememberParams => MemoryNote;
        MemoryRecall, MEMORY_RECALL = "memory/recall": MemoryRecallParams => MemoryRecallResult;
        MemoryList, MEMORY_LIST = "memory/list": MemoryListParams => MemoryListResult;
        MemoryDelete, MEMORY_DELETE = "memory/delete": MemoryDeleteParams => DeleteResult;
    }
    subscriptions {
        /// A session's events from a `seq`: the journal replayed, then live ones.
        SessionSubscribe, SESSION_SUBSCRIBE = "session/subscribe": SubscribeParams => Event,
            notification SESSION_EVENT = "session/event",
            unsubscribe SESSION_UNSUBSCRIBE = "session/unsubscribe";
    }
}

/// The plain-HTTP health route, answered with the result of `daemon/info`.
pub const HEALTH_PATH: &str = "/health";
