//! The processes tools start: each command leads its own process group, carries a tag in its
//! environment that every descendant inherits, and is tracked until it is killed with its call,
//! its session or the daemon. The daemon is a child subreaper, so a process that escapes its group
//! with `setsid` or a double fork is re-parented to the daemon (it stays a descendant, which the
//! server refuses as a client) instead of to init; the reaper collects those orphans' exit status.
//! A daemon killed with SIGKILL leaves its tools running: the next one kills every process tagged
//! with its home before it serves.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use rustix::process::{Pid, Signal, WaitOptions, kill_process, kill_process_group};
use sha2::{Digest, Sha256};
use tokio::process::{Child, Command};

/// Marks every process a tool starts, with `<home>:<group>`; inherited by all descendants.
/// Not a `CWCODE_*` name: it tells a command nothing about where the daemon lives.
pub const TAG_VARIABLE: &str = "CW_TOOL_GROUP";

/// How often a tag sweep looks again for processes forked while it was killing.
const SWEEP_ROUNDS: usize = 4;

/// This daemon's tag prefix: a digest of its home, stable across restarts so that the next daemon
/// finds what a crashed one left.
static INSTANCE: OnceLock<String> = OnceLock::new();
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);
/// The daemon's direct children that the runtime (or a caller) waits for: the orphan reaper
/// leaves their exit status alone. Held while spawning, so a child that exits at once is known
/// before the reaper can see it.
static CHILDREN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

fn children() -> MutexGuard<'static, Option<HashSet<i32>>> {
    CHILDREN.lock().unwrap_or_else(PoisonError::into_inner)
}

fn instance() -> &'static str {
    INSTANCE.get_or_init(|| format!("pid{}", std::process::id()))
}

/// Ties the tags of this daemon's tools to its home, and kills what an earlier daemon of the same
/// home left running (it crashed, or was killed). Call once, holding the home's lock, before any
/// tool runs. Returns how many leftover processes were killed.
pub fn track_tools_of(home: &Path) -> usize {
    let digest = Sha256::digest(home.as_os_str().as_encoded_bytes());
    let _ = INSTANCE.set(hex::encode(&digest[..8]));
    sweep(&format!("{}:", instance()), Match::Prefix)
}

static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes the daemon's `/proc/PID` entries (its environment with the keys, its memory, its root
/// and cwd links into the home) unreadable to the commands tools run, though they share its uid.
pub fn forbid_inspection() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Makes the daemon the subreaper of everything its tools start.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    SUBREAPER.store(true, Ordering::Relaxed);
    Ok(())
}

pub fn is_subreaper() -> bool {
    SUBREAPER.load(Ordering::Relaxed)
}

/// Collects the exit status of orphans re-parented to the daemon, on every SIGCHLD. Must be
/// called within a Tokio runtime.
pub fn start_orphan_reaper() -> io::Result<()> {
    let mut child_exited = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
    tokio::spawn(async move {
        while child_exited.recv().await.is_some() {
            if let Err(error) = tokio::task::spawn_blocking(reap_orphans).await {
                tracing::warn!(%error, "the orphan reaper failed");
            }
        }
    });
    Ok(())
}

/// Reaps the daemon's zombie children that nobody waits for: adopted orphans.
fn reap_orphans() {
    let own = std::process::id() as i32;
    let known = children();
    for (pid, stat) in processes_with("stat") {
        let Some((ppid, state)) = parent_and_state(&stat) else {
            continue;
        };
        let waited_for = known.as_ref().is_some_and(|known| known.contains(&pid));
        if ppid == own && state == 'Z' && !waited_for {
            let _ = Pid::from_raw(pid)
                .map(|pid| rustix::process::waitpid(Some(pid), WaitOptions::NOHANG));
        }
    }
}

/// The parent pid and the state letter of a `/proc/PID/stat` line. The command name in parens may
/// hold spaces and parens itself: the fields follow the last `)`.
fn parent_and_state(stat: &[u8]) -> Option<(i32, char)> {
    let close = stat.iter().rposition(|&byte| byte == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Starts `command` (through `spawn`, which may confine it first) leading a new process group,
/// tagged, and tracked until the returned group is dropped.
pub fn spawn_group(
    command: &mut Command,
    spawn: impl FnOnce(&mut Command) -> io::Result<Child>,
) -> io::Result<(Child, ProcessGroup)> {
    let tag = format!(
        "{}:{}",
        instance(),
        NEXT_GROUP.fetch_add(1, Ordering::Relaxed)
    );
    command.env(TAG_VARIABLE, &tag).process_group(0);
    let mut known = children();
    let child = spawn(command)?;
    let leader = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::other("the command exited before it could be tracked"))?;
    known
        .get_or_insert_with(HashSet::new)
        .insert(leader.as_raw_nonzero().get());
    Ok((
        child,
        ProcessGroup {
            leader,
            tag,
            killed: false,
        },
    ))
}

/// Runs a daemon-internal command (a probe) to completion, its exit status kept from the reaper.
pub fn run_untracked(command: &mut std::process::Command) -> io::Result<std::process::Output> {
    let child = {
        let mut known = children();
        let child = command.spawn()?;
        known
            .get_or_insert_with(HashSet::new)
            .insert(child.id() as i32);
        child
    };
    let pid = child.id() as i32;
    let output = child.wait_with_output();
    if let Some(known) = children().as_mut() {
        known.remove(&pid);
    }
    output
}

#[derive(Clone, Copy)]
enum Match {
    Exact,
    Prefix,
}

/// SIGKILLs every process of this user whose tag is `tag` (or starts with it), until none is
/// left or the rounds run out. Returns how many it killed.
fn sweep(tag: &str, how: Match) -> usize {
    let needle = format!("{TAG_VARIABLE}={tag}");
    let own = std::process::id() as i32;
    let mut killed = 0;
    for _ in 0..SWEEP_ROUNDS {
        let found: Vec<i32> = processes_with("environ")
            .filter(|(pid, _)| *pid != own)
            .filter(|(_, environ)| {
                environ.split(|&byte| byte == 0).any(|entry| match how {
                    Match::Exact => entry == needle.as_bytes(),
                    Match::Prefix => entry.starts_with(needle.as_bytes()),
                })
            })
            .map(|(pid, _)| pid)
            .collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            if let Some(pid) = Pid::from_raw(pid)
                && kill_process(pid, Signal::KILL).is_ok()
            {
                killed += 1;
            }
        }
    }
    killed
}

/// Every process's `/proc/PID/FILE` that this user may read.
fn processes_with(file: &'static str) -> impl Iterator<Item = (i32, Vec<u8>)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(move |entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let content = std::fs::read(entry.path().join(file)).ok()?;
            Some((pid, content))
        })
}

/// The process group a tool's command leads, and its tag. Killing it reaches everything the
/// command started: the group (pipelines, `&` jobs) and, by the tag, what left the group. Dropping
/// it kills it too, so a tool call abandoned mid-way leaves nothing running.
#[derive(Debug)]
pub struct ProcessGroup {
    leader: Pid,
    tag: String,
    killed: bool,
}

impl ProcessGroup {
    /// Sends SIGKILL to every process in the group and every process carrying its tag. A group
    /// that is already gone is not an error. Once killed, the group is not signalled again: its
    /// id could be reused by an unrelated group.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.killed {
            return Ok(());
        }
        self.killed = true;
        let result = self.signal(Signal::KILL);
        let tag = self.tag.clone();
        // Reading every process's environment is file I/O: off the runtime's workers.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || sweep(&tag, Match::Exact))),
            Err(_) => drop(sweep(&tag, Match::Exact)),
        }
        result
    }

    /// Sends SIGTERM to every process in the group, so that servers can shut down cleanly before
    /// [`ProcessGroup::kill`].
    pub fn terminate(&self) -> io::Result<()> {
        if self.killed {
            return Ok(());
        }
        self.signal(Signal::TERM)
    }

    fn signal(&self, signal: Signal) -> io::Result<()> {
        match kill_process_group(self.leader, signal) {
            Ok(()) => Ok(()),
            Err(errno) if errno == rustix::io::Errno::SRCH => Ok(()),
            Err(errno) => Err(errno.into()),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Err(error) = self.kill() {
            tracing::warn!(leader = ?self.leader, %error, "could not kill a tool's process group");
        }
        if let Some(known) = children().as_mut() {
            known.remove(&self.leader.as_raw_nonzero().get());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Stdio;
    use std::time::Duration;

    use tokio::io::AsyncBufReadExt;

    use super::*;

    #[allow(clippy::unwrap_used)]
    fn spawn_group_leader(script: &str) -> (tokio::process::Child, ProcessGroup) {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        spawn_group(&mut command, Command::spawn).unwrap()
    }

    #[allow(clippy::unwrap_used)]
    async fn first_line_pid(child: &mut tokio::process::Child) -> i32 {
        let stdout = child.stdout.as_mut().unwrap();
        let mut line = String::new();
        tokio::io::BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .unwrap();
        line.trim().parse().unwrap()
    }

    #[tokio::test]
    async fn killing_the_group_kills_background_children_too() {
        let (mut child, mut group) = spawn_group_leader("sleep 100 & echo $!; wait");
        let background_pid = first_line_pid(&mut child).await;

        group.kill().unwrap();
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success());
        assert!(
            wait_until_gone(background_pid).await,
            "background sleep {background_pid} survived"
        );
    }

    #[tokio::test]
    async fn a_process_that_left_the_group_dies_with_it_by_its_tag() {
        let (mut child, mut group) =
            spawn_group_leader("setsid sleep 100 </dev/null >/dev/null 2>&1 & echo $!; wait");
        let escaped = first_line_pid(&mut child).await;
        let stat = std::fs::read(format!("/proc/{escaped}/stat")).unwrap();
        assert!(parent_and_state(&stat).is_some());

        group.kill().unwrap();
        assert!(
            wait_until_gone(escaped).await,
            "setsid sleep {escaped} outlived its group"
        );
    }

    #[tokio::test]
    async fn dropping_the_group_kills_it() {
        let (mut child, group) = spawn_group_leader("sleep 100");
        drop(group);
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success());
    }

    #[tokio::test]
    async fn killing_a_finished_group_is_not_an_error() {
        let (mut child, mut group) = spawn_group_leader("true");
        child.wait().await.unwrap();
        group.kill().unwrap();
    }

    #[test]
    fn stat_fields_are_read_after_the_last_paren() {
        assert_eq!(
            parent_and_state(b"42 (a) b (c)) S 17 42 42 0 -1"),
            Some((17, 'S'))
        );
        assert_eq!(parent_and_state(b"42 (x) Z 1 0"), Some((1, 'Z')));
        assert_eq!(parent_and_state(b"garbage"), None);
    }

    /// A killed process may linger as a zombie until its new parent reaps it: that counts as gone.
    #[allow(clippy::unwrap_used)]
    pub(crate) async fn wait_until_gone(pid: i32) -> bool {
        for _ in 0..100 {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => return true,
                Ok(stat) => {
                    let state = stat.rsplit_once(") ").unwrap().1.chars().next().unwrap();
                    if state == 'Z' || state == 'X' {
                        return true;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}
