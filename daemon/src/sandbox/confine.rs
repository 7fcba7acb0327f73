//! Write confinement for the processes tools start (SPEC §7.3): they may read anywhere, but write
//! only under the workspace, the extra roots, the temp directories and a few devices.
//!
//! On Linux this is Landlock, applied without `unsafe` and without re-executing the daemon: the
//! child is spawned from a short-lived thread that first restricts itself. Landlock domains belong
//! to the thread that calls `landlock_restrict_self` (the process's other threads stay free) and
//! are inherited by every process it forks, so the command runs confined from its first
//! instruction while the daemon is untouched. The same holds in unit tests, which therefore run
//! bash exactly as the daemon does. On macOS the command runs under `sandbox-exec` with an
//! equivalent profile; elsewhere it runs unconfined (the report says so).

use std::io;
use std::path::{Path, PathBuf};

use tokio::process::{Child, Command};

use super::Workspace;
use super::isolation::{self, Namespaces, namespaces};
use super::process::{ProcessGroup, spawn_group};

/// Devices that shells and ordinary tools open for writing: the bit buckets, the random sources,
/// the terminal (for programs that probe it) and POSIX shared memory.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

impl Workspace {
    /// Everywhere a confined process may write: the workspace, the extra roots, the temp
    /// directories and the writable devices that exist here.
    pub fn writable_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.root.clone()];
        paths.extend(self.extra_roots.iter().cloned());
        paths.extend(writable_outside_workspaces());
        paths
    }

    /// A command running `program`, to be started with [`Workspace::spawn`]. Where bubblewrap
    /// works it is wrapped in its namespaces (see `isolation`); on macOS in `sandbox-exec` where
    /// that exists; arguments added to it go to `program`.
    pub fn command(&self, program: &str) -> Command {
        if let Namespaces::Bubblewrap { program: bwrap } = namespaces() {
            let mut command =
                isolation::wrap(bwrap, &self.writable_paths(), &self.hidden, &self.root);
            command.arg(program);
            return command;
        }
        #[cfg(target_os = "macos")]
        if let Some(mut command) = macos::sandboxed(&self.writable_paths()) {
            command.arg(program);
            return command;
        }
        Command::new(program)
    }

    /// Starts a command built by [`Workspace::command`] leading its own tracked process group,
    /// unable to write outside [`Workspace::writable_paths`] where the platform allows it: by its
    /// namespaces, else by Landlock. Must be called within a Tokio runtime.
    pub fn spawn(&self, command: &mut Command) -> io::Result<(Child, ProcessGroup)> {
        if matches!(namespaces(), Namespaces::Bubblewrap { .. }) {
            // Landlock would forbid bubblewrap its mounts; the read-only root confines writes.
            return spawn_group(command, Command::spawn);
        }
        #[cfg(target_os = "linux")]
        {
            let writable = self.writable_paths();
            spawn_group(command, |command| linux::spawn_confined(command, &writable))
        }
        #[cfg(not(target_os = "linux"))]
        {
            spawn_group(command, Command::spawn)
        }
    }
}

/// What every workspace may write besides its roots: the temp directories and the devices.
pub(super) fn writable_outside_workspaces() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = temp_dirs();
    paths.extend(
        WRITABLE_DEVICES
            .iter()
            .map(Path::new)
            .filter(|device| device.exists())
            .map(Path::to_path_buf),
    );
    paths
}

/// `std::env::temp_dir()` ($TMPDIR) and `/tmp`, which many programs use whatever $TMPDIR says;
/// canonical, because Landlock and sandbox-exec both match resolved paths (on macOS `/tmp` is
/// `/private/tmp`).
fn temp_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in [std::env::temp_dir(), PathBuf::from("/tmp")] {
        if let Ok(canonical) = dir.canonicalize()
            && !dirs.contains(&canonical)
        {
            dirs.push(canonical);
        }
    }
    dirs
}

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use std::io;
    use std::path::PathBuf;

    use landlock::{
        ABI, AccessFs, BitFlags, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetError, path_beneath_rules,
    };
    use tokio::process::{Child, Command};

    /// The rights Landlock takes away outside the writable paths: ABI 3's write set, every way to
    /// create, change, truncate, remove, rename or link a file. Pinned rather than "the newest"
    /// so that a kernel upgrade cannot tighten the sandbox untested; it leaves out ABI 5's
    /// `IoctlDev` (ioctl on devices opened for reading, e.g. GPUs, is not writing a file) and
    /// ABI 9's `ResolveUnix` (neither is connecting to a socket).
    fn handled() -> BitFlags<AccessFs> {
        AccessFs::from_write(ABI::V3)
    }

    /// Restricts the calling thread, and every process it starts from now on, to writing under
    /// `writable` (paths that do not exist are skipped). Reads are not handled, so they stay open.
    /// On a kernel without Landlock this succeeds and reports `NotEnforced`.
    pub(in crate::sandbox) fn restrict_current_thread(
        writable: &[PathBuf],
    ) -> Result<RestrictionStatus, RulesetError> {
        Ruleset::default()
            .handle_access(handled())?
            .create()?
            .add_rules(path_beneath_rules(writable, handled()))?
            .restrict_self()
    }

    /// Spawns `command` from a fresh thread that restricts itself first, so the child inherits
    /// the Landlock domain and the daemon's own threads do not.
    pub(super) fn spawn_confined(command: &mut Command, writable: &[PathBuf]) -> io::Result<Child> {
        // tokio registers the child with the runtime's reaper, which it finds through the
        // thread's context: the new thread enters the caller's runtime.
        let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _context = runtime.enter();
                    restrict_current_thread(writable).map_err(|error| {
                        io::Error::other(format!("could not set up the Landlock sandbox: {error}"))
                    })?;
                    command.spawn()
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the sandbox thread panicked")))
        })
    }
}

#[cfg(target_os = "macos")]
mod macos {
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};

    use tokio::process::Command;

    const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

    /// `sandbox-exec -p PROFILE`, ready for the program and its arguments; None where macOS no
    /// longer ships it.
    pub(super) fn sandboxed(writable: &[PathBuf]) -> Option<Command> {
        if !Path::new(SANDBOX_EXEC).exists() {
            return None;
        }
        let mut command = Command::new(SANDBOX_EXEC);
        command.arg("-p").arg(profile(writable));
        Some(command)
    }

    /// Everything allowed except writing files, then writing under the writable paths.
    fn profile(writable: &[PathBuf]) -> String {
        let mut profile = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
        for path in writable {
            let quoted = path
                .to_string_lossy()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            let _ = writeln!(profile, "(allow file-write* (subpath \"{quoted}\"))");
        }
        profile
    }
}

/// The Landlock path on its own: the tool tests go through bubblewrap where it is installed, so
/// the fallback is checked here directly.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::sandbox::tests::{landlock_enforced, outside_temp_dirs};

    #[tokio::test]
    async fn landlock_alone_confines_writes_to_the_writable_paths() {
        if !landlock_enforced() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI's kernel enforces Landlock"
            );
            return;
        }
        let workspace = tempfile::tempdir().unwrap();
        let outside = outside_temp_dirs();
        let script = format!(
            "echo in > {ws}/inside; echo out > {out}/outside 2>/dev/null; echo done",
            ws = workspace.path().display(),
            out = outside.path().display()
        );
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .stdout(std::process::Stdio::piped());
        let child =
            linux::spawn_confined(&mut command, &[workspace.path().canonicalize().unwrap()])
                .unwrap();
        let output = child.wait_with_output().await.unwrap();

        assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
        assert!(workspace.path().join("inside").exists());
        assert!(!outside.path().join("outside").exists());
    }
}
