//! Running unattended (SPEC §4, issue 7): cwcoded started with its API socket passed through
//! `LISTEN_FDS`, as systemd's cwcoded.socket starts it, serves that socket, even a connection
//! made before it ran, and leaves it in place for the next activation; and the user units pass
//! `systemd-analyze verify`, the scheduled goal loop's template and timer among them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::fs::Permissions;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cwcode_tests::{Daemon, Home, bin, wait_for_socket};
use serde_json::{Value, json};

/// No turn runs here, so the provider is never called.
const NO_PROVIDER: &str = "http://127.0.0.1:9/v1";

/// Starts cwcoded as systemd does: a copy of `listener` as fd 3, `LISTEN_PID` set to the pid
/// that runs cwcoded, `LISTEN_FDS=1`. Placing an fd at a given number takes `unsafe` in Rust,
/// so a shell does it: it inherits a duplicate made without close-on-exec, moves it to fd 3
/// and execs cwcoded in its own pid.
fn activate(home: &Home, listener: &UnixListener) -> Daemon {
    let passed = rustix::io::dup(listener).unwrap();
    let fd = passed.as_raw_fd();
    let redirect = if fd == 3 {
        String::new()
    } else {
        format!("exec 3<&{fd} {fd}<&-; ")
    };
    let script = format!(
        "{redirect}export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=cwcoded.socket; exec \"$0\""
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(bin("cwcoded"))
        .env("CWCODE_HOME", &home.paths.home)
        .env_remove("CWCODE_SOCKET")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(home))
        .spawn()
        .unwrap();
    // The child has its copy; ours must not linger in the test process.
    drop(passed);
    Daemon { child }
}

fn log_file(home: &Home) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.dir.path().join("cwcoded.stderr"))
        .unwrap()
}

fn daemon_log(home: &Home) -> String {
    std::fs::read_to_string(home.dir.path().join("cwcoded.stderr")).unwrap_or_default()
}

/// A JSON-RPC call as a plain HTTP POST on an already connected stream; its result.
fn call(home: &Home, mut stream: UnixStream, method: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}).to_string();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut response = String::new();
    if let Err(error) = stream.read_to_string(&mut response) {
        panic!(
            "no answer to {method} ({error}); cwcoded said:\n{}",
            daemon_log(home)
        );
    }
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    // hyper may answer with a chunked body.
    let json = &body[body.find('{').unwrap()..=body.rfind('}').unwrap()];
    let reply: Value = serde_json::from_str(json).unwrap();
    assert!(reply.get("error").is_none(), "{method} failed: {reply}");
    reply["result"].clone()
}

fn wait_for_exit(mut daemon: Daemon) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "cwcoded did not exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One of systemd's tools. CI installs Debian's `systemd` package for them; where they are
/// missing outside CI (macOS, a bare container) the test says so and passes.
fn systemd_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing: CI must `apt-get install -y systemd`"
        );
        eprintln!("skipped: {name} is not installed (apt-get install -y systemd)");
    }
    found
}

#[test]
fn cwcoded_serves_the_socket_passed_through_listen_fds_and_leaves_it_for_the_next_start() {
    let home = Home::new(NO_PROVIDER);
    let listener = UnixListener::bind(&home.paths.socket).unwrap();

    // Connected before any daemon runs: only one that accepts on the passed socket answers.
    let early = UnixStream::connect(&home.paths.socket).unwrap();
    let first = activate(&home, &listener);
    let info = call(&home, early, "daemon/info");
    assert_eq!(info["pid"], first.child.id(), "{info}");
    assert_eq!(info["socket"], home.paths.socket.display().to_string());

    let stop = UnixStream::connect(&home.paths.socket).unwrap();
    call(&home, stop, "daemon/shutdown");
    let status = wait_for_exit(first);
    assert!(status.success(), "{status}: {}", daemon_log(&home));
    assert!(
        home.paths.socket.exists(),
        "the socket belongs to systemd and stays after the daemon stops"
    );
    assert!(!home.paths.pid_file().exists());

    // systemd's next activation: the same socket, a new daemon, a client already waiting.
    let waiting = UnixStream::connect(&home.paths.socket).unwrap();
    let second = activate(&home, &listener);
    let info = call(&home, waiting, "daemon/info");
    assert_eq!(info["pid"], second.child.id(), "{info}");
    assert!(second.terminate().success(), "{}", daemon_log(&home));
    assert!(home.paths.socket.exists());
}

#[test]
fn activation_variables_meant_for_another_process_are_ignored() {
    // LISTEN_FDS without LISTEN_PID, or with another pid, passes nothing to us (sd_listen_fds):
    // cwcoded binds its own socket and does not touch fd 3.
    for pid in [None, Some("1")] {
        let home = Home::new(NO_PROVIDER);
        let mut command = home.command("cwcoded");
        command
            .env("LISTEN_FDS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&home));
        match pid {
            Some(pid) => command.env("LISTEN_PID", pid),
            None => command.env_remove("LISTEN_PID"),
        };
        let daemon = Daemon {
            child: command.spawn().unwrap(),
        };
        wait_for_socket(&home.paths.socket);
        let stream = UnixStream::connect(&home.paths.socket).unwrap();
        let info = call(&home, stream, "daemon/info");
        assert_eq!(info["pid"], daemon.child.id(), "{info}");
        assert!(daemon.terminate().success(), "{}", daemon_log(&home));
    }
}

#[test]
fn systemd_socket_activate_starts_cwcoded_on_the_first_connection() {
    let Some(tool) = systemd_tool("systemd-socket-activate") else {
        return;
    };
    let home = Home::new(NO_PROVIDER);
    // It binds the socket, waits for a connection, then execs cwcoded in its own pid with
    // only the variables given here (and LISTEN_*) in the environment.
    let child = Command::new(tool)
        .arg("--listen")
        .arg(&home.paths.socket)
        .arg(format!(
            "--setenv=CWCODE_HOME={}",
            home.paths.home.display()
        ))
        .arg("--setenv=RUST_LOG=info")
        .arg(bin("cwcoded"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(&home))
        .spawn()
        .unwrap();
    let daemon = Daemon { child };
    let start = Instant::now();
    let stream = loop {
        match UnixStream::connect(&home.paths.socket) {
            Ok(stream) => break stream,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("{error}: {}", daemon_log(&home)),
        }
    };
    let info = call(&home, stream, "daemon/info");
    assert_eq!(info["pid"], daemon.child.id(), "{info}");
    assert!(daemon.terminate().success(), "{}", daemon_log(&home));
}

/// A copy of the template `name` as the instance a user enables (`@0123abcd.`), since verify
/// refuses a bare template.
fn instance(units: &Path, dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join(name.replace("@.", "@0123abcd."));
    std::fs::copy(units.join(name), &copy).unwrap();
    copy
}

#[test]
fn the_user_units_pass_systemd_analyze_verify() {
    let Some(tool) = systemd_tool("systemd-analyze") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // verify checks that ExecStart= (%h/.cargo/bin/cwcoded) exists: a home where it does.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::os::unix::fs::symlink(bin("cwcoded"), home.join(".cargo/bin/cwcoded")).unwrap();
    std::os::unix::fs::symlink(bin("cwcode-cli"), home.join(".cargo/bin/cwcode-cli")).unwrap();
    // A user manager's runtime directory, which `--user` needs even for verify.
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, Permissions::from_mode(0o700)).unwrap();
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd");
    let output = Command::new(tool)
        .args(["--user", "verify"])
        .arg(units.join("cwcoded.socket"))
        .arg(units.join("cwcoded.service"))
        // The scheduled goal loop, as one instance of its template and its timer.
        .arg(instance(
            &units,
            &dir.path().join("units"),
            "cwcode-goal@.service",
        ))
        .arg(instance(
            &units,
            &dir.path().join("units"),
            "cwcode-goal@.timer",
        ))
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    // verify exits 0 on warnings (an unknown key, a bad value): any output is a failure too.
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "{}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
