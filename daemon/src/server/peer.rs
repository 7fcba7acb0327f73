//! Tool processes are not clients (SPEC §4): a connection whose peer process descends from the
//! daemon (a tool, a hook, an MCP server, also after `setsid` or a double fork, since the daemon
//! is their subreaper) is refused before a byte of it is read. The peer's pid comes from the
//! socket's credentials and its ancestry is walked through `/proc/<pid>/stat`.

use tokio::net::UnixStream;

/// More ancestors than any real process tree has; a chain this long is refused rather than
/// walked on, so a tool cannot hide behind a deep chain of forks.
const MAX_ANCESTRY_DEPTH: usize = 1024;

/// What the ancestry check decided about a connection's peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Not started by the daemon: may use the API.
    Client,
    /// Started by the daemon (directly or further down): refused.
    Descendant,
    /// Its ancestry could not be read (it exited, or the chain is too long): refused, since it
    /// cannot be shown not to be a descendant.
    Unknown(String),
}

/// Checks the peer of `stream` against the daemon whose pid is `daemon_pid`. The daemon's own
/// pid counts as a client: only processes it started are refused.
pub fn classify(stream: &UnixStream, daemon_pid: u32) -> Peer {
    let pid = match stream.peer_cred() {
        Ok(credentials) => credentials.pid(),
        Err(error) => return Peer::Unknown(format!("no peer credentials: {error}")),
    };
    let Some(pid) = pid
        .and_then(|pid| u32::try_from(pid).ok())
        .filter(|&pid| pid > 0)
    else {
        return Peer::Unknown("the peer credentials carry no pid".to_owned());
    };
    // Reading procfs never touches a disk: it is fast enough for the connection's own task.
    classify_pid(pid, daemon_pid, |pid| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
    })
}

/// Walks the parents of `pid` (read through `read_stat`, given a pid) up to the root and says
/// whether `daemon_pid` is among them.
fn classify_pid(
    pid: u32,
    daemon_pid: u32,
    read_stat: impl Fn(u32) -> std::io::Result<String>,
) -> Peer {
    if pid == daemon_pid {
        return Peer::Client;
    }
    let mut current = pid;
    for _ in 0..MAX_ANCESTRY_DEPTH {
        let stat = match read_stat(current) {
            Ok(stat) => stat,
            Err(error) => {
                return Peer::Unknown(format!("cannot read /proc/{current}/stat: {error}"));
            }
        };
        let Some(parent) = parent_pid(&stat) else {
            return Peer::Unknown(format!("cannot parse /proc/{current}/stat"));
        };
        if parent == daemon_pid {
            return Peer::Descendant;
        }
        // 0 is the parent of init, and of any process whose parent is outside our pid namespace.
        if parent == 0 {
            return Peer::Client;
        }
        current = parent;
    }
    Peer::Unknown(format!(
        "more than {MAX_ANCESTRY_DEPTH} ancestors to walk from pid {pid}"
    ))
}

/// The ppid field of a `/proc/<pid>/stat` line. The command name before it is in parentheses and
/// may itself hold spaces and parentheses, so the fields are read after the last `)`.
fn parent_pid(stat: &str) -> Option<u32> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::process::{Command, Stdio};

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        assert_eq!(
            parent_pid("42 (bash) S 7 42 42 0 -1 4194304 100 0"),
            Some(7)
        );
        assert_eq!(
            parent_pid("42 (a b) S (c)) R 9 42 42 0 -1"),
            Some(9),
            "a name holding spaces and parentheses"
        );
        assert_eq!(parent_pid("42 (x) S"), None);
        assert_eq!(parent_pid("garbage"), None);
    }

    fn fake_proc(tree: &[(u32, u32)]) -> impl Fn(u32) -> std::io::Result<String> {
        let parents: HashMap<u32, u32> = tree.iter().copied().collect();
        move |pid| {
            parents
                .get(&pid)
                .map(|parent| format!("{pid} (sh (evil) ) S {parent} 1 1 0"))
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    #[test]
    fn grandchildren_are_descendants_and_strangers_are_clients() {
        // init 1 → daemon 10 → bash 20 → curl 30; init 1 → terminal 40 → cli 50
        let proc = fake_proc(&[(10, 1), (20, 10), (30, 20), (40, 1), (50, 40), (1, 0)]);
        assert_eq!(classify_pid(30, 10, &proc), Peer::Descendant);
        assert_eq!(classify_pid(20, 10, &proc), Peer::Descendant);
        assert_eq!(classify_pid(50, 10, &proc), Peer::Client);
        assert_eq!(classify_pid(10, 10, &proc), Peer::Client);
        assert!(matches!(classify_pid(99, 10, &proc), Peer::Unknown(_)));
    }

    #[test]
    fn an_endless_chain_is_refused() {
        let looping = |pid: u32| Ok(format!("{pid} (x) S {} 1 1", pid + 1));
        assert!(matches!(classify_pid(100, 1, looping), Peer::Unknown(_)));
    }

    fn listener() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        tokio::net::UnixListener,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        (dir, socket, listener)
    }

    #[tokio::test]
    async fn a_child_process_that_connects_is_refused() {
        let (_dir, socket, listener) = listener();
        let socat = Command::new("socat")
            .arg("-V")
            .stdout(Stdio::null())
            .status();
        assert!(
            socat.is_ok_and(|status| status.success()),
            "this test needs socat (apt-get install socat)"
        );
        // A grandchild, as a tool's shell would start it: sh → socat. It holds the connection
        // while its input lasts, so it is still alive when its pid is looked up.
        let script = format!(
            "sleep 3 | socat -u STDIN UNIX-CONNECT:{} & wait",
            socket.display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (stream, _) =
            tokio::time::timeout(std::time::Duration::from_secs(10), listener.accept())
                .await
                .expect("the child connected")
                .unwrap();
        assert_eq!(classify(&stream, std::process::id()), Peer::Descendant);
        drop(stream);
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn the_process_itself_and_unrelated_processes_are_clients() {
        let (_dir, socket, listener) = listener();
        let _own = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        assert_eq!(classify(&stream, std::process::id()), Peer::Client);
        // Seen from a daemon that is none of its ancestors, this process is an ordinary client.
        assert_eq!(classify(&stream, u32::MAX), Peer::Client);
    }
}
