//! The session's prompt queue, run in-process: a real [`Sessions`] registry over a temporary home
//! whose provider profile points at a loopback fake that streams real SSE and can hold an answer
//! open until the test releases it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{CreateSessionParams, Event, EventKind, Mode, TurnOutcome};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Session, Sessions, Shared};
use crate::memory::MemoryStore;
use crate::provider::pool::Pool;
use crate::tools::Registry;

const DEADLINE: Duration = Duration::from_secs(10);

/// One scripted answer: streamed whole, or its first word held back until `release`.
enum Reply {
    Text(&'static str),
    Held {
        text: &'static str,
        reached: Arc<Notify>,
        release: Arc<Notify>,
    },
}

#[derive(Default)]
struct Fake {
    replies: Mutex<VecDeque<Reply>>,
    /// The last user message of every request, in order.
    prompts: Mutex<Vec<String>>,
}

impl Fake {
    fn reply(&self, reply: Reply) {
        self.replies.lock().unwrap().push_back(reply);
    }

    fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }
}

fn frame(delta: Value, finish_reason: Option<&str>) -> Result<Bytes, std::io::Error> {
    let chunk = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    });
    Ok(Bytes::from(format!("data: {chunk}\n\n")))
}

fn closing() -> Vec<Result<Bytes, std::io::Error>> {
    vec![
        frame(json!({}), Some("stop")),
        Ok(Bytes::from_static(b"data: [DONE]\n\n")),
    ]
}

async fn complete(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap();
    let last_user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    fake.prompts.lock().unwrap().push(last_user);
    let reply = fake
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .expect("the fake has an answer left");
    let stream = match reply {
        Reply::Text(text) => {
            let mut frames = vec![frame(json!({"role": "assistant", "content": text}), None)];
            frames.extend(closing());
            futures::stream::iter(frames).boxed()
        }
        Reply::Held {
            text,
            reached,
            release,
        } => {
            let first = frame(json!({"role": "assistant", "content": "thinking "}), None);
            let rest = async move {
                reached.notify_one();
                release.notified().await;
                let mut frames = vec![frame(json!({"content": text}), None)];
                frames.extend(closing());
                futures::stream::iter(frames)
            };
            futures::stream::iter([first])
                .chain(futures::stream::once(rest).flatten())
                .boxed()
        }
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// A daemon's state without its socket: the home, the fake provider, the session registry.
struct Daemon {
    _home: tempfile::TempDir,
    workspace: std::path::PathBuf,
    fake: Arc<Fake>,
    shared: Arc<Shared>,
    sessions: Sessions,
}

impl Daemon {
    async fn start() -> Self {
        let fake = Arc::new(Fake::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(complete))
            .with_state(Arc::clone(&fake));
        tokio::spawn(async move { axum::serve(listener, app).await });

        let home = tempfile::tempdir().unwrap();
        let workspace = home.path().join("work");
        std::fs::create_dir_all(&workspace).unwrap();
        let config = json!({
            "default_profile": "fake",
            "profiles": {"fake": {"base_url": url, "model": "fake-model", "api_key": "sk-test"}}
        });
        let paths = Paths::new(home.path().join("home"), None);
        std::fs::create_dir_all(&paths.home).unwrap();
        std::fs::write(paths.config(), config.to_string()).unwrap();
        let (shared, sessions) = Self::open(&paths);
        Self {
            _home: home,
            workspace,
            fake,
            shared,
            sessions,
        }
    }

    fn open(paths: &Paths) -> (Arc<Shared>, Sessions) {
        let shared = Arc::new(Shared {
            paths: paths.clone(),
            providers: Pool::load(paths.config()).unwrap(),
            registry: Arc::new(Registry::standard()),
            memory: Arc::new(MemoryStore::new(paths.memory_db())),
            mcp: crate::mcp::McpServers::default(),
            stopping: CancellationToken::new(),
        });
        let sessions = Sessions::load(Arc::clone(&shared));
        (shared, sessions)
    }

    /// Stops as the daemon does on SIGTERM, then loads everything again from disk.
    async fn restart(&mut self) {
        self.shared.stopping.cancel();
        self.sessions.drain().await;
        let paths = self.shared.paths.clone();
        (self.shared, self.sessions) = Self::open(&paths);
    }

    fn create(&self) -> Arc<Session> {
        let info = self
            .sessions
            .create(CreateSessionParams {
                cwd: self.workspace.display().to_string(),
                profile: None,
                mode: Some(Mode::Code),
                title: None,
            })
            .unwrap();
        self.sessions.get(&info.id).unwrap()
    }
}

/// Waits until turn `turn` of `session` has finished, and returns how.
async fn finished(session: &Session, turn: u32) -> TurnOutcome {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let events: Vec<Event> = session.log.read_all().unwrap();
        if let Some(outcome) = events.iter().find_map(|event| match &event.kind {
            EventKind::TurnFinished {
                turn: finished,
                outcome,
                ..
            } if *finished == turn => Some(*outcome),
            _ => None,
        }) {
            return outcome;
        }
        assert!(
            Instant::now() < deadline,
            "turn {turn} never finished: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn started_prompts(session: &Session) -> Vec<String> {
    session
        .log
        .read_all()
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::TurnStarted { prompt, .. } => Some(prompt),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn prompts_sent_while_a_turn_runs_wait_and_then_run_in_order() {
    let daemon = Daemon::start().await;
    let reached = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    daemon.fake.reply(Reply::Held {
        text: "first answer",
        reached: Arc::clone(&reached),
        release: Arc::clone(&release),
    });
    daemon.fake.reply(Reply::Text("second answer"));
    daemon.fake.reply(Reply::Text("third answer"));
    let session = daemon.create();

    let first = session.send("first".to_owned()).unwrap();
    assert!(!first.queued);
    tokio::time::timeout(DEADLINE, reached.notified())
        .await
        .unwrap();
    let second = session.send("second".to_owned()).unwrap();
    let third = session.send("third".to_owned()).unwrap();
    assert!(second.queued && third.queued);
    assert_eq!((second.turn, third.turn), (2, 3));
    assert_eq!(daemon.fake.prompts(), ["first"], "nothing else is sent yet");

    release.notify_one();
    assert_eq!(finished(&session, 3).await, TurnOutcome::Completed);
    assert_eq!(finished(&session, 1).await, TurnOutcome::Completed);
    assert_eq!(daemon.fake.prompts(), ["first", "second", "third"]);
    assert_eq!(started_prompts(&session), ["first", "second", "third"]);
}

#[tokio::test]
async fn a_prompt_queued_when_the_daemon_stops_runs_after_the_restart() {
    let mut daemon = Daemon::start().await;
    let reached = Arc::new(Notify::new());
    daemon.fake.reply(Reply::Held {
        text: "never finished",
        reached: Arc::clone(&reached),
        release: Arc::new(Notify::new()),
    });
    daemon.fake.reply(Reply::Text("answered after the restart"));
    let session = daemon.create();
    session.send("first".to_owned()).unwrap();
    tokio::time::timeout(DEADLINE, reached.notified())
        .await
        .unwrap();
    assert!(session.send("queued".to_owned()).unwrap().queued);

    daemon.restart().await;
    assert_eq!(finished(&session, 1).await, TurnOutcome::Interrupted);
    let reloaded = daemon.sessions.get(&session.id).unwrap();
    drop(session);
    assert_eq!(finished(&reloaded, 2).await, TurnOutcome::Completed);
    assert_eq!(daemon.fake.prompts(), ["first", "queued"]);
    assert_eq!(
        started_prompts(&reloaded),
        ["first", "queued"],
        "the interrupted prompt is not run again, the queued one runs once"
    );
}
