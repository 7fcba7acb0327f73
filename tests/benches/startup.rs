//! Whole-process start-up figures (SPEC §11), each beside a reference measured in the same run:
//! - daemon start to socket answering `daemon/info`, against starting `cwcoded --version` (the
//!   floor any process start pays here);
//! - idle RSS of the daemon;
//! - `cwcode-cli ls` with the daemon running, against `cwcode-cli --version`.
//!
//! Run: `cargo bench -p cwcode-tests --bench startup`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cwcode_tests::{Home, bin, percentile, time_process};

const RUNS: usize = 40;

fn info_answered(socket: &std::path::Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#;
    let request = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    stream.read_to_string(&mut response).is_ok() && response.contains("\"pid\"")
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap()
}

fn report(name: &str, samples: &mut [Duration], reference: &mut [Duration], target: &str) {
    let median = percentile(samples, 0.5);
    let p95 = percentile(samples, 0.95);
    let reference_median = percentile(reference, 0.5);
    println!(
        "{name:<40} median {:>7.2} ms  p95 {:>7.2} ms  reference median {:>6.2} ms  ratio {:>5.2}×  target {target}",
        median.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3,
        reference_median.as_secs_f64() * 1e3,
        median.as_secs_f64() / reference_median.as_secs_f64(),
    );
}

fn main() {
    let daemon_bin = bin("cwcoded");
    let home = Home::new("http://127.0.0.1:9/v1");

    let mut start_samples = Vec::new();
    let mut version_samples = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..RUNS {
        version_samples.push(time_process(Command::new(&daemon_bin).arg("--version")));
        let start = Instant::now();
        let mut daemon = home
            .command("cwcoded")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        while !info_answered(&home.paths.socket) {
            std::thread::sleep(Duration::from_micros(200));
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "cwcoded never answered"
            );
        }
        start_samples.push(start.elapsed());
        std::thread::sleep(Duration::from_millis(50));
        rss.push(rss_kib(daemon.id()));
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(daemon.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        daemon.wait().unwrap();
    }

    let daemon = home.start_daemon();
    for _ in 0..3 {
        home.new_session("code");
    }
    let mut ls_samples = Vec::new();
    let mut cli_version_samples = Vec::new();
    for _ in 0..RUNS {
        cli_version_samples.push(time_process(home.command("cwcode-cli").arg("--version")));
        ls_samples.push(time_process(home.command("cwcode-cli").arg("ls")));
    }
    let idle_rss_with_sessions = rss_kib(daemon.child.id());
    drop(daemon);

    println!(
        "{RUNS} runs each, release binaries, this machine ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    report(
        "daemon start → daemon/info answered",
        &mut start_samples,
        &mut version_samples,
        "< 20 ms",
    );
    report(
        "cwcode-cli ls (3 sessions)",
        &mut ls_samples,
        &mut cli_version_samples,
        "< 10 ms",
    );
    rss.sort();
    println!(
        "{:<40} median {:>7.1} MiB  with 3 sessions loaded {:>5.1} MiB  target < 15 MiB",
        "daemon idle RSS",
        rss[rss.len() / 2] as f64 / 1024.0,
        idle_rss_with_sessions as f64 / 1024.0
    );
}
