//! The goal loop's pure parts (SPEC §1, §5): the user's `goals.md`, and the loop's durable state
//! and decisions. The agent drives them; nothing here runs a turn or watches a file.
//!
//! `file` reads and edits goals.md; `state` is the loop's state machine and its file; `budget`,
//! `checks` (verified goals), `stall` (stall and storm detection) and `summary` (the loop in
//! plain words) are the parts of `LoopState` it decides with.

mod budget;
mod checks;
pub mod file;
mod stall;
pub mod state;
mod summary;

pub use checks::CheckFailure;
pub use file::{Goal, GoalList, GoalsError, append, continuation_message, uncheck, verify_command};
pub use state::{CallRecord, Decision, LoopState, StateError, StopReason, TurnSummary};
