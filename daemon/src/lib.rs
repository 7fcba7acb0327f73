//! cwcoded: the daemon that owns cwcode's sessions, agent loop, provider connections, tools and
//! sandbox, and serves them as JSON-RPC on a Unix socket.
//!
//! Data flows one way: server → session → agent → provider/tools → journal → event bus → clients.

pub mod agent;
pub mod goals;
pub mod provider;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod store;
pub mod tools;
