//! Process groups: every command a tool starts leads its own group, so cancel kills it whole.

use std::io;

use rustix::process::{Pid, Signal, kill_process_group};

/// The process group a spawned command leads. Killing it reaches everything the command started
/// that stayed in the group (pipelines, `&` jobs); dropping it kills the group too, so a tool call
/// abandoned mid-way leaves nothing running.
#[derive(Debug)]
pub struct ProcessGroup {
    leader: Pid,
    killed: bool,
}

impl ProcessGroup {
    /// The group led by a child spawned with `process_group(0)`. None once the child was reaped.
    pub fn led_by(child: &tokio::process::Child) -> Option<Self> {
        let leader = Pid::from_raw(i32::try_from(child.id()?).ok()?)?;
        Some(Self {
            leader,
            killed: false,
        })
    }

    /// Sends SIGKILL to every process in the group. A group that is already gone is not an error.
    /// Once killed, the group is not signalled again: its id could be reused by an unrelated group.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.killed {
            return Ok(());
        }
        self.killed = true;
        self.signal(Signal::KILL)
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
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Stdio;
    use std::time::Duration;

    use super::*;

    #[allow(clippy::unwrap_used)]
    fn spawn_group_leader(script: &str) -> tokio::process::Child {
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[tokio::test]
    async fn killing_the_group_kills_background_children_too() {
        let mut child = spawn_group_leader("sleep 100 & echo $!; wait");
        let mut group = ProcessGroup::led_by(&child).unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut pid_text = String::new();
        tokio::io::AsyncBufReadExt::read_line(
            &mut tokio::io::BufReader::new(&mut stdout),
            &mut pid_text,
        )
        .await
        .unwrap();
        let background_pid: i32 = pid_text.trim().parse().unwrap();

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
    async fn dropping_the_group_kills_it() {
        let mut child = spawn_group_leader("sleep 100");
        drop(ProcessGroup::led_by(&child).unwrap());
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success());
    }

    #[tokio::test]
    async fn killing_a_finished_group_is_not_an_error() {
        let mut child = spawn_group_leader("true");
        let mut group = ProcessGroup::led_by(&child).unwrap();
        child.wait().await.unwrap();
        group.kill().unwrap();
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
