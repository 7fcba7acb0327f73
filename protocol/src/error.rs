//! Application error codes, in the JSON-RPC server-error range. Standard JSON-RPC codes
//! (-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params)
//! are produced by the transport itself.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(i32)]
pub enum ErrorCode {
    SessionNotFound = -32001,
    SessionBusy = -32002,
    // -32003 and -32004 (invalid mode, stale hashes) are retired, not reused: an unknown mode is
    // an invalid-params error naming the modes, and stale hashes are a tool result the model
    // acts on, never an API error.
    ApprovalNotFound = -32005,
    ProfileNotFound = -32006,
    InvalidWorkspace = -32007,
    Checkpoint = -32008,
    Goals = -32009,
    Storage = -32010,
    ShuttingDown = -32011,
    Internal = -32099,
}

impl ErrorCode {
    pub const fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        [
            Self::SessionNotFound,
            Self::SessionBusy,
            Self::ApprovalNotFound,
            Self::ProfileNotFound,
            Self::InvalidWorkspace,
            Self::Checkpoint,
            Self::Goals,
            Self::Storage,
            Self::ShuttingDown,
            Self::Internal,
        ]
        .into_iter()
        .find(|candidate| candidate.code() == code)
    }
}
