//! Clients that misbehave on purpose, spoken raw over the daemon's socket: WebSockets that open
//! and then say nothing (not even a pong), and HTTP requests whose body trickles in a byte at a
//! time. Shared by the limits tests and the limits benchmark.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Reads an HTTP response head (up to the blank line) a byte at a time, so nothing after it is
/// consumed.
fn read_head(stream: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Opens a WebSocket (the upgrade is answered 101) and returns it, to be left silent.
pub fn idle_websocket(socket: &Path) -> UnixStream {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    let head = read_head(&mut stream);
    assert!(
        head.starts_with("HTTP/1.1 101"),
        "the WebSocket upgrade was not accepted: {head:?}"
    );
    stream
}

/// Sends a POST head announcing a large body, and one byte of it.
pub fn slow_body(socket: &Path) -> UnixStream {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Content-Length: 100000\r\n\r\n{",
        )
        .unwrap();
    stream
}

/// Writes one more body byte to each stream every `every` until dropped.
pub struct Trickler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Trickler {
    pub fn start(streams: Arc<Vec<UnixStream>>, every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                for mut stream in streams.iter() {
                    // A stream the daemon closed fails here; that is what the test waits for.
                    let _ = stream.write_all(b" ");
                }
                std::thread::sleep(every);
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Trickler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `GET /health`: the status code and the body.
pub fn health(socket: &Path) -> (u16, String) {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // A refused connection may be answered and closed before the request is written.
    let _ =
        stream.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, response)
}

/// Waits until the daemon has closed every stream (EOF or reset), up to `within`; returns what
/// each stream received before it was closed, or the index of the first still open.
pub fn wait_until_closed(streams: &[UnixStream], within: Duration) -> Result<Vec<Vec<u8>>, usize> {
    let deadline = Instant::now() + within;
    let mut received = vec![Vec::new(); streams.len()];
    let mut open: Vec<usize> = (0..streams.len()).collect();
    for stream in streams {
        stream.set_nonblocking(true).unwrap();
    }
    let mut buffer = [0u8; 4096];
    loop {
        open.retain(|&index| {
            let mut stream = &streams[index];
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) => return false,
                    Ok(n) => received[index].extend_from_slice(&buffer[..n]),
                    Err(error) if error.kind() == ErrorKind::WouldBlock => return true,
                    Err(_) => return false,
                }
            }
        });
        match open.first() {
            None => return Ok(received),
            Some(&index) if Instant::now() >= deadline => return Err(index),
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether the daemon still holds `stream` open: nothing closed it and no answer ended it.
pub fn still_open(stream: &UnixStream) -> bool {
    use rustix::net::{RecvFlags, recv};
    let mut first = [0u8; 5];
    match recv(stream, &mut first, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        // (bytes read, bytes the message had)
        Ok((0, _)) => false,
        Ok((n, _)) => !first[..n].starts_with(b"HTTP/"),
        Err(error) => error == rustix::io::Errno::AGAIN,
    }
}
