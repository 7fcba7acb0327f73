//! The cwcode wire protocol: JSON-RPC method names, request and event types, error codes, the
//! on-disk locations every process agrees on, and the typed async client that frontends use.
//!
//! Frontends depend on this crate only; they never link the daemon.

pub mod allow;
pub mod client;
pub mod error;
pub mod event;
pub mod memory;
pub mod methods;
pub mod paths;
pub mod schema;
pub mod types;

pub use allow::AllowRule;
pub use client::{Client, ClientError, ConnectOptions};
pub use error::ErrorCode;
pub use event::{Event, EventKind, EventPage, EventsParams, TurnOutcome};
pub use memory::*;
pub use methods::Method;
pub use types::*;
