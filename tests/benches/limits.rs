//! `cwcode-cli ls` beside hostile clients (SPEC §11: 200 idle WebSockets plus 200 slow-body
//! connections, `ls` still answers in under 50 ms), against the same `ls` with nothing else
//! connected, in one run.
//!
//! Run: `cargo bench -p cwcode-tests --bench limits`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cwcode_tests::hostile::{Trickler, idle_websocket, slow_body, still_open};
use cwcode_tests::{Home, percentile, time_process};

const RUNS: usize = 40;
const HOSTILE_EACH: usize = 200;

fn time_ls(home: &Home) -> Duration {
    time_process(home.command("cwcode-cli").arg("ls"))
}

fn main() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    for _ in 0..3 {
        home.new_session("code");
    }
    let socket = &home.paths.socket;

    let mut alone: Vec<Duration> = (0..RUNS).map(|_| time_ls(&home)).collect();

    let opening = Instant::now();
    let websockets: Vec<UnixStream> = (0..HOSTILE_EACH).map(|_| idle_websocket(socket)).collect();
    let slow: Arc<Vec<UnixStream>> =
        Arc::new((0..HOSTILE_EACH).map(|_| slow_body(socket)).collect());
    let opened_in = opening.elapsed();
    let trickler = Trickler::start(Arc::clone(&slow), Duration::from_millis(200));
    let mut beside: Vec<Duration> = (0..RUNS).map(|_| time_ls(&home)).collect();
    // The figures count only if every hostile connection was still held while they were taken.
    let held = websockets
        .iter()
        .chain(slow.iter())
        .filter(|s| still_open(s))
        .count();
    drop(trickler);
    assert_eq!(
        held,
        2 * HOSTILE_EACH,
        "the daemon closed some hostile connections mid-run"
    );

    let alone_median = percentile(&mut alone, 0.5);
    let beside_median = percentile(&mut beside, 0.5);
    println!(
        "{RUNS} runs each, release binaries, this machine ({} cores); {} hostile connections opened in {:.0} ms",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        2 * HOSTILE_EACH,
        opened_in.as_secs_f64() * 1e3
    );
    println!(
        "{:<58} median {:>6.2} ms  p95 {:>6.2} ms",
        "cwcode-cli ls, nothing else connected",
        alone_median.as_secs_f64() * 1e3,
        percentile(&mut alone, 0.95).as_secs_f64() * 1e3,
    );
    println!(
        "{:<58} median {:>6.2} ms  p95 {:>6.2} ms  ratio {:>4.2}×  target < 50 ms",
        "cwcode-cli ls beside 200 idle WS + 200 slow-body requests",
        beside_median.as_secs_f64() * 1e3,
        percentile(&mut beside, 0.95).as_secs_f64() * 1e3,
        beside_median.as_secs_f64() / alone_median.as_secs_f64(),
    );
}
