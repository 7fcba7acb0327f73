//! Sessions (SPEC §3, §5): metadata in `session.json`, everything that happened in the journal,
//! a prompt queue, and one runner task that executes turns one at a time.

pub mod accounting;
pub mod approvals;
pub mod goal_loop;
mod load;
#[cfg(test)]
mod queue_tests;
mod recovery;
mod runner;

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use cwcode_protocol::paths::Paths;
use cwcode_protocol::{
    ApprovalDecision, CacheReport, CheckpointInfo, CostReport, CreateSessionParams, EventKind,
    EventPage, Mode, PriceTable, RewindResult, SendResult, SessionInfo, SessionProblem,
    SessionStatus, TodoItem,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent;
use crate::agent::approvals::Answer;
use crate::agent::instructions::{self, InstructionFiles};
use crate::goals::LoopState;
use crate::memory::MemoryStore;
use crate::provider::ConfigError;
use crate::provider::pool::NoDefaultProfile;
use crate::provider::pool::Pool;
use crate::sandbox::Workspace;
use crate::store::{
    CheckpointStore, Durability, SharedStore, SharedStoreError, StoreOptions, WriteError,
    atomic_write, fix_for,
};
use crate::tools::{BackgroundProcesses, Registry, TodoList};

use crate::agent::history::Conversation;
use crate::journal::JournalError;
use crate::journal::bus::{EventLog, Subscription};
use crate::util::now_rfc3339;
use approvals::{Approvals, RespondError};
use load::{default_title, last_todos, next_turn, pending_prompts, write_new_session};
use recovery::{OpenTurn, close_turn, put_files_back};

const INFO_FILE: &str = "session.json";
const JOURNAL_FILE: &str = "events.jsonl";
const SYSTEM_PROMPT_FILE: &str = "system.md";
/// Session directories are their owner's only (SPEC §3), whatever the umask.
const SESSION_DIR_MODE: u32 = 0o700;
/// The longest wait between two attempts to write a journal that refused an event.
const JOURNAL_RETRY_MAX: Duration = Duration::from_secs(5);
/// How long shutdown and delete wait for a cancelled turn to wind down.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session `{0}`: list them with `cwcode-cli ls`")]
    NotFound(String),
    #[error("`{prefix}` matches {count} sessions: give more of the id")]
    Ambiguous { prefix: String, count: usize },
    #[error("workspace `{path}` is not usable: {source}")]
    InvalidWorkspace {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Profile(#[from] ConfigError),
    /// No profile was named and none is the default: the text says how to choose one.
    #[error(transparent)]
    NoDefaultProfile(#[from] NoDefaultProfile),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(
        "{}: cannot journal the prompt, so it was not accepted (nothing is queued): {}",
        .0.path().display(),
        .0.cause()
    )]
    PromptNotJournalled(#[source] JournalError),
    /// A rewind (or its undo) changed the files, the journal refused to record it, and the
    /// files were put back: nothing changed.
    #[error(
        "{}: the {what} could not be journalled, so the files were put back and nothing changed: {}",
        .journal.path().display(),
        .journal.cause()
    )]
    RewindNotJournalled {
        what: &'static str,
        #[source]
        journal: JournalError,
    },
    /// As above, but putting the files back failed too: files and history disagree.
    #[error(
        "{}: the {what} changed the files but could not be journalled ({}), and putting them back \
         failed too ({put_back}): check the workspace with `git status` once there is space",
        .journal.path().display(),
        .journal.cause()
    )]
    RewindNotJournalledNorUndone {
        what: &'static str,
        #[source]
        journal: JournalError,
        put_back: SharedStoreError,
    },
    #[error("{}: session {id} could not be loaded: {damage}", .dir.display())]
    Damaged {
        id: String,
        dir: PathBuf,
        /// What `doctor` says about it, as recorded when loading failed.
        damage: String,
    },
    #[error("cannot {action} {}: {source}{}", .path.display(), fix_for(.source))]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode the session's info: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Approval(#[from] RespondError),
    #[error("the daemon is shutting down: retry once it has restarted")]
    ShuttingDown,
    #[error("the journal could not be read: {0}")]
    ReadTask(#[source] tokio::task::JoinError),
    #[error("a turn is running or queued: cancel it (`cwcode-cli cancel`) or wait, then retry")]
    Busy,
    #[error(transparent)]
    Checkpoint(#[from] SharedStoreError),
    #[error("this session has no checkpoint store (see the daemon log for why)")]
    NoCheckpointStore,
    #[error(transparent)]
    Goals(#[from] crate::goals::GoalsError),
}

/// What every session shares with the daemon.
pub struct Shared {
    pub paths: Paths,
    pub providers: Pool,
    pub registry: Arc<Registry>,
    /// The notes of `remember`/`recall`, shared by every session.
    pub memory: Arc<MemoryStore>,
    /// The MCP servers of `config.json`, started when a session first needs them.
    pub mcp: crate::mcp::McpServers,
    /// Fired once when the daemon starts draining.
    pub stopping: CancellationToken,
}

type RewindReply = oneshot::Sender<Result<RewindResult, SessionError>>;

/// What the runner does next, in order.
enum Work {
    Prompt { turn: u32, text: String },
    Compact,
    Rewind { turn: u32, reply: RewindReply },
    UndoRewind { reply: RewindReply },
    GoalCycle { cycle: u32 },
}

struct Control {
    info: SessionInfo,
    /// The cancel token of the turn running now.
    running: Option<CancellationToken>,
    next_turn: u32,
    queue: Option<mpsc::UnboundedSender<Work>>,
    /// Set while a goal-loop cycle's turn runs, so that `goal/stop` knows the runner will
    /// announce the stop.
    goal_turn_running: bool,
}

pub struct Session {
    id: String,
    dir: PathBuf,
    log: Arc<EventLog>,
    mode: watch::Sender<Mode>,
    approvals: Arc<Approvals>,
    control: Mutex<Control>,
    /// Prompts accepted and not yet finished, the running one included.
    in_flight: AtomicU32,
    runner: Mutex<Option<JoinHandle<()>>>,
    /// `bash_background` processes live as long as the session's runner.
    background: Arc<BackgroundProcesses>,
    todos: Arc<TodoList>,
    checkpoints: Option<SharedStore>,
    goal_state: Mutex<LoopState>,
    shared: Arc<Shared>,
    /// What loading repaired or left out, for `doctor`.
    load_notes: Vec<String>,
}

impl Session {
    fn control(&self) -> MutexGuard<'_, Control> {
        self.control
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn goal_state(&self) -> MutexGuard<'_, LoopState> {
        self.goal_state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues work for the runner.
    fn enqueue(&self, work: Work) -> Result<(), SessionError> {
        let control = self.control();
        let queue = control.queue.as_ref().ok_or(SessionError::ShuttingDown)?;
        queue.send(work).map_err(|_| SessionError::ShuttingDown)?;
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The session's profile prices, when it has some.
    fn prices(&self) -> Option<PriceTable> {
        let profile = self.control().info.profile.clone();
        self.shared
            .providers
            .config()
            .profile(&profile)
            .ok()
            .and_then(|profile| profile.pricing.as_ref())
            .map(PriceTable::from)
    }

    pub fn info(&self) -> SessionInfo {
        let goal = self.goal_progress();
        let control = self.control();
        let mut info = control.info.clone();
        info.mode = *self.mode.borrow();
        info.turns = control.next_turn - 1;
        info.last_seq = self.log.last_seq();
        info.status = if self.approvals.pending() > 0 {
            SessionStatus::AwaitingApproval
        } else if control.running.is_some() {
            SessionStatus::Running
        } else {
            SessionStatus::Idle
        };
        info.goal = goal;
        info
    }

    /// Saves `session.json`. The journal is the truth and loading reconciles the two, so a
    /// failure here (a full disk) is logged and the operation that changed the session stands.
    fn persist_info(&self) {
        self.control().info.updated = now_rfc3339();
        if let Err(error) = write_info(&self.dir, &self.info()) {
            tracing::error!(session = %self.id, %error, "cannot save the session's metadata");
        }
    }

    /// Accepts a prompt; it runs now, or after the turns before it. An error means it was not
    /// accepted: nothing of it is queued or journalled.
    pub fn send(&self, text: String) -> Result<SendResult, SessionError> {
        let (turn, queued) = {
            let mut control = self.control();
            let Some(queue) = control.queue.clone() else {
                return Err(SessionError::ShuttingDown);
            };
            if queue.is_closed() {
                return Err(SessionError::ShuttingDown);
            }
            let turn = control.next_turn;
            // Sends are serialised by the control lock; the runner only ever lowers the count,
            // so at worst a prompt is journalled as queued just as the queue empties.
            let queued = self.in_flight.load(Ordering::SeqCst) > 0;
            if queued {
                self.log
                    .publish(EventKind::PromptQueued {
                        turn,
                        prompt: text.clone(),
                    })
                    .map_err(SessionError::PromptNotJournalled)?;
            }
            let sent = queue.send(Work::Prompt { turn, text });
            // A queued prompt is journalled: if the runner has just stopped, it runs after the
            // restart, so it is accepted all the same.
            if sent.is_err() && !queued {
                return Err(SessionError::ShuttingDown);
            }
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            control.next_turn += 1;
            (turn, queued)
        };
        self.persist_info();
        Ok(SendResult { turn, queued })
    }

    /// Queues a compaction of the older turns; it runs after the work queued before it.
    pub fn compact(&self) -> Result<(), SessionError> {
        let control = self.control();
        let Some(queue) = &control.queue else {
            return Err(SessionError::ShuttingDown);
        };
        queue
            .send(Work::Compact)
            .map_err(|_| SessionError::ShuttingDown)?;
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    pub async fn checkpoints(&self) -> Result<Vec<CheckpointInfo>, SessionError> {
        self.store()?.list().await.map_err(SessionError::Checkpoint)
    }

    fn store(&self) -> Result<&SharedStore, SessionError> {
        self.checkpoints
            .as_ref()
            .ok_or(SessionError::NoCheckpointStore)
    }

    /// Rewinds files and history to before prompt `turn` (`None`: undoes the last rewind). It
    /// runs in the session's runner, which owns the history, and only while no turn runs.
    pub async fn rewind(&self, turn: Option<u32>) -> Result<RewindResult, SessionError> {
        self.store()?;
        let (reply, answer) = oneshot::channel();
        {
            let control = self.control();
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                return Err(SessionError::Busy);
            }
            let queue = control.queue.as_ref().ok_or(SessionError::ShuttingDown)?;
            let work = match turn {
                Some(turn) => Work::Rewind { turn, reply },
                None => Work::UndoRewind { reply },
            };
            queue.send(work).map_err(|_| SessionError::ShuttingDown)?;
            self.in_flight.fetch_add(1, Ordering::SeqCst);
        }
        answer.await.map_err(|_| SessionError::ShuttingDown)?
    }

    async fn rewind_now(
        &self,
        conversation: &mut Conversation,
        turn: Option<u32>,
    ) -> Result<RewindResult, SessionError> {
        let store = self.store()?;
        let (result, kind) = match turn {
            Some(turn) => {
                let result = store
                    .restore_to_before(turn)
                    .await
                    .map_err(SessionError::Checkpoint)?;
                let kind = EventKind::Rewound {
                    result: result.clone(),
                };
                (result, kind)
            }
            None => {
                let result = store
                    .undo_restore()
                    .await
                    .map_err(SessionError::Checkpoint)?;
                let kind = EventKind::RewindUndone {
                    result: result.clone(),
                };
                (result, kind)
            }
        };
        let event = match self.log.publish(kind) {
            Ok(event) => event,
            Err(error) => return Err(put_files_back(store, turn, &result, error).await),
        };
        conversation.apply(&event.kind);
        if let Err(error) = self.log.sync() {
            tracing::error!(session = %self.id, %error, "cannot sync the journal after a rewind");
        }
        Ok(result)
    }

    /// Cancels the running turn, if any. Queued prompts stay queued.
    pub fn cancel(&self) -> bool {
        match &self.control().running {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Switches the mode once the journal has recorded the switch, so a refused write changes
    /// nothing.
    pub fn set_mode(&self, mode: Mode) -> Result<SessionInfo, SessionError> {
        // The control lock serialises mode changes with each other.
        let changed = {
            let _control = self.control();
            let changed = *self.mode.borrow() != mode;
            if changed {
                self.log.publish(EventKind::ModeChanged { mode })?;
                self.mode.send_replace(mode);
            }
            changed
        };
        if changed {
            self.persist_info();
        }
        Ok(self.info())
    }

    /// Points the session at another provider profile; a turn in flight finishes on the old
    /// one. The new provider's cache is cold, so the next request is billed in full.
    pub fn set_profile(&self, profile: &str) -> Result<SessionInfo, SessionError> {
        self.shared.providers.check_profile(profile)?;
        let changed = {
            let mut control = self.control();
            let changed = control.info.profile != profile;
            if changed {
                self.log.publish(EventKind::ProfileChanged {
                    profile: profile.to_owned(),
                })?;
                control.info.profile = profile.to_owned();
            }
            changed
        };
        if changed {
            self.persist_info();
        }
        Ok(self.info())
    }

    pub fn subscribe(&self, since: Option<u64>) -> Result<Subscription, SessionError> {
        Ok(self.log.subscribe(since)?)
    }

    /// A page of the journal after `since`, read from disk off the async workers.
    pub async fn events(&self, since: u64, limit: usize) -> Result<EventPage, SessionError> {
        let log = Arc::clone(&self.log);
        let (events, more) = tokio::task::spawn_blocking(move || log.page(since, limit))
            .await
            .map_err(SessionError::ReadTask)??;
        let next_since = events.last().map_or(since, |event| event.seq);
        Ok(EventPage {
            events,
            next_since,
            more,
        })
    }

    pub fn respond(
        &self,
        request_id: &str,
        decision: ApprovalDecision,
        reason: Option<String>,
        pattern: Option<String>,
    ) -> Result<(), SessionError> {
        Ok(self.approvals.resolve(
            request_id,
            Answer {
                decision,
                reason,
                pattern,
            },
        )?)
    }

    pub fn cache_report(&self) -> Result<CacheReport, SessionError> {
        Ok(accounting::cache_report(&self.id, &self.log.read_all()?))
    }

    pub fn is_running(&self) -> bool {
        self.control().running.is_some()
    }

    /// Stops taking prompts, cancels the running turn and waits for the runner to end.
    async fn stop(&self) {
        {
            let mut control = self.control();
            control.queue = None;
            if let Some(token) = &control.running {
                token.cancel();
            }
        }
        let runner = self
            .runner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(runner) = runner
            && tokio::time::timeout(DRAIN_TIMEOUT, runner).await.is_err()
        {
            tracing::warn!(session = %self.id, "turn did not wind down in time");
        }
        self.background.kill_all();
    }
}

fn write_info(dir: &Path, info: &SessionInfo) -> Result<(), SessionError> {
    let mut bytes = serde_json::to_vec_pretty(info)?;
    bytes.push(b'\n');
    Ok(atomic_write(
        &dir.join(INFO_FILE),
        &bytes,
        Durability::Synced,
    )?)
}

/// The session's checkpoint store. Without one the session still works, without `/rewind`.
fn open_checkpoints(
    shared: &Shared,
    session_dir: &Path,
    workspace: &str,
) -> Option<CheckpointStore> {
    let options = StoreOptions {
        excluded_dirs: vec![shared.paths.home.clone()],
        ..StoreOptions::default()
    };
    match CheckpointStore::open_with(session_dir, Path::new(workspace), options) {
        Ok(store) => Some(store),
        Err(error) => {
            tracing::error!(session = %session_dir.display(), %error, "no checkpoints for this session");
            None
        }
    }
}

/// The goal loop's saved state; a damaged file is reported and the loop starts afresh.
fn load_goal_state(session_dir: &Path) -> LoopState {
    LoopState::load(&goal_loop::state_path(session_dir)).unwrap_or_else(|error| {
        tracing::error!(%error, "cannot read the goal loop state; it starts afresh");
        LoopState::default()
    })
}

/// A todo list whose every change is journalled and broadcast.
fn todo_list(log: &Arc<EventLog>, todos: Vec<TodoItem>) -> TodoList {
    let log = Arc::clone(log);
    TodoList::new(todos, move |todos| {
        let event = EventKind::TodoUpdated {
            todos: todos.to_vec(),
        };
        if let Err(error) = log.publish(event) {
            tracing::error!(%error, "cannot journal the todo list");
        }
    })
}

/// A session directory read back and ready to start.
struct Opened {
    dir: PathBuf,
    info: SessionInfo,
    log: Arc<EventLog>,
    conversation: Conversation,
    next_turn: u32,
    pending: Vec<Work>,
    todos: Vec<TodoItem>,
    /// An open turn that could not be closed yet: the runner closes it before anything else.
    unclosed: Option<OpenTurn>,
    notes: Vec<String>,
    checkpoints: Option<CheckpointStore>,
    approvals: Approvals,
}

/// A session that could not be loaded: listed with the reason, so it is not lost from sight.
struct Damaged {
    dir: PathBuf,
    info: SessionInfo,
}

/// All sessions of this daemon.
pub struct Sessions {
    shared: Arc<Shared>,
    /// Runs config.json's hooks on every session's events.
    hooks: crate::hooks::HookRunner,
    sessions: RwLock<BTreeMap<String, Arc<Session>>>,
    damaged: RwLock<BTreeMap<String, Damaged>>,
}

impl Sessions {
    /// Loads every session under `sessions/`. One that cannot be read stays on disk untouched
    /// and is listed as damaged, with the reason.
    pub fn load(shared: Arc<Shared>) -> Self {
        let settings_of = Arc::clone(&shared);
        let sessions = Self {
            hooks: crate::hooks::HookRunner::new(Arc::new(move || crate::hooks::HookSettings {
                hooks: settings_of.providers.config().hooks().clone(),
                secret_values: settings_of.providers.secret_values(),
            })),
            shared,
            sessions: RwLock::new(BTreeMap::new()),
            damaged: RwLock::new(BTreeMap::new()),
        };
        let dir = sessions.shared.paths.sessions_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return sessions,
            Err(error) => {
                tracing::error!(dir = %dir.display(), %error, "cannot list sessions");
                return sessions;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !load::looks_like_session(&path) {
                continue;
            }
            match sessions.open(&path) {
                Ok(session) => sessions.insert(session),
                Err(reason) => {
                    tracing::error!(dir = %path.display(), %reason, "cannot load session; listed as damaged");
                    let info = load::damaged_info(&path, reason);
                    sessions
                        .damaged
                        .write()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .insert(info.id.clone(), Damaged { dir: path, info });
                }
            }
        }
        sessions
    }

    fn map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Session>>> {
        self.sessions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn damaged_map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Damaged>> {
        self.damaged
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn insert(&self, session: Arc<Session>) {
        self.sessions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(session.id.clone(), session);
    }

    /// Loads one session directory, or says why it cannot be used.
    fn open(&self, dir: &Path) -> Result<Arc<Session>, String> {
        let default_profile = self.shared.providers.default_profile().unwrap_or_default();
        let loaded = load::load(dir, &default_profile)?;
        let journal_path = dir.join(JOURNAL_FILE);
        let log = Arc::new(EventLog::new(&journal_path, loaded.journal));
        let events = loaded.events;
        let mut conversation = Conversation::rebuild(&loaded.system_prompt, &events);
        let mut notes = loaded.notes;
        let mut checkpoints = open_checkpoints(&self.shared, dir, &loaded.info.cwd);
        let unclosed =
            OpenTurn::interrupted(&log, &events, checkpoints.as_mut(), &self.shared.registry)
                .and_then(|open| match close_turn(&log, &mut conversation, &open) {
                    Ok(()) => None,
                    Err(error) => {
                        notes.push(format!(
                            "the interrupted turn {} is not closed yet: {error}",
                            open.turn
                        ));
                        Some(open)
                    }
                });
        let session = self.start(Opened {
            dir: dir.to_owned(),
            info: loaded.info,
            pending: pending_prompts(&events),
            next_turn: next_turn(&events),
            todos: last_todos(&events),
            approvals: Approvals::from_journal(&events),
            log,
            conversation,
            unclosed,
            notes,
            checkpoints,
        });
        if let Err(error) = session.resume_goal_loop() {
            tracing::error!(session = %session.id, %error, "cannot resume the goal loop");
        }
        Ok(session)
    }

    fn start(&self, opened: Opened) -> Arc<Session> {
        let Opened {
            dir,
            info,
            log,
            conversation,
            next_turn,
            pending,
            todos,
            unclosed,
            notes,
            checkpoints,
            approvals,
        } = opened;
        self.hooks.watch(&info.id, &info.cwd, &log);
        let (queue, prompts) = mpsc::unbounded_channel();
        let in_flight = pending.len() as u32;
        let todos = todo_list(&log, todos);
        let session_dir = dir.clone();
        for prompt in pending {
            // The receiver is alive: it is moved into the runner below.
            let _ = queue.send(prompt);
        }
        let session = Arc::new(Session {
            id: info.id.clone(),
            dir,
            log,
            mode: watch::Sender::new(info.mode),
            approvals: Arc::new(approvals),
            control: Mutex::new(Control {
                info: info.clone(),
                running: None,
                next_turn,
                queue: Some(queue),
                goal_turn_running: false,
            }),
            in_flight: AtomicU32::new(in_flight),
            runner: Mutex::new(None),
            background: Arc::new(BackgroundProcesses::default()),
            todos: Arc::new(todos),
            checkpoints: checkpoints.map(SharedStore::new),
            goal_state: Mutex::new(load_goal_state(&session_dir)),
            shared: Arc::clone(&self.shared),
            load_notes: notes,
        });
        let runner = tokio::spawn(runner::run_prompts(
            Arc::clone(&session),
            Arc::clone(&self.shared),
            conversation,
            prompts,
            unclosed,
        ));
        *session
            .runner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(runner);
        session
    }

    pub fn create(&self, params: CreateSessionParams) -> Result<SessionInfo, SessionError> {
        if self.shared.stopping.is_cancelled() {
            return Err(SessionError::ShuttingDown);
        }
        let workspace = Workspace::new(Path::new(&params.cwd)).map_err(|error| {
            SessionError::InvalidWorkspace {
                path: params.cwd.clone(),
                source: error,
            }
        })?;
        if !workspace.root().is_dir() {
            return Err(SessionError::InvalidWorkspace {
                path: params.cwd,
                source: std::io::ErrorKind::NotADirectory.into(),
            });
        }
        let profile = match params.profile {
            Some(profile) => {
                self.shared.providers.check_profile(&profile)?;
                profile
            }
            None => self.shared.providers.default_profile()?,
        };
        let id = uuid::Uuid::now_v7().simple().to_string();
        let dir = self.shared.paths.session_dir(&id);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(SESSION_DIR_MODE)
            .create(&dir)
            .map_err(|source| SessionError::File {
                action: "create the session directory",
                path: dir.clone(),
                source,
            })?;
        let root = workspace.root().to_string_lossy().into_owned();
        let now = now_rfc3339();
        let info = SessionInfo {
            id: id.clone(),
            title: params
                .title
                .unwrap_or_else(|| default_title(workspace.root())),
            cwd: root,
            profile,
            mode: params.mode.unwrap_or_default(),
            status: SessionStatus::Idle,
            created: now.clone(),
            updated: now,
            turns: 0,
            last_seq: 0,
            damaged: None,
            goal: None,
        };
        let instructions = InstructionFiles::new(&self.shared.paths.home, workspace.root()).read();
        let system_prompt = instructions::with_instructions(
            agent::prompt::system_prompt(workspace.root()),
            &instructions,
        );
        let written = write_new_session(&dir, &info, &system_prompt);
        let journal = match written {
            Ok(journal) => journal,
            Err(error) => {
                // Half a session would be listed as damaged on the next start: leave none.
                if let Err(cleanup) = std::fs::remove_dir_all(&dir) {
                    tracing::error!(dir = %dir.display(), %cleanup, "cannot remove a session that failed to be created");
                }
                return Err(error);
            }
        };
        let journal_path = dir.join(JOURNAL_FILE);
        let log = Arc::new(EventLog::new(&journal_path, journal));
        let conversation = Conversation::rebuild(&system_prompt, &[]);
        let checkpoints = open_checkpoints(&self.shared, &dir, &info.cwd);
        let session = self.start(Opened {
            dir,
            info,
            log,
            conversation,
            next_turn: 1,
            pending: Vec::new(),
            todos: Vec::new(),
            unclosed: None,
            notes: Vec::new(),
            checkpoints,
            approvals: Approvals::default(),
        });
        let info = session.info();
        self.insert(session);
        Ok(info)
    }

    /// The full id of the session (loaded or damaged) that `id` or a unique prefix names.
    fn resolve(&self, id: &str) -> Result<String, SessionError> {
        let map = self.map();
        let damaged = self.damaged_map();
        if map.contains_key(id) || damaged.contains_key(id) {
            return Ok(id.to_owned());
        }
        let mut matches: Vec<&String> = map
            .range(id.to_owned()..)
            .take_while(|(key, _)| key.starts_with(id))
            .map(|(key, _)| key)
            .chain(
                damaged
                    .range(id.to_owned()..)
                    .take_while(|(key, _)| key.starts_with(id))
                    .map(|(key, _)| key),
            )
            .take(2)
            .collect();
        match (matches.pop(), matches.is_empty()) {
            (Some(key), true) if !id.is_empty() => Ok(key.clone()),
            (Some(_), false) => Err(SessionError::Ambiguous {
                prefix: id.to_owned(),
                count: map
                    .keys()
                    .chain(damaged.keys())
                    .filter(|key| key.starts_with(id))
                    .count(),
            }),
            _ => Err(SessionError::NotFound(id.to_owned())),
        }
    }

    /// Finds a session by its id or a unique prefix of it. A damaged one is an error that
    /// names the file and the fix.
    pub fn get(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        let id = self.resolve(id)?;
        if let Some(session) = self.map().get(&id) {
            return Ok(Arc::clone(session));
        }
        match self.damaged_map().get(&id) {
            Some(damaged) => Err(SessionError::Damaged {
                dir: damaged.dir.clone(),
                damage: damaged
                    .info
                    .damaged
                    .clone()
                    .unwrap_or_else(|| "unknown damage".to_owned()),
                id,
            }),
            None => Err(SessionError::NotFound(id)),
        }
    }

    /// Sessions, most recently updated first; damaged ones included, marked as such.
    pub fn list(&self) -> Vec<SessionInfo> {
        let mut list: Vec<SessionInfo> =
            self.map().values().map(|session| session.info()).collect();
        list.extend(
            self.damaged_map()
                .values()
                .map(|damaged| damaged.info.clone()),
        );
        list.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
        list
    }

    /// Sessions that could not be loaded, or were loaded only after a repair, for `doctor`.
    pub fn problems(&self) -> Vec<SessionProblem> {
        let mut problems: Vec<SessionProblem> = self
            .damaged_map()
            .values()
            .map(|damaged| SessionProblem {
                session_id: damaged.info.id.clone(),
                path: damaged.dir.display().to_string(),
                problem: damaged.info.damaged.clone().unwrap_or_default(),
                loaded: false,
            })
            .collect();
        for session in self.map().values() {
            problems.extend(session.load_notes.iter().map(|note| SessionProblem {
                session_id: session.id.clone(),
                path: session.dir.display().to_string(),
                problem: note.clone(),
                loaded: true,
            }));
        }
        problems
    }

    /// Hook runs that failed lately, for `doctor`.
    pub fn hook_failures(&self) -> Vec<String> {
        self.hooks.failures()
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    pub fn running_turns(&self) -> usize {
        self.map()
            .values()
            .filter(|session| session.is_running())
            .count()
    }

    /// The session's cache figures priced with its profile's table.
    pub fn cost_report(&self, id: &str) -> Result<CostReport, SessionError> {
        let session = self.get(id)?;
        let cache = session.cache_report()?;
        let profile = session.control().info.profile.clone();
        Ok(accounting::cost_report(&cache, &profile, session.prices()))
    }

    /// Deletes a session and its files; a damaged one too, which is how it is got rid of.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let id = self.resolve(id)?;
        let damaged = self
            .damaged
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&id);
        let dir = match damaged {
            Some(damaged) => damaged.dir,
            None => {
                let session = self.get(&id)?;
                session.stop().await;
                self.sessions
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .remove(&session.id);
                session.dir.clone()
            }
        };
        std::fs::remove_dir_all(&dir).map_err(|source| SessionError::File {
            action: "delete the session directory",
            path: dir.clone(),
            source,
        })
    }

    /// Ends every running turn as interrupted and waits for the journals to be flushed. The
    /// caller has fired `stopping` first.
    pub async fn drain(&self) {
        let sessions: Vec<Arc<Session>> = self.map().values().cloned().collect();
        futures::future::join_all(sessions.iter().map(|session| session.stop())).await;
    }
}
