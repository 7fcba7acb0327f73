//! The end-to-end harness: a temporary CWCODE_HOME, a real `cwcoded` process, and a fake
//! OpenAI-compatible provider that streams real SSE bytes from scripted answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod economy;
pub mod fake_provider;
pub mod hostile;
pub mod tmux;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cwcode_protocol::paths::Paths;
use cwcode_protocol::{Client, ConnectOptions, Event, EventKind};

/// Builds `packages` (in release for benchmarks, which measure release binaries), so that no test
/// runs a stale binary.
fn build(packages: &[&str]) {
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet"]);
    for package in packages {
        build.args(["-p", package]);
    }
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building {packages:?} failed");
}

/// The directory holding the workspace's binaries, the daemon and the CLI built once per test
/// process.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        build(&["cwcoded", "cwcode-cli"]);
        let exe = std::env::current_exe().expect("current exe");
        // target/<profile>/deps/<test> → target/<profile>
        exe.parent()
            .and_then(Path::parent)
            .expect("target dir")
            .to_owned()
    })
}

/// The terminal client `cwcode`, built once per process (only its tests need it).
pub fn tui_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            build(&["cwcode-tui"]);
            bin("cwcode")
        })
        .clone()
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A temporary cwcode home with a config pointing at a provider URL.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub paths: Paths,
    pub workspace: PathBuf,
}

impl Home {
    pub fn new(provider_url: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path().join("home"), None);
        std::fs::create_dir_all(&paths.home).unwrap();
        let config = serde_json::json!({
            "default_profile": "fake",
            "profiles": {
                "fake": {
                    "base_url": provider_url,
                    "model": "fake-model",
                    "api_key": "sk-test-secret-key"
                }
            }
        });
        std::fs::write(paths.config(), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        let workspace = dir.path().join("work");
        std::fs::create_dir_all(&workspace).unwrap();
        Self {
            dir,
            paths,
            workspace,
        }
    }

    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(bin(program));
        command
            .env("CWCODE_HOME", &self.paths.home)
            .env_remove("CWCODE_SOCKET")
            .env("RUST_LOG", "info");
        command
    }

    /// Runs `cwcode-cli ARGS` to completion.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.command("cwcode-cli")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `cwcode-cli ARGS`, asserts success and returns stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let output = self.cli(args);
        assert!(
            output.status.success(),
            "cwcode-cli {args:?} failed: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Starts the daemon in the foreground as a child of the test and waits for its socket.
    pub fn start_daemon(&self) -> Daemon {
        let child = self
            .command("cwcoded")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_socket(&self.paths.socket);
        Daemon { child }
    }

    pub async fn client(&self) -> Client {
        let mut options = ConnectOptions::new(self.paths.clone());
        options.autostart = false;
        Client::connect(&options).await.unwrap()
    }

    pub fn new_session(&self, mode: &str) -> String {
        let workspace = self.workspace.to_str().unwrap();
        self.cli_ok(&["new", "--cwd", workspace, "--mode", mode])
            .trim()
            .to_owned()
    }

    /// The id of the only session in the home (its directory under `sessions/`).
    pub fn only_session(&self) -> String {
        let mut ids: Vec<String> = std::fs::read_dir(self.paths.sessions_dir())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(ids.len(), 1, "one session expected: {ids:?}");
        ids.remove(0)
    }

    pub fn journal(&self, session: &str) -> Vec<Event> {
        let text =
            std::fs::read_to_string(self.paths.session_dir(session).join("events.jsonl")).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// Runs a whole process to completion, output discarded, and returns how long it took; for the
/// benchmarks.
pub fn time_process(command: &mut Command) -> Duration {
    let start = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "{command:?} failed");
    elapsed
}

/// The sample at quantile `p` (0.5 the median), sorting `samples`.
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

pub fn wait_for_socket(socket: &Path) {
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "cwcoded did not open {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A running daemon; killed when dropped so no test leaks a process.
pub struct Daemon {
    pub child: Child,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM, then waits for the drain to finish.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.pid()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        self.child.wait().unwrap()
    }

    /// SIGKILL: a crash, with no chance to clean up.
    pub fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Collects a subscription's events until the given turn finishes.
pub async fn events_until_turn_end(
    stream: &mut cwcode_protocol::client::EventStream,
    turn: u32,
) -> Vec<Event> {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let event = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("turn did not finish in time")
            .expect("stream closed")
            .unwrap();
        let done = matches!(event.kind, EventKind::TurnFinished { turn: t, .. } if t == turn);
        events.push(event);
        if done {
            return events;
        }
    }
}

/// Polls the journal until an event matches.
pub fn wait_for_event(home: &Home, session: &str, matches: impl Fn(&EventKind) -> bool) -> Event {
    let start = Instant::now();
    loop {
        if let Some(event) = home
            .journal(session)
            .into_iter()
            .find(|event| matches(&event.kind))
        {
            return event;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the awaited event never came"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
