//! Limits (SPEC §4): no client can lock the others out. Every connection takes a slot, held for
//! as long as its socket lives (an upgraded WebSocket too); when the slots are gone a few more
//! connections may still ask `/health` and get a clear 503 for anything else, and beyond those a
//! connection is told so and closed at once. A request must arrive whole in bounded time (a
//! slowloris head or body is answered 408 and closed), an HTTP connection idle between requests
//! is closed, and WebSockets are pinged so a dead or silent one is closed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use jsonrpsee::core::BoxError;
use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse, PingConfig, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use cwcode_protocol::methods;

use super::plain_http;

/// Connections served at once: far more than one user's clients (every attached terminal,
/// follower and script holds one), few enough for the file descriptors and memory they cost.
const MAX_CONNECTIONS: usize = 512;
/// Connections beyond `MAX_CONNECTIONS` that may still ask `/health`.
const HEALTH_ONLY_CONNECTIONS: usize = 32;
/// How long a health-only connection may stay open in all.
const HEALTH_ONLY_DEADLINE: Duration = Duration::from_secs(2);
/// File descriptors kept for everything but connections (journals, tools, providers).
const RESERVED_DESCRIPTORS: u64 = 256;
/// A request head must arrive within this, counted from when the server waits for it: on a
/// fresh connection, and between requests on a kept-alive one (so it is the idle timeout too).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The body must be complete within this after its head arrived.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// WebSockets are pinged this often; one that has answered no ping for `WS_SILENCE_LIMIT` is
/// closed at the next ping after it (about 20 s). The official clients answer by themselves.
const WS_PING_INTERVAL: Duration = Duration::from_secs(10);
const WS_SILENCE_LIMIT: Duration = Duration::from_secs(15);
/// Subscriptions one WebSocket may hold; a client watches one session or a handful.
const MAX_SUBSCRIPTIONS_PER_CONNECTION: u32 = 128;
/// A write to a client that makes no progress for this long fails and the connection closes: a
/// client that stopped reading cannot hold its socket, and the messages queued for it, forever.
/// Longer than a subscription's send deadline, so a slow reader first gets its
/// `subscription_ended` marker and can resume.
const WRITE_STALL_LIMIT: Duration = Duration::from_secs(15);
/// Refusals are logged at most this often, with a count, so a flood cannot flood the log.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A connection let in: its place in the limits, given back when its socket is dropped, and
/// whether it may only ask `/health` (every full slot was taken).
pub struct Admitted {
    slot: OwnedSemaphorePermit,
    health_only: bool,
}

/// The connection slots and the log of refusals; owned by the accept loop.
pub struct Limits {
    max_connections: usize,
    full: Arc<Semaphore>,
    health_only: Arc<Semaphore>,
    refused_since_log: u64,
    last_refusal_log: Option<Instant>,
}

impl Limits {
    /// Sizes the limits to the file descriptors this process may open, raising its soft limit
    /// to the hard one first.
    pub fn new() -> Self {
        let max_connections = connection_budget();
        Self {
            max_connections,
            full: Arc::new(Semaphore::new(max_connections)),
            health_only: Arc::new(Semaphore::new(HEALTH_ONLY_CONNECTIONS)),
            refused_since_log: 0,
            last_refusal_log: None,
        }
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// jsonrpsee's own configuration: its connection guard (which answers 429) is sized so it
    /// never binds before these limits do, and WebSockets are pinged.
    pub fn server_config(&self) -> ServerConfig {
        let jsonrpsee_connections = self.max_connections + HEALTH_ONLY_CONNECTIONS;
        ServerConfig::builder()
            .max_connections(u32::try_from(jsonrpsee_connections).unwrap_or(u32::MAX))
            .max_subscriptions_per_connection(MAX_SUBSCRIPTIONS_PER_CONNECTION)
            .enable_ws_ping(
                PingConfig::new()
                    .ping_interval(WS_PING_INTERVAL)
                    .inactive_limit(WS_SILENCE_LIMIT),
            )
            .build()
    }

    /// Decides at once, without waiting for a slot; `None` is a refusal (see `refuse`).
    pub fn admit(&mut self) -> Option<Admitted> {
        if let Ok(slot) = Arc::clone(&self.full).try_acquire_owned() {
            return Some(Admitted {
                slot,
                health_only: false,
            });
        }
        let admission = Arc::clone(&self.health_only)
            .try_acquire_owned()
            .ok()
            .map(|slot| Admitted {
                slot,
                health_only: true,
            });
        self.refused_since_log += 1;
        let now = Instant::now();
        if self
            .last_refusal_log
            .is_none_or(|last| now.duration_since(last) >= REFUSAL_LOG_INTERVAL)
        {
            tracing::warn!(
                max_connections = self.max_connections,
                refused = self.refused_since_log,
                "connection limit reached: refusing new connections (only /health is answered)"
            );
            self.refused_since_log = 0;
            self.last_refusal_log = Some(now);
        }
        admission
    }
}

/// Raises the soft file-descriptor limit to the hard one and returns how many connections fit.
fn connection_budget() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(error) => tracing::debug!(%error, "cannot raise the file descriptor limit"),
        }
    }
    let Some(descriptors) = limit.current else {
        return MAX_CONNECTIONS;
    };
    let available = descriptors
        .saturating_sub(RESERVED_DESCRIPTORS + HEALTH_ONLY_CONNECTIONS as u64)
        .max(16);
    let budget = usize::try_from(available)
        .unwrap_or(MAX_CONNECTIONS)
        .min(MAX_CONNECTIONS);
    if budget < MAX_CONNECTIONS {
        tracing::warn!(
            descriptors,
            max_connections = budget,
            "few file descriptors: fewer connections served at once"
        );
    }
    budget
}

/// The answer to a connection that gets nothing, written without reading its request.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 80\r\nConnection: close\r\n\r\ncwcoded is serving all the connections it can; close idle clients or retry soon\n";

/// Tells a refused connection why, if its socket takes the few bytes at once, and closes it.
pub fn refuse(stream: UnixStream) {
    // The std stream writes straight away (still non-blocking) where tokio's would first wait
    // for the reactor to have seen the new socket writable.
    if let Ok(stream) = stream.into_std() {
        let _ = std::io::Write::write(&mut &stream, REFUSAL);
    }
}

/// A connection's socket together with its slot, so the slot is held for as long as the socket
/// lives, also after hyper hands it over to a WebSocket; its writes fail once stalled for
/// `WRITE_STALL_LIMIT`.
struct SlottedStream {
    stream: UnixStream,
    _slot: OwnedSemaphorePermit,
    /// Running while a write waits for the client to read.
    write_stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl SlottedStream {
    fn new(stream: UnixStream, slot: OwnedSemaphorePermit) -> Self {
        Self {
            stream,
            _slot: slot,
            write_stall: None,
        }
    }

    /// Passes a write's progress on, and turns a wait longer than `WRITE_STALL_LIMIT` into an
    /// error.
    fn bound_stall<T>(
        &mut self,
        cx: &mut Context<'_>,
        progress: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if progress.is_ready() {
            self.write_stall = None;
            return progress;
        }
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL_LIMIT)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for SlottedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for SlottedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.bound_stall(cx, progress)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.stream).poll_flush(cx);
        this.bound_stall(cx, progress)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let progress = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.bound_stall(cx, progress)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Serves one admitted connection with the jsonrpsee `service` until it ends, or until `stopped`
/// resolves (then the request in hand is finished first). Health-only connections get `/health`
/// and a 503 for anything else, and are closed after `HEALTH_ONLY_DEADLINE` whatever they do.
pub async fn serve<S>(
    stream: UnixStream,
    admitted: Admitted,
    service: S,
    stopped: impl Future<Output = ()>,
) -> Result<(), hyper::Error>
where
    S: tower::Service<HttpRequest, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let Admitted { slot, health_only } = admitted;
    let io = TokioIo::new(SlottedStream::new(stream, slot));
    let handler =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let service = service.clone();
            answer(request, service, health_only)
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(!health_only);
    let connection = builder.serve_connection(io, handler).with_upgrades();
    tokio::pin!(connection, stopped);
    let served = async {
        tokio::select! {
            served = &mut connection => served,
            () = &mut stopped => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        }
    };
    if health_only {
        // Dropping the connection closes the socket.
        tokio::time::timeout(HEALTH_ONLY_DEADLINE, served)
            .await
            .unwrap_or(Ok(()))
    } else {
        served.await
    }
}

/// One request: its body bounded in time, passed to jsonrpsee, and the answer replaced by a
/// clear one when the body came too slowly.
async fn answer<S>(
    mut request: hyper::Request<hyper::body::Incoming>,
    service: S,
    health_only: bool,
) -> Result<HttpResponse, BoxError>
where
    S: tower::Service<HttpRequest, Response = HttpResponse, Error = BoxError>,
{
    if health_only
        && !(request.method() == http::Method::GET && request.uri().path() == methods::HEALTH_PATH)
    {
        return Ok(plain_response(
            http::StatusCode::SERVICE_UNAVAILABLE,
            "cwcoded is serving all the connections it can; close idle clients or retry soon\n",
        ));
    }
    if let Some(response) = plain_http::prepare(&mut request) {
        return Ok(response);
    }
    let expired = Arc::new(AtomicBool::new(false));
    let malformed = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        HttpBody::new(DeadlineBody {
            inner: body,
            deadline: tokio::time::Instant::now() + BODY_TIMEOUT,
            sleep: None,
            expired: Arc::clone(&expired),
            malformed: Arc::clone(&malformed),
        })
    });
    let response = service.oneshot(request).await?;
    if expired.load(Ordering::Relaxed) {
        return Ok(plain_response(
            http::StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the request body did not arrive within {} s: send the whole request at once\n",
                BODY_TIMEOUT.as_secs()
            ),
        ));
    }
    // jsonrpsee answers a body it cannot read with "500 Internal error"; the fault is the
    // client's, so it is told what was wrong.
    if malformed.load(Ordering::Relaxed) {
        return Ok(plain_response(
            http::StatusCode::BAD_REQUEST,
            "the request body was cut short or its chunked framing is malformed: send the \
             whole body, exactly as long as its Content-Length says\n",
        ));
    }
    Ok(response)
}

fn plain_response(status: http::StatusCode, text: &str) -> HttpResponse {
    let mut response = HttpResponse::new(HttpBody::from(text.to_owned()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// A request body that fails once its deadline passes, however steadily its bytes trickle in
/// (a timeout between frames would be reset by every byte).
struct DeadlineBody<B> {
    inner: B,
    deadline: tokio::time::Instant,
    /// Made only when the body is first waited for: most bodies are in hand at once.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
    /// Set when the client's bytes do not make a body (a chunk that does not parse, a body
    /// shorter than its Content-Length).
    malformed: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", BODY_TIMEOUT.as_secs())]
struct BodyTooSlow;

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            if matches!(frame, Some(Err(_))) {
                this.malformed.store(true, Ordering::Relaxed);
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(BodyTooSlow.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_to_a_client_that_stopped_reading_fails_after_the_stall_limit() {
        let (ours, _never_read) = UnixStream::pair().unwrap();
        let slot = Arc::new(Semaphore::new(1)).acquire_owned().await.unwrap();
        let mut stream = SlottedStream::new(ours, slot);
        let started = tokio::time::Instant::now();
        let chunk = vec![b'x'; 64 * 1024];
        let error = loop {
            if let Err(error) = stream.write_all(&chunk).await {
                break error;
            }
        };
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(
            started.elapsed() >= WRITE_STALL_LIMIT,
            "{:?}",
            started.elapsed()
        );
    }

    /// A body that yields one byte each `every`, forever.
    struct Trickle {
        every: Duration,
        next: Pin<Box<tokio::time::Sleep>>,
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.next.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let every = self.every;
            self.next = Box::pin(tokio::time::sleep(every));
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    #[tokio::test]
    async fn a_trickling_body_fails_at_its_deadline() {
        let expired = Arc::new(AtomicBool::new(false));
        let limit = Duration::from_millis(300);
        let body = DeadlineBody {
            inner: Trickle {
                every: Duration::from_millis(10),
                next: Box::pin(tokio::time::sleep(Duration::ZERO)),
            },
            deadline: tokio::time::Instant::now() + limit,
            sleep: None,
            expired: Arc::clone(&expired),
            malformed: Arc::new(AtomicBool::new(false)),
        };
        let started = tokio::time::Instant::now();
        assert!(body.collect().await.is_err());
        assert!(expired.load(Ordering::Relaxed));
        let elapsed = started.elapsed();
        assert!(
            elapsed >= limit && elapsed < limit * 5,
            "failed after {elapsed:?}"
        );
    }

    #[tokio::test]
    async fn a_body_in_hand_passes() {
        let body = DeadlineBody {
            inner: http_body_util::Full::new(Bytes::from_static(b"{}")),
            deadline: tokio::time::Instant::now(),
            sleep: None,
            expired: Arc::new(AtomicBool::new(false)),
            malformed: Arc::new(AtomicBool::new(false)),
        };
        assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
    }

    #[test]
    fn the_refusal_announces_its_length() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
    }
}
