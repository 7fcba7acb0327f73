//! A tmux server of a test's own, to drive the real `cwcode` with `send-keys` and read it with
//! `capture-pane`. Its socket lives in the test's home, so no other tmux is touched, and the
//! server is killed when the driver is dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a failure is the test's

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Home;

/// How long a screen may take to show what a step expects.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct Tmux {
    socket: PathBuf,
    session: String,
}

impl Tmux {
    /// A 120×40 session named `session` whose first window (`session:0`) runs a shell in `dir`
    /// with CWCODE_HOME set to the test's home.
    pub fn start(home: &Home, session: &str, dir: &Path) -> Self {
        let tmux = Self {
            socket: home.dir.path().join("tmux.sock"),
            session: session.to_owned(),
        };
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            session,
            "-c",
            dir.to_str().unwrap(),
        ]);
        tmux.shell_env(home, &format!("{session}:0"));
        tmux
    }

    pub fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux (is it installed?)");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn shell_env(&self, home: &Home, target: &str) {
        let home_dir = home.paths.home.to_str().unwrap();
        self.type_line(
            target,
            &format!("export CWCODE_HOME={home_dir}; unset CWCODE_SOCKET; clear"),
        );
    }

    /// A second window running a shell in `dir`; returns its target.
    pub fn new_window(&self, home: &Home, dir: &Path) -> String {
        self.run(&[
            "new-window",
            "-t",
            &self.session,
            "-c",
            dir.to_str().unwrap(),
        ]);
        let target = format!("{}:1", self.session);
        self.shell_env(home, &target);
        target
    }

    /// Types text as keystrokes (not as a paste), then nothing else.
    pub fn type_text(&self, target: &str, text: &str) {
        self.run(&["send-keys", "-t", target, "-l", text]);
    }

    /// Types text as keystrokes, then Enter.
    pub fn type_line(&self, target: &str, text: &str) {
        self.type_text(target, text);
        self.keys(target, &["Enter"]);
    }

    /// Named keys: Enter, BTab (Shift+Tab), C-c, C-d, …
    pub fn keys(&self, target: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", target];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    pub fn screen(&self, target: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", target])
    }

    /// Waits until the screen of `target` satisfies `done`; returns it.
    pub async fn wait_until(
        &self,
        target: &str,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen(target);
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the screen of {target} never showed {what}; it shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the screen of `target` shows every one of `needles`; returns it.
    pub async fn wait_for(&self, target: &str, needles: &[&str]) -> String {
        self.wait_until(target, &format!("{needles:?}"), |screen| {
            needles.iter().all(|needle| screen.contains(needle))
        })
        .await
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}
