//! The commands tools run, kept away from the daemon (SPEC §4, §7.3): where bubblewrap works, each
//! runs in its own mount namespace, in which the root is read-only but for the writable paths and
//! the daemon's home (config, sessions, socket) is an empty tmpfs. Landlock cannot hide a
//! subdirectory of a readable tree, so without bubblewrap the home stays readable and the report
//! says so. The pid namespace stays shared on purpose: a server started by one call is seen and
//! stopped by the next, as in a terminal (the daemon itself is not dumpable, so its /proc entries
//! do not open a way back into the home).

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::sync::OnceLock;

use tokio::process::Command;

const BUBBLEWRAP: &str = "bwrap";

/// Whether the commands tools run get their own namespaces, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespaces {
    /// `program` wraps every command.
    Bubblewrap {
        program: PathBuf,
    },
    Unavailable {
        reason: String,
    },
}

/// Probed once: bubblewrap on PATH that can set up the namespaces a command gets here (user
/// namespaces may be disabled, or a container may deny mounting proc).
pub fn namespaces() -> &'static Namespaces {
    static PROBED: OnceLock<Namespaces> = OnceLock::new();
    PROBED.get_or_init(probe)
}

fn probe() -> Namespaces {
    let Some(program) = find_on_path(BUBBLEWRAP) else {
        return Namespaces::Unavailable {
            reason: "bubblewrap (`bwrap`) is not installed: install it (Debian/Ubuntu: `apt \
                     install bubblewrap`) to hide the daemon's home from tool commands"
                .to_owned(),
        };
    };
    let mut probe = StdCommand::new(&program);
    probe
        .args(base_arguments())
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // The probe is a child of the daemon: the orphan reaper must not take its exit status.
    match super::process::run_untracked(&mut probe) {
        Ok(output) if output.status.success() => Namespaces::Bubblewrap { program },
        Ok(output) => Namespaces::Unavailable {
            reason: format!(
                "{} cannot create namespaces here ({}): {}",
                program.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        },
        Err(error) => Namespaces::Unavailable {
            reason: format!("{} could not be run: {error}", program.display()),
        },
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// What every command gets: a read-only view of the root, fresh devices, and no capabilities
/// (root in the sandbox cannot unmount the tmpfs that hides the home).
fn base_arguments() -> [&'static str; 7] {
    ["--ro-bind", "/", "/", "--dev", "/dev", "--cap-drop", "ALL"]
}

/// `bwrap …args… --` for a command that may write under `writable` and must not see `hidden`,
/// ready for the program and its arguments. Mounts apply in order: the hidden paths come last,
/// so a home under a writable directory (a temp dir) is still hidden.
pub fn wrap(program: &Path, writable: &[PathBuf], hidden: &[PathBuf], cwd: &Path) -> Command {
    let mut command = Command::new(program);
    command.args(base_arguments());
    for path in writable.iter().filter(|path| path.exists()) {
        // /dev is mounted afresh above; its writable devices are in it already.
        if path.starts_with("/dev") {
            continue;
        }
        command.arg("--bind").arg(path).arg(path);
    }
    for path in hidden.iter().filter(|path| path.exists()) {
        if path.is_dir() {
            // Read-only too: a command must not start a daemon of its own on the home's path,
            // whose start would sweep this daemon's tools as leftovers.
            command
                .arg("--tmpfs")
                .arg(path)
                .arg("--remount-ro")
                .arg(path);
        } else {
            command.arg("--ro-bind").arg("/dev/null").arg(path);
        }
    }
    command.arg("--chdir").arg(cwd).arg("--");
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_are_mounted_after_the_writable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let command = wrap(
            Path::new("/usr/bin/bwrap"),
            &[dir.path().to_owned(), PathBuf::from("/dev/null")],
            std::slice::from_ref(&home),
            dir.path(),
        );
        let arguments: Vec<String> = command
            .as_std()
            .get_args()
            .map(|argument| argument.to_string_lossy().into_owned())
            .collect();
        let bind = arguments.iter().position(|a| a == "--bind").unwrap();
        let tmpfs = arguments.iter().position(|a| a == "--tmpfs").unwrap();
        assert!(bind < tmpfs, "{arguments:?}");
        assert_eq!(arguments[tmpfs + 1], home.to_string_lossy());
        assert_eq!(arguments.last().unwrap(), "--");
        assert_eq!(
            arguments.iter().filter(|a| *a == "--bind").count(),
            1,
            "devices come from --dev: {arguments:?}"
        );
    }
}
