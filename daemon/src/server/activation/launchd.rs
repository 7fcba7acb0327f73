//! launchd socket activation (launch(3)): under `launchd/dev.cwcode.cwcoded.plist`, whose
//! `Sockets` entry is named `cwcoded`, launchd creates `~/.cwcode/cwcoded.sock`, listens on it
//! before cwcoded runs, starts cwcoded at the first connection, and hands the listening socket
//! over through `launch_activate_socket("cwcoded")` (via the `raunch` crate).

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;

use super::{ActivationError, ensure_listening};

/// The key of the plist's `Sockets` dictionary.
const SOCKET_NAME: &str = "cwcoded";

/// The listening socket launchd passed us, non-blocking and close-on-exec, or `None` when
/// launchd did not start us (or started us from a plist without the `cwcoded` socket).
pub(super) fn listener() -> Result<Option<UnixListener>, ActivationError> {
    let fds = match raunch::activate_socket(SOCKET_NAME) {
        Ok(fds) => fds,
        Err(raunch::Error::NotManaged | raunch::Error::NotInPlist) => return Ok(None),
        Err(other) => return Err(ActivationError::Launchd(other.to_string())),
    };
    let owned: Vec<OwnedFd> = fds.into_iter().map(adopt).collect();
    let [socket] =
        <[OwnedFd; 1]>::try_from(owned).map_err(|all| ActivationError::LaunchdNotOne(all.len()))?;
    // No tool's child process may inherit the API socket.
    rustix::io::fcntl_setfd(socket.as_fd(), rustix::io::FdFlags::CLOEXEC)
        .map_err(|errno| ActivationError::LaunchdUnusable(errno.into()))?;
    ensure_listening(&socket).map_err(|error| match error {
        ActivationError::Unusable(error) => ActivationError::LaunchdUnusable(error),
        other => other,
    })?;
    let listener = UnixListener::from(socket);
    listener
        .set_nonblocking(true)
        .map_err(ActivationError::LaunchdUnusable)?;
    Ok(Some(listener))
}

/// Takes ownership of a descriptor launchd handed over.
#[expect(
    unsafe_code,
    reason = "launch_activate_socket(3) returns fresh descriptors that belong to the caller \
              alone: nothing else in the process holds or closes them, so owning each one once \
              is sound"
)]
fn adopt(fd: RawFd) -> OwnedFd {
    // SAFETY: see the reason above; each fd of the returned array is adopted exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
