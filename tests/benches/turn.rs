//! A one-prompt turn (two model calls, one tool) against the local fake provider, as a script sees
//! it: the whole `cwcode-cli send ID PROMPT --wait` process (SPEC §11, target under 60 ms). Once
//! with `bash` (the sandboxed command path: bubblewrap or Landlock, tagged process group) and once
//! with `read_file`, each beside `cwcode-cli ls` in the same run (what any client process costs).
//!
//! Run: `cargo bench -p cwcode-tests --bench turn`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use cwcode_tests::fake_provider::{FakeProvider, Reply, text, tool_calls};
use cwcode_tests::{Home, percentile, time_process};
use serde_json::json;

const RUNS: usize = 30;

/// A case's name and the model's tool call for it.
type Case = (&'static str, fn() -> Reply);

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(FakeProvider::start());
    let home = Home::new(&provider.url);
    std::fs::write(home.workspace.join("notes.txt"), "one\ntwo\n").unwrap();
    let _daemon = home.start_daemon();
    let id = home.new_session("yolo");

    println!("{RUNS} runs each, release binaries, this machine (2 cores)");
    let cases: [Case; 2] = [
        ("send --wait, one bash call", || {
            tool_calls(&[("c1", "bash", json!({"command": "true"}))])
        }),
        ("send --wait, one read_file call", || {
            tool_calls(&[("c1", "read_file", json!({"path": "notes.txt"}))])
        }),
    ];
    for (name, call) in cases {
        let mut turns = Vec::with_capacity(RUNS);
        let mut listings = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            provider.reply(call()).reply(text("done"));
            turns.push(time_process(
                home.command("cwcode-cli")
                    .args(["send", &id, "go", "--wait"])
                    .stdin(Stdio::null()),
            ));
            listings.push(time_process(
                home.command("cwcode-cli").arg("ls").stdin(Stdio::null()),
            ));
        }
        let (turn, listing) = (percentile(&mut turns, 0.5), percentile(&mut listings, 0.5));
        println!(
            "{name:<34} median {:>6.2} ms  reference (cwcode-cli ls) {:>5.2} ms  ratio {:>5.2}×  target < 60 ms",
            turn.as_secs_f64() * 1e3,
            listing.as_secs_f64() * 1e3,
            turn.as_secs_f64() / listing.as_secs_f64()
        );
    }
}
