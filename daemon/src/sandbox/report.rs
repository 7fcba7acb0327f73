//! What the sandbox can enforce on this machine, for `cwcode-cli doctor` (SPEC §7.3).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::confine::writable_outside_workspaces;
use super::isolation::{Namespaces, namespaces};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// `linux`, `macos`, …
    pub os: String,
    /// Whether Landlock confines the writes of the commands tools run.
    pub landlock: LandlockSupport,
    /// macOS: commands run under `sandbox-exec` with the same write confinement.
    pub sandbox_exec: bool,
    /// Every command leads its own process group, killed whole on timeout, cancel or session end.
    pub process_groups: bool,
    /// Whether commands run in their own mount and pid namespaces, in which the daemon's home is
    /// hidden and everything a command starts dies with it.
    pub namespaces: NamespaceSupport,
    /// Commands get an allow-listed environment (never the daemon's socket, home or keys).
    pub environment_allow_list: bool,
    /// The daemon adopts what escapes a command's process group, so that it stays a descendant
    /// (refused as an API client) and is reaped.
    pub subreaper: bool,
    /// Connections from the daemon's own descendants (tool commands) are refused.
    pub descendants_refused: bool,
    /// Where a confined command may write besides its workspace and the config's extra roots.
    pub always_writable: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum NamespaceSupport {
    /// bubblewrap at `program` wraps every command; the home is hidden from it.
    Bubblewrap { program: PathBuf },
    /// Commands share the daemon's view: they can read its home (Landlock confines writes only).
    Unavailable { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LandlockSupport {
    /// Every restriction cwcode asks for is enforced; `abi` is the kernel's Landlock ABI.
    Enforced { abi: u32 },
    /// Some are: the kernel's Landlock predates part of them (truncation is controlled from
    /// ABI 3, renames across directories from ABI 2).
    Partial { abi: u32 },
    /// Commands can write wherever the daemon's user can.
    Unsupported { reason: String },
}

/// Probes the platform (on Linux, by confining a throwaway thread exactly as a command would be).
pub fn report() -> SandboxReport {
    SandboxReport {
        os: std::env::consts::OS.to_owned(),
        landlock: landlock(),
        sandbox_exec: cfg!(target_os = "macos")
            && std::path::Path::new("/usr/bin/sandbox-exec").exists(),
        process_groups: true,
        namespaces: match namespaces() {
            Namespaces::Bubblewrap { program } => NamespaceSupport::Bubblewrap {
                program: program.clone(),
            },
            Namespaces::Unavailable { reason } => NamespaceSupport::Unavailable {
                reason: reason.clone(),
            },
        },
        environment_allow_list: true,
        subreaper: super::process::is_subreaper(),
        descendants_refused: true,
        always_writable: writable_outside_workspaces(),
    }
}

#[cfg(target_os = "linux")]
fn landlock() -> LandlockSupport {
    use landlock::{LandlockStatus, RulesetStatus};

    let probe = std::thread::spawn(|| {
        super::confine::linux::restrict_current_thread(&writable_outside_workspaces())
    })
    .join();
    let status = match probe {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => {
            return LandlockSupport::Unsupported {
                reason: format!("a Landlock ruleset could not be applied: {error}"),
            };
        }
        Err(_) => {
            return LandlockSupport::Unsupported {
                reason: "the Landlock probe panicked".to_owned(),
            };
        }
    };
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi
            .and_then(|abi| u32::try_from(abi).ok())
            // The crate's ABI enum is non-exhaustive, so it cannot be cast; it prints as the
            // number.
            .unwrap_or_else(|| effective_abi.to_string().parse().unwrap_or(0)),
        LandlockStatus::NotEnabled => {
            return LandlockSupport::Unsupported {
                reason: "the kernel has Landlock but it is not enabled: add `landlock` to the \
                         `lsm=` boot parameter"
                    .to_owned(),
            };
        }
        LandlockStatus::NotImplemented => {
            return LandlockSupport::Unsupported {
                reason: "the kernel has no Landlock (it needs Linux 5.13 or later built with \
                         CONFIG_SECURITY_LANDLOCK)"
                    .to_owned(),
            };
        }
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => LandlockSupport::Enforced { abi },
        RulesetStatus::PartiallyEnforced => LandlockSupport::Partial { abi },
        RulesetStatus::NotEnforced => LandlockSupport::Unsupported {
            reason: format!("the kernel's Landlock (ABI {abi}) enforced none of the rules"),
        },
    }
}

#[cfg(not(target_os = "linux"))]
fn landlock() -> LandlockSupport {
    LandlockSupport::Unsupported {
        reason: "Landlock is Linux's".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_serialises_for_doctor() {
        let report = report();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["os"], std::env::consts::OS);
        assert_eq!(json["process_groups"], true);
        assert!(json["landlock"]["status"].is_string(), "{json}");
        assert!(report.always_writable.contains(&"/tmp".into()));
        let back: SandboxReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }

    /// The rules need ABI 3; this project's machines have ABI 7.
    #[cfg(target_os = "linux")]
    #[test]
    fn landlock_is_reported_by_what_the_kernel_enforces() {
        match report().landlock {
            LandlockSupport::Enforced { abi } => assert!(abi >= 3, "{abi}"),
            // A kernel without Landlock is reported, not failed.
            LandlockSupport::Unsupported { reason } => eprintln!("no Landlock here: {reason}"),
            // Only a kernel older than the rules enforces them in part.
            LandlockSupport::Partial { abi } => assert!(abi < 3, "{abi}"),
        }
    }
}
