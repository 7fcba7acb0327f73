//! The terminal client's start, whole process, in a pseudo-terminal (`script`): from spawning
//! `cwcode --new` to the first frame's bytes, and to the frame with the attached session's
//! input; beside `cwcode --version` in the same terminal set-up as the reference. Prints the
//! figures for BENCHMARKS.md ("The terminal client's start").
//!
//! Run: `cargo bench -p cwcode-tests --bench tui_start`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cwcode_tests::{Home, tui_bin};

const RUNS: usize = 20;

fn main() {
    let cwcode = tui_bin();
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let mut version = Vec::new();
    let mut first_frame = Vec::new();
    let mut attached = Vec::new();
    for _ in 0..RUNS {
        // The first output of a program that only prints: the floor of starting one at all.
        version.push(in_pty(&home, &cwcode, "--version", &["cwcode"])[0]);
        // The header is drawn in the very first frame; the `›` of the input only once a
        // session is open.
        let marks = in_pty(&home, &cwcode, "--new", &["cwcode", "›"]);
        first_frame.push(marks[0]);
        attached.push(marks[1]);
    }
    let reference = median_ms(&mut version);
    println!(
        "{RUNS} starts of `cwcode --new` in a 120×40 pseudo-terminal, daemon already running ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    for (name, samples) in [
        ("first frame", &mut first_frame),
        ("session attached", &mut attached),
    ] {
        let value = median_ms(samples);
        println!(
            "{name:<18} median {value:>7.2} ms  p95 {:>7.2} ms  reference (`cwcode --version` prints) {reference:>6.2} ms  ratio {:.2}×",
            p95_ms(samples),
            value / reference
        );
    }
}

fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn p95_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[(samples.len() - 1) * 95 / 100].as_secs_f64() * 1e3
}

/// Runs `cwcode ARG` in a 120×40 pseudo-terminal and returns when each marker first appeared
/// in its output; then quits it with Ctrl+C twice.
fn in_pty(home: &Home, cwcode: &Path, arg: &str, markers: &[&str]) -> Vec<Duration> {
    let command = format!("stty cols 120 rows 40; exec {} {arg}", cwcode.display());
    let start = Instant::now();
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .current_dir(&home.workspace)
        .env("CWCODE_HOME", &home.paths.home)
        .env_remove("CWCODE_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script (util-linux)");
    let mut stdout = child.stdout.take().unwrap();
    let (chunks_tx, chunks_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 65536];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0
                || chunks_tx
                    .send((Instant::now(), buffer[..read].to_vec()))
                    .is_err()
            {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let mut marks = Vec::new();
    while marks.len() < markers.len() {
        let (at, chunk) = chunks_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("cwcode drew nothing");
        seen.extend_from_slice(&chunk);
        let text = String::from_utf8_lossy(&seen);
        while marks.len() < markers.len() && text.contains(markers[marks.len()]) {
            marks.push(at.duration_since(start));
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    // A program that already exited has closed the terminal: nothing to quit then.
    let _ = std::io::Write::write_all(&mut stdin, b"\x03\x03");
    drop(stdin);
    child.wait().unwrap();
    marks
}
