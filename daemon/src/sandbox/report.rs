//! What the sandbox can enforce on this machine, for `cwcode-cli doctor` (SPEC §7.3). The
//! report's shape is a protocol type; this module probes the platform to fill it.

use cwcode_protocol::NamespaceSupport;
pub use cwcode_protocol::{LandlockSupport, SandboxReport};

use super::confine::writable_outside_workspaces;
use super::isolation::{Namespaces, namespaces};

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
                program: program.display().to_string(),
            },
            Namespaces::Unavailable { reason } => NamespaceSupport::Unavailable {
                reason: reason.clone(),
            },
        },
        environment_allow_list: true,
        subreaper: super::process::is_subreaper(),
        descendants_refused: true,
        always_writable: writable_outside_workspaces()
            .iter()
            .map(|path| path.display().to_string())
            .collect(),
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
        assert_eq!(json["processGroups"], true);
        assert!(json["landlock"]["status"].is_string(), "{json}");
        assert!(report.always_writable.iter().any(|path| path == "/tmp"));
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
