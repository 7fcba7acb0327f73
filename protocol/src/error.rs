//! Application error codes, -33001 to -33099: outside the range JSON-RPC reserves (-32768 to
//! -32000), where jsonrpsee puts codes of its own (-32005 to -32011: batches, subscriptions,
//! sizes), so a client never mistakes one for the other. Standard JSON-RPC codes
//! (-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params)
//! are produced by the transport itself. Each code is defined once below, with what it means;
//! the API schema lists them from here.

use serde::{Deserialize, Serialize};

macro_rules! error_codes {
    ($($name:ident = $code:literal => $meaning:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[repr(i32)]
        pub enum ErrorCode {
            $(#[doc = $meaning] $name = $code,)*
        }

        impl ErrorCode {
            /// Every code, in the order defined.
            pub const ALL: &[ErrorCode] = &[$(Self::$name),*];

            /// The code's name, as the schema lists it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$name => stringify!($name),)*
                }
            }

            /// What an error with this code means, for the schema and a client's docs.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(Self::$name => $meaning,)*
                }
            }
        }
    };
}

// -33003 and -33004 (invalid mode, stale hashes) are retired, not reused: an unknown mode is an
// invalid-params error naming the modes, and stale hashes are a tool result the model acts on,
// never an API error.
error_codes! {
    SessionNotFound = -33001 => "No session has this id, or a prefix matches several.",
    SessionBusy = -33002 => "A turn is running or queued: cancel it or wait, then retry.",
    ApprovalNotFound = -33005 => "No approval request with this id waits: it was answered, or its turn ended.",
    ProfileNotFound = -33006 => "No provider profile has this name; the message lists the known ones.",
    InvalidWorkspace = -33007 => "The workspace directory does not exist or cannot be used.",
    Checkpoint = -33008 => "The checkpoint store cannot save or restore (a rewind, its undo, a checkpoint).",
    Goals = -33009 => "goals.md or the goal loop's state cannot be read, written or used as asked.",
    Storage = -33010 => "The daemon cannot read or write its own files (a full disk, permissions, a damaged session).",
    ShuttingDown = -33011 => "The daemon is shutting down: retry once it has restarted.",
    ConfigInvalid = -33012 => "config.json cannot be used as written: the message names the line or the field.",
    InvalidKey = -33013 => "An API key that could never be sent (empty, or holding a line break or a control character).",
    NoDefaultProfile = -33014 => "No profile was named and none is the default: the message says how to choose one.",
    Internal = -33099 => "A failure of the daemon itself; the daemon log has the details.",
}

impl ErrorCode {
    pub const fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|candidate| candidate.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_its_own_and_reads_back() {
        let mut codes: Vec<i32> = ErrorCode::ALL.iter().map(|code| code.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code.code()), Some(*code));
            assert!(!code.meaning().is_empty(), "{}", code.name());
        }
        assert_eq!(ErrorCode::from_code(-33003), None);
    }
}
