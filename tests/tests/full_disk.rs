//! A full disk loses nothing (SPEC §3): the home on a small tmpfs filled in the middle of a
//! turn, then freed. What was acknowledged is in the journal, every line of which parses, seqs
//! only increase, and the session goes on, also after a restart. A session that cannot be
//! loaded is listed as damaged, never hidden. Session files are their owner's only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cwcode_protocol::paths::Paths;
use cwcode_protocol::{Event, EventKind, SessionStatus, TurnOutcome};
use cwcode_tests::fake_provider::{FakeProvider, Gate, hold_until, text, tool_calls};
use cwcode_tests::{Home, wait_for_event};
use serde_json::json;

/// A tmpfs mounted for the test, unmounted when dropped, also when the test fails.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts one of `size` (e.g. "2m") on `dir`. None where mounting is not allowed (not
    /// root); under CI that fails the test instead, since its check would not run.
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output();
        match output {
            Ok(output) if output.status.success() => Some(Self {
                dir: dir.to_owned(),
            }),
            other => {
                let why = format!("cannot mount a tmpfs on {}: {other:?}", dir.display());
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
                eprintln!("skipped: {why}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|status| status.success());
        if !unmounted {
            // Still busy (a daemon that did not exit): detach it so nothing is left mounted.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Fills the file system holding `path` to the last byte.
fn fill(path: &Path) -> std::fs::File {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [64 * 1024, 4096, 1] {
        let bytes = vec![b'x'; chunk];
        while file.write_all(&bytes).is_ok() {}
    }
    file
}

/// Every line of the journal, parsed strictly as `jq` would, with strictly increasing seqs.
fn strict_journal(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a torn last line");
    let events: Vec<Event> = text
        .lines()
        .enumerate()
        .map(|(number, line)| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!("line {} does not parse: {error}: {line}", number + 1)
            })
        })
        .collect();
    for pair in events.windows(2) {
        assert!(
            pair[0].seq < pair[1].seq,
            "seq {} then {}",
            pair[0].seq,
            pair[1].seq
        );
    }
    events
}

fn turn_started(events: &[Event], prompt: &str) -> bool {
    events
        .iter()
        .any(|event| matches!(&event.kind, EventKind::TurnStarted { prompt: p, .. } if p == prompt))
}

fn mentions(events: &[Event], needle: &str) -> bool {
    events
        .iter()
        .any(|event| serde_json::to_string(event).unwrap().contains(needle))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A home whose files live on `home_dir`, with the workspace elsewhere.
fn home_at(home_dir: PathBuf, workspace: PathBuf, provider_url: &str) -> Home {
    let paths = Paths::new(home_dir, None);
    std::fs::create_dir_all(&paths.home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    let config = json!({
        "default_profile": "fake",
        "profiles": {"fake": {"base_url": provider_url, "model": "fake-model", "api_key": "sk-test-secret-key"}}
    });
    std::fs::write(paths.config(), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    std::fs::set_permissions(paths.config(), std::fs::Permissions::from_mode(0o600)).unwrap();
    Home {
        dir: tempfile::tempdir().unwrap(),
        paths,
        workspace,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_mid_turn_loses_nothing_and_the_session_goes_on() {
    let base = tempfile::tempdir().unwrap();
    let Some(tmpfs) = Tmpfs::mount(&base.path().join("disk"), "2m") else {
        return;
    };
    let provider = FakeProvider::start().await;
    let home = home_at(
        tmpfs.dir.join("home"),
        base.path().join("work"),
        &provider.url,
    );
    std::fs::write(home.workspace.join("a.txt"), "before\n").unwrap();
    let long_answer = "word ".repeat(1500);
    let gate = Gate::new();
    provider
        // Held after its first words until the disk is full: the rest of it meets a full disk.
        .reply(hold_until(text(&long_answer), 5, &gate))
        .reply(text("the queued one ran"))
        .reply(text("all good"))
        .reply(tool_calls(&[(
            "w",
            "write_file",
            json!({"path": "a.txt", "content": "after\n"}),
        )]))
        .reply(text("written"));
    let daemon = home.start_daemon();
    let id = home.new_session("yolo");
    let journal = home.paths.session_dir(&id).join("events.jsonl");
    let client = home.client().await;

    let first = client.send(&id, "tell a long story").await.unwrap();
    assert!(!first.queued);
    wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::AssistantDelta { .. })
    });
    let queued = client
        .send(&id, "queued before the disk filled")
        .await
        .unwrap();
    assert!(queued.queued);
    let filler_path = tmpfs.dir.join("filler");
    let filler = fill(&filler_path);

    // Larger than the room left in the journal's last page: it cannot slip in.
    let big_prompt = format!("while the disk is full {}", "x".repeat(8192));
    let refused = client.send(&id, &big_prompt).await.unwrap_err().to_string();
    assert!(refused.contains("not accepted"), "{refused}");
    assert!(refused.contains("free some space"), "{refused}");
    assert!(
        refused.contains(&journal.display().to_string()),
        "{refused}"
    );

    // The turn cannot record its answer: it ends, and once space returns it is closed as
    // failed, saying why.
    gate.open();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while client.get_session(&id).await.unwrap().status != SessionStatus::Idle {
        assert!(std::time::Instant::now() < deadline, "the turn never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(filler);
    std::fs::remove_file(&filler_path).unwrap();
    let finished = wait_for_event(&home, &id, |kind| {
        matches!(kind, EventKind::TurnFinished { turn: 1, .. })
    });
    let EventKind::TurnFinished { outcome, error, .. } = &finished.kind else {
        unreachable!()
    };
    assert_eq!(*outcome, TurnOutcome::Failed);
    let error = error.as_deref().unwrap_or_default();
    assert!(error.contains("could not be journalled"), "{error}");
    assert!(error.contains("free some space"), "{error}");
    // The prompt queued before the disk filled was acknowledged: it runs.
    wait_for_event(&home, &id, |kind| {
        matches!(
            kind,
            EventKind::TurnFinished {
                turn: 2,
                outcome: TurnOutcome::Completed,
                ..
            }
        )
    });

    let output = home.cli_ok(&["send", &id, "and now?", "--wait"]);
    assert!(output.contains("all good"), "{output}");
    let events = strict_journal(&journal);
    assert!(turn_started(&events, "tell a long story"));
    assert!(turn_started(&events, "queued before the disk filled"));
    assert!(turn_started(&events, "and now?"));
    assert!(
        !mentions(&events, "while the disk is full"),
        "a refused prompt was journalled"
    );

    // A restart finds the session whole and it goes on, with a checkpoint and a rewind.
    assert!(daemon.terminate().success());
    let _daemon = home.start_daemon();
    let listed = home.cli_ok(&["ls"]);
    assert!(listed.contains(&id[..12]), "{listed}");
    assert!(!listed.contains("DAMAGED"), "{listed}");
    let output = home.cli_ok(&["send", &id, "write a.txt", "--wait"]);
    assert!(output.contains("written"), "{output}");
    let events = strict_journal(&journal);
    assert!(turn_started(&events, "write a.txt"));
    let last_turn = events.iter().rev().find_map(|event| match &event.kind {
        EventKind::TurnFinished { outcome, .. } => Some(*outcome),
        _ => None,
    });
    assert_eq!(last_turn, Some(TurnOutcome::Completed));

    // Everything of the session is its owner's only.
    let dir = home.paths.session_dir(&id);
    assert_eq!(mode(&dir), 0o700, "session directory");
    for file in [
        "events.jsonl",
        "session.json",
        "system.md",
        "checkpoints.jsonl",
    ] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    let objects = dir.join("objects");
    assert_eq!(mode(&objects), 0o700, "objects");
    let fan_outs: Vec<PathBuf> = std::fs::read_dir(&objects)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    assert!(!fan_outs.is_empty(), "the edit stored a blob");
    for fan_out in fan_outs {
        assert_eq!(mode(&fan_out), 0o700, "{}", fan_out.display());
        for blob in std::fs::read_dir(&fan_out).unwrap() {
            let blob = blob.unwrap().path();
            assert_eq!(mode(&blob), 0o600, "{}", blob.display());
        }
    }
}

#[test]
fn a_session_that_cannot_be_loaded_is_listed_as_damaged_and_doctor_names_it() {
    let home = Home::new("http://127.0.0.1:9");
    let daemon = home.start_daemon();
    let repairable = home.new_session("code");
    let broken = home.new_session("code");
    assert!(daemon.terminate().success());
    let repairable_dir = home.paths.session_dir(&repairable);
    let broken_dir = home.paths.session_dir(&broken);
    std::fs::write(repairable_dir.join("session.json"), "{\"id\": \"trunc").unwrap();
    std::fs::write(broken_dir.join("session.json"), "not json at all").unwrap();
    std::fs::remove_file(broken_dir.join("system.md")).unwrap();

    let _daemon = home.start_daemon();
    let listed = home.cli_ok(&["ls"]);
    let line_of = |id: &str| {
        listed
            .lines()
            .find(|line| line.starts_with(&id[..12]))
            .unwrap_or_else(|| panic!("{id} is not listed:\n{listed}"))
            .to_owned()
    };
    // What the journal and system.md tell is enough to rebuild session.json.
    assert!(!line_of(&repairable).contains("DAMAGED"), "{listed}");
    assert!(line_of(&broken).contains("DAMAGED"), "{listed}");
    assert!(listed.contains("session.json is not valid"), "{listed}");
    let shown = home.cli(&["show", &broken]);
    assert!(!shown.status.success());
    let error = String::from_utf8_lossy(&shown.stderr);
    assert!(error.contains("session.json"), "{error}");
    assert!(
        error.contains(&format!("cwcode-cli rm {broken}")),
        "{error}"
    );
    let repaired = home.cli_ok(&["show", &repairable, "--json"]);
    let repaired: serde_json::Value = serde_json::from_str(&repaired).unwrap();
    assert_eq!(
        repaired["cwd"],
        home.workspace.canonicalize().unwrap().display().to_string()
    );

    let doctor = home.cli(&["doctor"]);
    assert!(!doctor.status.success(), "a damaged session needs fixing");
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains(&format!("session {broken} DAMAGED")),
        "{report}"
    );
    assert!(
        report.contains(&format!("session {repairable} repaired")),
        "{report}"
    );
    // The harness writes config.json with the umask's mode: its key is readable by others.
    assert!(report.contains("holds an API key"), "{report}");
    assert!(
        report.contains(&format!("chmod 600 {}", home.paths.config().display())),
        "{report}"
    );

    home.cli_ok(&["rm", &broken]);
    assert!(!broken_dir.exists());
    std::fs::set_permissions(home.paths.config(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let report = String::from_utf8(home.cli(&["doctor"]).stdout).unwrap();
    assert!(report.contains("default profile"), "{report}");
    assert!(!report.contains("holds an API key"), "{report}");
    assert!(!report.contains("DAMAGED"), "{report}");
}
