//! Socket activation. Under systemd (sd_listen_fds(3)) `cwcoded.socket` owns the API socket and
//! hands it to us as fd 3, with `LISTEN_PID` (our pid) and `LISTEN_FDS` (how many) in the
//! environment. Under launchd (macOS, see [`launchd`]) the LaunchAgent's `Sockets` entry owns it
//! and `launch_activate_socket(3)` hands it over.
//!
//! Turning fd 3 into a listener needs `unsafe` (`FromRawFd`), which this workspace denies; the
//! `listenfd` crate does it, checking first that the fd is a Unix stream socket and marking it
//! close-on-exec so no tool's child process inherits the listener. It also unsets `LISTEN_PID`
//! and `LISTEN_FDS`, so children never believe they were activated (`LISTEN_FDNAMES` stays: it
//! means nothing without them, and unsetting it ourselves would need `unsafe` in edition 2024).

use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;

#[cfg(target_os = "macos")]
mod launchd;

#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error("{name}={value:?} is not a number; systemd's socket activation sets it to one")]
    Malformed { name: &'static str, value: String },
    #[error(
        "systemd passed {0} sockets, but cwcoded listens on exactly one: give cwcoded.socket a \
         single ListenStream= line"
    )]
    NotOne(u32),
    #[error(
        "the socket systemd passed as fd 3 cannot serve the API ({0}): cwcoded.socket needs \
         ListenStream=/path/to/cwcoded.sock and no Accept=yes"
    )]
    Unusable(#[source] std::io::Error),
    #[cfg(target_os = "macos")]
    #[error(
        "launchd passed {0} sockets for `cwcoded`, but cwcoded listens on exactly one: give the \
         plist's Sockets entry one SockPathName"
    )]
    LaunchdNotOne(usize),
    #[cfg(target_os = "macos")]
    #[error(
        "launchd's socket cannot serve the API ({0}): the plist's Sockets entry `cwcoded` needs \
         SockPathName=~/.cwcode/cwcoded.sock (a stream socket, the default SockType)"
    )]
    LaunchdUnusable(#[source] std::io::Error),
    #[cfg(target_os = "macos")]
    #[error(
        "launchd refused the socket `cwcoded`: {0}; see `launchctl print gui/$(id -u)/dev.cwcode.cwcoded`"
    )]
    Launchd(String),
}

/// The listening socket systemd passed us, ready for `tokio::net::UnixListener::from_std`
/// (non-blocking), or `None` when we were not socket-activated.
///
/// Call it before the async runtime or any other thread starts: it changes the environment,
/// which is only sound while no other thread may read it.
pub fn inherited_listener() -> Result<Option<UnixListener>, ActivationError> {
    #[cfg(target_os = "macos")]
    if let Some(listener) = launchd::listener()? {
        return Ok(Some(listener));
    }
    let listen_pid = std::env::var("LISTEN_PID").ok();
    let listen_fds = std::env::var("LISTEN_FDS").ok();
    // Reading the environment through listenfd also unsets the two variables, whether or not
    // they were meant for us.
    let mut passed = listenfd::ListenFd::from_env();
    if !activated(
        listen_pid.as_deref(),
        listen_fds.as_deref(),
        std::process::id(),
    )? {
        return Ok(None);
    }
    let Some(listener) = passed
        .take_unix_listener(0)
        .map_err(ActivationError::Unusable)?
    else {
        return Ok(None);
    };
    ensure_listening(&listener)?;
    listener
        .set_nonblocking(true)
        .map_err(ActivationError::Unusable)?;
    Ok(Some(listener))
}

/// Whether the variables pass a socket to this process, as sd_listen_fds(3) decides: only when
/// `LISTEN_PID` is our pid (variables inherited from an activated parent are not for us), and
/// then exactly one socket.
fn activated(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    own_pid: u32,
) -> Result<bool, ActivationError> {
    let Some(listen_pid) = listen_pid else {
        return Ok(false);
    };
    let pid: u32 = listen_pid
        .trim()
        .parse()
        .map_err(|_| ActivationError::Malformed {
            name: "LISTEN_PID",
            value: listen_pid.to_owned(),
        })?;
    if pid != own_pid {
        return Ok(false);
    }
    let listen_fds = listen_fds.unwrap_or("0");
    let count: u32 = listen_fds
        .trim()
        .parse()
        .map_err(|_| ActivationError::Malformed {
            name: "LISTEN_FDS",
            value: listen_fds.to_owned(),
        })?;
    match count {
        0 => Ok(false),
        1 => Ok(true),
        more => Err(ActivationError::NotOne(more)),
    }
}

/// A connected socket (what `Accept=yes` passes) would make every accept fail at once, and the
/// accept loop would spin; refuse it at start instead. A listening socket has no peer.
fn ensure_listening(socket: impl AsFd) -> Result<(), ActivationError> {
    match rustix::net::getpeername(socket) {
        Err(rustix::io::Errno::NOTCONN) => Ok(()),
        Ok(_) => Err(ActivationError::Unusable(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a connected socket, not a listening one",
        ))),
        Err(errno) => Err(ActivationError::Unusable(errno.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_pid_with_one_socket_is_an_activation() {
        assert!(!activated(None, None, 42).unwrap());
        assert!(
            !activated(None, Some("1"), 42).unwrap(),
            "no LISTEN_PID, no activation"
        );
        assert!(
            !activated(Some("41"), Some("1"), 42).unwrap(),
            "meant for a parent"
        );
        assert!(activated(Some("42"), Some("1"), 42).unwrap());
        assert!(activated(Some(" 42\n"), Some("1 "), 42).unwrap());
        assert!(!activated(Some("42"), Some("0"), 42).unwrap());
        assert!(!activated(Some("42"), None, 42).unwrap());
    }

    #[test]
    fn malformed_or_surplus_variables_are_explained() {
        let error = activated(Some("me"), Some("1"), 42).unwrap_err();
        assert_eq!(
            error.to_string(),
            "LISTEN_PID=\"me\" is not a number; systemd's socket activation sets it to one"
        );
        let error = activated(Some("42"), Some("-1"), 42).unwrap_err();
        assert!(
            error.to_string().starts_with("LISTEN_FDS=\"-1\""),
            "{error}"
        );
        let error = activated(Some("42"), Some("2"), 42).unwrap_err();
        assert!(matches!(error, ActivationError::NotOne(2)));
        assert!(
            error.to_string().contains("single ListenStream="),
            "{error}"
        );
    }

    #[test]
    fn a_listening_socket_is_accepted_and_a_connected_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join("s.sock")).unwrap();
        ensure_listening(&listener).unwrap();
        let (connected, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        let error = ensure_listening(&connected).unwrap_err();
        assert!(error.to_string().contains("no Accept=yes"), "{error}");
    }
}
