//! cwcoded: the daemon that owns cwcode's sessions, agent loop, provider connections, tools and
//! sandbox, and serves them as JSON-RPC on a Unix socket.
//!
//! Data flows one way: server → session → agent → provider/tools → journal → event bus → clients;
//! no module imports one above it (`tests/module_graph.rs`, and ARCHITECTURE.md).

pub mod agent;
pub mod goals;
pub mod hooks;
pub mod journal;
pub mod mcp;
pub mod memory;
pub mod provider;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod store;
pub mod tools;
pub mod util;

/// `PROPTEST_CASES` when set (CI bounds the time with it), else `default`.
#[cfg(test)]
pub(crate) fn proptest_config(default: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default);
    proptest::test_runner::Config::with_cases(cases)
}
