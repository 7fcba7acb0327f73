//! The goal loop's pure parts (SPEC §1, §5): the user's `goals.md`, and the loop's durable state
//! and decisions. The agent drives them; nothing here runs a turn or watches a file.

pub mod file;
pub mod state;
#[cfg(test)]
mod state_tests;

pub use file::{Goal, GoalList, GoalsError, append, continuation_message, uncheck, verify_command};
pub use state::{
    CallRecord, CheckFailure, Decision, LoopState, StateError, StopReason, TurnSummary,
};
