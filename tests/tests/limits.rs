//! No client can lock the daemon up (SPEC §4): idle WebSockets and slow-body requests neither
//! keep others out nor stay open for ever, `/health` answers outside the limits, and a
//! connection beyond the limits is refused clearly and at once.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cwcode_tests::Home;
use cwcode_tests::hostile::{Trickler, health, idle_websocket, slow_body, wait_until_closed};

const HOSTILE_EACH: usize = 200;
/// The WebSocket ping closes a silent socket about 20 s after it opened, a slow body is cut at
/// 10 s after its head, an idle connection at 10 s; this leaves room for a loaded machine.
const CLOSED_WITHIN: Duration = Duration::from_secs(45);

fn ls_answers(home: &Home) -> Duration {
    let started = Instant::now();
    let output = home.cli(&["ls"]);
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "cwcode-cli ls failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

#[test]
fn idle_websockets_and_slow_bodies_lock_nobody_out_and_are_closed() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let socket = &home.paths.socket;
    home.new_session("code");

    let websockets: Vec<UnixStream> = (0..HOSTILE_EACH).map(|_| idle_websocket(socket)).collect();
    let slow: Arc<Vec<UnixStream>> =
        Arc::new((0..HOSTILE_EACH).map(|_| slow_body(socket)).collect());
    let trickler = Trickler::start(Arc::clone(&slow), Duration::from_millis(200));

    for _ in 0..5 {
        let elapsed = ls_answers(&home);
        eprintln!("cwcode-cli ls beside 400 hostile connections: {elapsed:?}");
        assert!(elapsed < Duration::from_secs(2), "ls took {elapsed:?}");
        let (status, response) = health(socket);
        assert_eq!(status, 200, "/health: {response}");
    }

    let opened = Instant::now();
    let slow_answers = wait_until_closed(&slow, CLOSED_WITHIN)
        .unwrap_or_else(|index| panic!("slow-body connection {index} was never closed"));
    drop(trickler);
    eprintln!("slow bodies closed after {:?}", opened.elapsed());
    for answer in &slow_answers {
        let answer = String::from_utf8_lossy(answer);
        assert!(
            answer.starts_with("HTTP/1.1 408") && answer.contains("send the whole request"),
            "a slow body got {answer:?}"
        );
    }
    wait_until_closed(&websockets, CLOSED_WITHIN)
        .unwrap_or_else(|index| panic!("silent WebSocket {index} was never closed"));
    eprintln!("websockets closed after {:?}", opened.elapsed());
    ls_answers(&home);
}

#[test]
fn beyond_the_limit_connections_are_refused_clearly_and_health_still_answers() {
    let home = Home::new("http://127.0.0.1:9/v1");
    let _daemon = home.start_daemon();
    let socket = &home.paths.socket;

    // More connections than the daemon serves at once (512 plus 32 for /health), all silent.
    let silent: Vec<UnixStream> = (0..700)
        .map(|_| UnixStream::connect(socket).unwrap())
        .collect();

    let refused = wait_until_closed(&silent[600..], Duration::from_secs(5))
        .expect("connections beyond the limit are closed at once");
    for answer in &refused {
        let answer = String::from_utf8_lossy(answer);
        assert!(
            answer.starts_with("HTTP/1.1 503") && answer.contains("close idle clients"),
            "a refused connection got {answer:?}"
        );
    }

    // The few health-only places free themselves within seconds, so /health answers.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, response) = health(socket);
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/health never answered: {response}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A client shut out is told why at once instead of waiting (the silent connections hold
    // every full place for 10 s).
    let started = Instant::now();
    let output = home.cli(&["ls"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && stderr.contains("serving all the connections it can")
            && stderr.contains("close idle clients"),
        "ls beside a full house: {stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));

    // Silent connections are closed by the daemon, and then everyone is served again.
    wait_until_closed(&silent, CLOSED_WITHIN)
        .unwrap_or_else(|index| panic!("silent connection {index} was never closed"));
    ls_answers(&home);
}
