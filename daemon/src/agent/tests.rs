//! The turn loop run in-process against a scripted model and a real journal in a temporary
//! directory: every test checks what a user would see (the outcome, the journal) and that the
//! history stays one a provider accepts and a restart rebuilds identically.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cwcode_protocol::{AllowRule, ApprovalDecision, Event, EventKind, Mode, ToolCall, TurnOutcome};
use futures::future::BoxFuture;
use tokio::sync::{Notify, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::approvals::{Answer, ApprovalGate};
use super::instructions::InstructionFiles;
use super::{CompactScope, TurnEnv, TurnReport, compact, run_turn};
use crate::agent::history::{Conversation, summary_message, unanswered_calls};
use crate::journal::Journal;
use crate::journal::bus::EventLog;
use crate::provider::{
    AssistantMessage, ChatRequest, Completion, Message, Model, ProviderError, StreamDelta,
    StreamEvent,
};
use crate::store::{CheckpointStore, SharedStore};
use crate::tools::{Registry, test_context};

const SYSTEM: &str = "you are tested";
const PROFILE: &str = "scripted";
/// No test may take longer than this; a hang fails instead of stalling the suite.
const DEADLINE: Duration = Duration::from_secs(10);

/// One scripted answer of the model.
enum Step {
    /// Streams `text` as one delta and answers with it and `calls`.
    Answer {
        text: String,
        calls: Vec<ToolCall>,
    },
    /// Reports `events` as the provider's retries would, then answers `text`.
    Retried {
        events: Vec<StreamEvent>,
        text: String,
    },
    Fail(ProviderError),
    /// Streams `text`, notifies `reached`, then never finishes: only a cancel ends it.
    Hang {
        text: String,
        reached: Arc<Notify>,
    },
}

/// What the loop sent in one model call.
#[derive(Debug, Clone)]
struct Sent {
    messages: Vec<Message>,
    keep_reasoning: bool,
}

#[derive(Default)]
struct Script {
    steps: VecDeque<Step>,
    sent: Vec<Sent>,
    context_window: Option<u64>,
}

/// A model answering from a queue of [`Step`]s; clones (and its reasoning-keeping variant)
/// share the queue and the record of what was sent.
#[derive(Clone, Default)]
struct ScriptedModel {
    script: Arc<Mutex<Script>>,
    keep_reasoning: bool,
}

impl ScriptedModel {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    fn push(&self, step: Step) {
        self.script().steps.push_back(step);
    }

    fn answer(&self, text: &str) {
        self.push(Step::Answer {
            text: text.to_owned(),
            calls: Vec::new(),
        });
    }

    fn call(&self, calls: Vec<ToolCall>) {
        self.push(Step::Answer {
            text: String::new(),
            calls,
        });
    }

    fn sent(&self) -> Vec<Sent> {
        self.script().sent.clone()
    }
}

impl Model for ScriptedModel {
    fn profile_name(&self) -> &str {
        PROFILE
    }

    fn context_window(&self) -> Option<u64> {
        self.script().context_window
    }

    fn keeping_reasoning(&self) -> Arc<dyn Model> {
        Arc::new(ScriptedModel {
            keep_reasoning: true,
            ..self.clone()
        })
    }

    fn resolve_model(&self) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async { Ok(()) })
    }

    fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8> {
        format!("{:?}", request.messages).into_bytes()
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        let step = {
            let mut script = self.script();
            script.sent.push(Sent {
                messages: request.messages.to_vec(),
                keep_reasoning: self.keep_reasoning,
            });
            script.steps.pop_front()
        };
        Box::pin(async move {
            let answering = async {
                match step {
                    None => Err(ProviderError::Protocol("the script ran out".to_owned())),
                    Some(Step::Fail(error)) => Err(error),
                    Some(Step::Answer { text, calls }) => {
                        if !text.is_empty() {
                            on_event(StreamEvent::Delta(StreamDelta::Content(text.clone())));
                        }
                        Ok(Completion {
                            message: AssistantMessage {
                                content: text,
                                reasoning: None,
                                tool_calls: calls,
                            },
                            usage: None,
                            finish_reason: Some("stop".to_owned()),
                        })
                    }
                    Some(Step::Retried { events, text }) => {
                        for event in events {
                            on_event(event);
                        }
                        Ok(Completion {
                            message: AssistantMessage {
                                content: text,
                                ..AssistantMessage::default()
                            },
                            usage: None,
                            finish_reason: Some("stop".to_owned()),
                        })
                    }
                    Some(Step::Hang { text, reached }) => {
                        on_event(StreamEvent::Delta(StreamDelta::Content(text)));
                        reached.notify_one();
                        std::future::pending().await
                    }
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ProviderError::Cancelled),
                result = answering => result,
            }
        })
    }
}

fn bash(id: &str, command: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "bash".to_owned(),
        arguments: serde_json::json!({ "command": command }).to_string(),
    }
}

fn read_file(id: &str, path: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "read_file".to_owned(),
        arguments: serde_json::json!({ "path": path }).to_string(),
    }
}

/// The session's side of approvals, as small as the loop needs: requests a test answers by id,
/// and the tools answered "always".
#[derive(Default)]
struct Gate {
    pending: Mutex<HashMap<String, (String, oneshot::Sender<Answer>)>>,
    always: Mutex<Vec<AllowRule>>,
}

impl Gate {
    fn resolve(&self, request_id: &str, answer: Answer) {
        let (tool, sender) = self.pending.lock().unwrap().remove(request_id).unwrap();
        if answer.decision == ApprovalDecision::Always {
            let rule = AllowRule::new(&tool, answer.pattern.as_deref()).unwrap();
            self.always.lock().unwrap().push(rule);
        }
        sender.send(answer).unwrap();
    }

    fn pending(&self) -> usize {
        self.pending.lock().unwrap().len()
    }
}

impl ApprovalGate for Gate {
    fn is_always_allowed(&self, tool: &str, arguments: &str) -> bool {
        let always = self.always.lock().unwrap();
        always.iter().any(|rule| rule.allows(tool, arguments))
    }

    fn open(&self, tool: &str, _arguments: &str) -> (String, oneshot::Receiver<Answer>) {
        let mut pending = self.pending.lock().unwrap();
        let request_id = format!("t{}", pending.len() + 1);
        let (sender, receiver) = oneshot::channel();
        pending.insert(request_id.clone(), (tool.to_owned(), sender));
        (request_id, receiver)
    }

    fn withdraw(&self, request_id: &str) {
        self.pending.lock().unwrap().remove(request_id);
    }
}

/// One session's worth of turn loop: a workspace, a journal, the scripted model.
struct Harness {
    dir: tempfile::TempDir,
    model: ScriptedModel,
    mode: watch::Sender<Mode>,
    cancel: CancellationToken,
    approvals: Arc<Gate>,
    env: TurnEnv,
    conversation: Conversation,
}

impl Harness {
    fn new(mode: Mode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let journal_path = dir.path().join("events.jsonl");
        let (journal, _) = Journal::open(&journal_path).unwrap();
        let log = Arc::new(EventLog::new(&journal_path, journal));
        let model = ScriptedModel::default();
        let (mode, mode_receiver) = watch::channel(mode);
        let tools = test_context(dir.path());
        let cancel = tools.cancel.clone();
        let approvals = Arc::new(Gate::default());
        let env = TurnEnv {
            log,
            registry: Arc::new(Registry::standard()),
            provider: Arc::new(model.clone()),
            task_provider: None,
            mode: mode_receiver,
            approvals: Arc::clone(&approvals) as Arc<dyn ApprovalGate>,
            tools,
            stopping: CancellationToken::new(),
            checkpoints: None,
            instructions: InstructionFiles::new(&dir.path().join("home"), dir.path()),
        };
        Self {
            dir,
            model,
            mode,
            cancel,
            approvals,
            env,
            conversation: Conversation::rebuild(SYSTEM, &[]),
        }
    }

    async fn turn(&mut self, turn: u32, prompt: &str) -> TurnReport {
        let running = run_turn(&self.env, &mut self.conversation, turn, prompt.to_owned());
        tokio::time::timeout(DEADLINE, running)
            .await
            .expect("the turn ended in time")
            .unwrap()
    }

    /// Runs a turn while `act` drives it from outside (answers approvals, cancels).
    async fn turn_with(
        &mut self,
        turn: u32,
        prompt: &str,
        act: impl Future<Output = ()>,
    ) -> TurnReport {
        let running = run_turn(&self.env, &mut self.conversation, turn, prompt.to_owned());
        let (report, ()) = tokio::time::timeout(DEADLINE, async { tokio::join!(running, act) })
            .await
            .expect("the turn ended in time");
        report.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.env.log.read_all().unwrap()
    }

    fn tool_results(&self) -> Vec<(String, String, bool)> {
        self.events()
            .into_iter()
            .filter_map(|event| match event.kind {
                EventKind::ToolCallFinished {
                    call_id,
                    output,
                    is_error,
                    ..
                } => Some((call_id, output, is_error)),
                _ => None,
            })
            .collect()
    }

    /// The history a provider would accept, and the one a restart rebuilds from the journal.
    fn assert_consistent(&self) {
        assert!(
            unanswered_calls(&self.conversation.messages).is_empty(),
            "every tool call is answered: {:#?}",
            self.conversation.messages
        );
        let rebuilt = Conversation::rebuild(SYSTEM, &self.events());
        assert_eq!(rebuilt.messages, self.conversation.messages);
        assert_eq!(rebuilt.keep_reasoning, self.conversation.keep_reasoning);
        assert_eq!(rebuilt.plan_announced, self.conversation.plan_announced);
        assert_eq!(rebuilt.instructions, self.conversation.instructions);
    }
}

/// Waits until the journal holds an event `pick` accepts, and returns what it picked.
async fn journalled<T>(log: &EventLog, pick: impl Fn(&EventKind) -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = log.read_all().unwrap().iter().find_map(|e| pick(&e.kind)) {
            return found;
        }
        assert!(Instant::now() < deadline, "the awaited event never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn approval_request(log: &EventLog, seen: usize) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let requests: Vec<String> = log
            .read_all()
            .unwrap()
            .into_iter()
            .filter_map(|event| match event.kind {
                EventKind::ApprovalRequested { request_id, .. } => Some(request_id),
                _ => None,
            })
            .collect();
        if let Some(request) = requests.get(seen) {
            return request.clone();
        }
        assert!(Instant::now() < deadline, "no approval was asked for");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn tool_message(sent: &Sent, call_id: &str) -> String {
    sent.messages
        .iter()
        .find_map(|message| match message {
            Message::Tool {
                tool_call_id,
                content,
            } if tool_call_id == call_id => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the model was shown no result for {call_id}"))
}

#[tokio::test]
async fn a_plain_answer_completes_the_turn_and_is_remembered() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.answer("hello there");
    let report = harness.turn(1, "hi").await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(
        harness.conversation.messages.last(),
        Some(&Message::Assistant(AssistantMessage {
            content: "hello there".to_owned(),
            ..AssistantMessage::default()
        }))
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn cancel_mid_stream_drops_the_partial_answer_and_the_next_turn_works() {
    let mut harness = Harness::new(Mode::Code);
    let reached = Arc::new(Notify::new());
    harness.model.push(Step::Hang {
        text: "half an ans".to_owned(),
        reached: Arc::clone(&reached),
    });
    let cancel = harness.cancel.clone();
    let report = harness
        .turn_with(1, "tell me", async {
            reached.notified().await;
            cancel.cancel();
        })
        .await;
    assert_eq!(report.outcome, TurnOutcome::Cancelled);
    assert!(
        !harness
            .conversation
            .messages
            .iter()
            .any(|message| matches!(message, Message::Assistant(_))),
        "a cancelled stream leaves no assistant message"
    );
    harness.assert_consistent();

    // The session's next turn has a fresh token, as the runner gives each turn its own.
    harness.env.tools.cancel = CancellationToken::new();
    harness.model.answer("a whole answer");
    assert_eq!(
        harness.turn(2, "again").await.outcome,
        TurnOutcome::Completed
    );
    let sent = harness.model.sent();
    let users: Vec<&Message> = sent[1]
        .messages
        .iter()
        .filter(|message| matches!(message, Message::User { .. }))
        .collect();
    assert_eq!(users.len(), 2, "both prompts are in the history");
    harness.assert_consistent();
}

#[tokio::test]
async fn cancel_mid_tool_stops_the_command_and_answers_every_call() {
    let mut harness = Harness::new(Mode::Yolo);
    harness.model.call(vec![
        bash("c1", "echo started; sleep 30"),
        bash("c2", "echo never"),
    ]);
    let cancel = harness.cancel.clone();
    let log = Arc::clone(&harness.env.log);
    let started = Instant::now();
    let report = harness
        .turn_with(1, "run it", async {
            journalled(&log, |kind| match kind {
                EventKind::ToolOutputDelta { text, .. } if text.contains("started") => Some(()),
                _ => None,
            })
            .await;
            cancel.cancel();
        })
        .await;
    assert_eq!(report.outcome, TurnOutcome::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the sleep was stopped, not waited out"
    );
    let results = harness.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "c1");
    assert!(results[0].2, "the cancelled command is an error");
    assert_eq!(results[1].0, "c2");
    assert_eq!(results[1].1, "not run: the turn ended before this call ran");
    assert_eq!(
        harness.model.sent().len(),
        1,
        "the model is not asked again"
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn cancel_while_an_approval_waits_withdraws_it() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.call(vec![bash("c1", "touch made")]);
    let cancel = harness.cancel.clone();
    let log = Arc::clone(&harness.env.log);
    let report = harness
        .turn_with(1, "make a file", async {
            approval_request(&log, 0).await;
            cancel.cancel();
        })
        .await;
    assert_eq!(report.outcome, TurnOutcome::Cancelled);
    assert_eq!(harness.approvals.pending(), 0);
    assert!(!harness.dir.path().join("made").exists());
    assert_eq!(
        harness.tool_results(),
        vec![(
            "c1".to_owned(),
            "not run: the turn was cancelled while this call awaited approval".to_owned(),
            true
        )]
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn a_denial_with_a_reason_reaches_the_model() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.call(vec![bash("c1", "touch made")]);
    harness.model.answer("understood");
    let log = Arc::clone(&harness.env.log);
    let approvals = Arc::clone(&harness.approvals);
    let report = harness
        .turn_with(1, "make a file", async {
            let request = approval_request(&log, 0).await;
            approvals.resolve(
                &request,
                Answer {
                    decision: ApprovalDecision::Deny,
                    reason: Some("write it under tmp/ instead".to_owned()),
                    pattern: None,
                },
            );
        })
        .await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert!(!harness.dir.path().join("made").exists());
    let shown = tool_message(&harness.model.sent()[1], "c1");
    assert!(shown.contains("write it under tmp/ instead"), "{shown}");
    assert!(shown.contains("denied"), "{shown}");
    harness.assert_consistent();
}

#[tokio::test]
async fn approve_always_stops_further_asks_for_that_tool() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.call(vec![bash("c1", "echo one")]);
    harness.model.call(vec![bash("c2", "echo two")]);
    harness.model.answer("done");
    let log = Arc::clone(&harness.env.log);
    let approvals = Arc::clone(&harness.approvals);
    let report = harness
        .turn_with(1, "echo twice", async {
            let request = approval_request(&log, 0).await;
            approvals.resolve(
                &request,
                Answer {
                    decision: ApprovalDecision::Always,
                    reason: None,
                    pattern: None,
                },
            );
        })
        .await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    let asked = harness
        .events()
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ApprovalRequested { .. }))
        .count();
    assert_eq!(asked, 1, "the second bash call ran without asking");
    let results = harness.tool_results();
    assert!(results[0].1.contains("one") && !results[0].2, "{results:?}");
    assert!(results[1].1.contains("two") && !results[1].2, "{results:?}");
    harness.assert_consistent();
}

#[tokio::test]
async fn the_storm_breaker_stops_three_identical_failures() {
    let mut harness = Harness::new(Mode::Code);
    for id in ["c1", "c2", "c3"] {
        harness.model.call(vec![read_file(id, "missing.txt")]);
    }
    harness.model.answer("never asked for");
    let report = harness.turn(1, "read it").await;
    assert_eq!(report.outcome, TurnOutcome::StormBroken);
    assert_eq!(harness.model.sent().len(), 3, "no fourth request");
    let explanation = harness
        .events()
        .into_iter()
        .find_map(|event| match event.kind {
            EventKind::StormBroken { tool, explanation } => Some((tool, explanation)),
            _ => None,
        })
        .expect("the storm is journalled");
    assert_eq!(explanation.0, "read_file");
    assert_eq!(
        harness.conversation.messages.last(),
        Some(&Message::Assistant(AssistantMessage {
            content: explanation.1,
            ..AssistantMessage::default()
        })),
        "the explanation is the turn's answer"
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn the_storm_breaker_stops_three_edits_that_change_nothing() {
    let mut harness = Harness::new(Mode::Yolo);
    std::fs::write(harness.dir.path().join("a.txt"), "one\n").unwrap();
    // Each call succeeds and ends where it began: one and back.
    let round_trip = serde_json::json!({
        "path": "a.txt",
        "edits": [
            {"old_string": "one", "new_string": "two"},
            {"old_string": "two", "new_string": "one"},
        ],
    })
    .to_string();
    for id in ["e1", "e2", "e3"] {
        harness.model.call(vec![ToolCall {
            id: id.to_owned(),
            name: "edit_file".to_owned(),
            arguments: round_trip.clone(),
        }]);
    }
    harness.model.answer("never asked for");

    let report = harness.turn(1, "edit it").await;

    assert_eq!(report.outcome, TurnOutcome::StormBroken);
    assert_eq!(harness.model.sent().len(), 3, "no fourth request");
    let results = harness.tool_results();
    assert!(
        results
            .iter()
            .all(|(_, output, is_error)| !is_error && output.starts_with("No change")),
        "the model sees the same text as before: {results:?}"
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn an_over_full_context_is_compacted_before_the_next_request() {
    let mut harness = Harness::new(Mode::Code);
    // Too small for anything: the first turn has nothing older to compact, the second does.
    harness.model.script().context_window = Some(1);
    harness.model.answer("the first answer");
    assert_eq!(
        harness.turn(1, "first").await.outcome,
        TurnOutcome::Completed
    );
    assert_eq!(harness.model.sent().len(), 1);

    harness.model.answer("we said hello");
    harness.model.answer("the second answer");
    assert_eq!(
        harness.turn(2, "second").await.outcome,
        TurnOutcome::Completed
    );
    let sent = harness.model.sent();
    assert_eq!(sent.len(), 3, "one summary request, then the turn's own");
    assert!(
        matches!(sent[1].messages.last(), Some(Message::User { content }) if content.contains("Summarise")),
        "the summary request ends with the instruction"
    );
    let expected_request = vec![
        Message::System {
            content: SYSTEM.to_owned(),
        },
        Message::User {
            content: summary_message("we said hello"),
        },
        Message::User {
            content: "second".to_owned(),
        },
    ];
    assert_eq!(sent[2].messages, expected_request);
    assert!(
        harness
            .events()
            .iter()
            .any(|event| matches!(&event.kind, EventKind::Compacted { summary, .. } if summary == "we said hello"))
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn compact_on_request_summarises_everything_and_says_when_it_cannot() {
    let mut harness = Harness::new(Mode::Code);
    let nothing = compact(
        &harness.env,
        &mut harness.conversation,
        CompactScope::Everything,
    )
    .await
    .unwrap();
    assert_eq!(nothing, Err("there is nothing yet to compact".to_owned()));

    harness.model.answer("an answer");
    harness.turn(1, "a prompt").await;
    harness.model.answer("   ");
    let empty = compact(
        &harness.env,
        &mut harness.conversation,
        CompactScope::Everything,
    )
    .await
    .unwrap();
    assert_eq!(empty, Err("the model returned an empty summary".to_owned()));

    harness.model.answer("all of it");
    compact(
        &harness.env,
        &mut harness.conversation,
        CompactScope::Everything,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        harness.conversation.messages,
        vec![
            Message::System {
                content: SYSTEM.to_owned()
            },
            Message::User {
                content: summary_message("all of it")
            },
        ]
    );
    harness.assert_consistent();
}

fn reasoning_refused() -> ProviderError {
    ProviderError::ReasoningMustBeKept {
        profile: PROFILE.to_owned(),
        body: "reasoning_content is required".to_owned(),
    }
}

#[tokio::test]
async fn a_provider_demanding_its_reasoning_back_gets_it_from_then_on() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.push(Step::Fail(reasoning_refused()));
    harness.model.answer("thought it through");
    harness.model.answer("still keeping it");
    assert_eq!(
        harness.turn(1, "think").await.outcome,
        TurnOutcome::Completed
    );
    assert!(harness.conversation.keep_reasoning);
    assert!(harness.events().iter().any(
        |event| matches!(&event.kind, EventKind::ReasoningKept { profile } if profile == PROFILE)
    ));
    assert_eq!(
        harness.turn(2, "again").await.outcome,
        TurnOutcome::Completed
    );
    let kept: Vec<bool> = harness
        .model
        .sent()
        .iter()
        .map(|sent| sent.keep_reasoning)
        .collect();
    assert_eq!(
        kept,
        [false, true, true],
        "the retry and later turns keep it"
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn a_second_reasoning_refusal_fails_the_turn_instead_of_looping() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.push(Step::Fail(reasoning_refused()));
    harness.model.push(Step::Fail(reasoning_refused()));
    let report = harness.turn(1, "think").await;
    assert_eq!(report.outcome, TurnOutcome::Failed);
    assert!(
        report
            .error
            .as_deref()
            .is_some_and(|error| error.contains("reasoning_history")),
        "{report:?}"
    );
    assert_eq!(harness.model.sent().len(), 2);
    harness.assert_consistent();
}

fn write_file(id: &str, path: &str, content: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "write_file".to_owned(),
        arguments: serde_json::json!({ "path": path, "content": content }).to_string(),
    }
}

#[tokio::test]
async fn a_checkpoint_that_cannot_be_saved_fails_the_turn_and_tells_the_user() {
    let mut harness = Harness::new(Mode::Yolo);
    std::fs::write(harness.dir.path().join("a.txt"), "before\n").unwrap();
    let session_dir = tempfile::tempdir().unwrap();
    // A file where the object directory belongs: saving `a.txt` before the write fails.
    let objects = session_dir.path().join("objects");
    std::fs::write(&objects, "in the way").unwrap();
    let store = CheckpointStore::open(session_dir.path(), harness.dir.path()).unwrap();
    harness.env.checkpoints = Some(SharedStore::new(store));
    harness.model.call(vec![
        write_file("c1", "a.txt", "after\n"),
        write_file("c2", "b.txt", "new\n"),
    ]);
    harness.model.answer("never asked for");

    let report = harness.turn(1, "write them").await;

    assert_eq!(report.outcome, TurnOutcome::Failed);
    let error = report.error.unwrap_or_default();
    assert!(error.contains("`write_file` was not run"), "{error}");
    assert!(error.contains(&objects.display().to_string()), "{error}");
    assert_eq!(
        std::fs::read_to_string(harness.dir.path().join("a.txt")).unwrap(),
        "before\n",
        "a change /rewind could not undo is not made"
    );
    assert!(!harness.dir.path().join("b.txt").exists());
    assert_eq!(
        harness.model.sent().len(),
        1,
        "the model is not asked again"
    );
    let finished = harness
        .events()
        .into_iter()
        .find_map(|event| match event.kind {
            EventKind::TurnFinished { outcome, error, .. } => Some((outcome, error)),
            _ => None,
        })
        .expect("the turn is journalled as finished");
    assert_eq!(finished, (TurnOutcome::Failed, Some(error)));
    let results = harness.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|(_, _, is_error)| *is_error));
    harness.assert_consistent();
}

#[tokio::test]
async fn plan_mode_refuses_mutating_tools_and_tells_the_model_once() {
    let mut harness = Harness::new(Mode::Plan);
    harness.model.call(vec![bash("c1", "touch made")]);
    harness.model.answer("here is the plan");
    assert_eq!(
        harness.turn(1, "plan").await.outcome,
        TurnOutcome::Completed
    );
    assert!(!harness.dir.path().join("made").exists());
    let shown = tool_message(&harness.model.sent()[1], "c1");
    assert!(shown.contains("not available in plan mode"), "{shown}");
    assert!(harness.conversation.plan_announced);

    harness.mode.send_replace(Mode::Code);
    harness.model.answer("carrying it out");
    harness.turn(2, "go").await;
    assert!(!harness.conversation.plan_announced);
    harness.assert_consistent();
}

#[tokio::test]
async fn a_broken_off_answer_is_marked_restarted_and_each_retry_is_announced() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.push(Step::Retried {
        events: vec![
            StreamEvent::Delta(StreamDelta::Content("half a".to_owned())),
            StreamEvent::Restart {
                retry: 1,
                reason: "the connection broke".to_owned(),
            },
            StreamEvent::Retrying {
                attempt: 2,
                max_attempts: 3,
                delay: Duration::from_millis(1500),
                reason: "the connection broke".to_owned(),
            },
            StreamEvent::Delta(StreamDelta::Content("whole answer".to_owned())),
        ],
        text: "whole answer".to_owned(),
    });
    assert_eq!(harness.turn(1, "hi").await.outcome, TurnOutcome::Completed);
    let streamed: Vec<EventKind> = harness
        .events()
        .into_iter()
        .map(|event| event.kind)
        .filter(|kind| {
            matches!(
                kind,
                EventKind::AssistantDelta { .. }
                    | EventKind::StreamRestarted { .. }
                    | EventKind::ProviderRetrying { .. }
                    | EventKind::AssistantMessage { .. }
            )
        })
        .collect();
    assert!(
        matches!(
            streamed.as_slice(),
            [
                EventKind::AssistantDelta { text: partial },
                EventKind::StreamRestarted { .. },
                EventKind::ProviderRetrying { attempt: 2, max_attempts: 3, delay_ms: 1500, .. },
                EventKind::AssistantDelta { text: retried },
                EventKind::AssistantMessage { content, .. },
            ] if partial == "half a" && retried == "whole answer" && content == "whole answer"
        ),
        "{streamed:#?}"
    );
    harness.assert_consistent();
}

#[tokio::test]
async fn an_agents_md_changed_mid_session_is_announced_once_at_the_end_of_the_history() {
    let mut harness = Harness::new(Mode::Code);
    harness.model.answer("one");
    harness.turn(1, "first").await;
    std::fs::write(
        harness.dir.path().join("AGENTS.md"),
        "Run `make check` before you finish.\n",
    )
    .unwrap();
    harness.model.answer("two");
    harness.model.answer("three");
    harness.turn(2, "second").await;
    harness.turn(3, "third").await;
    let sent = harness.model.sent();
    let notices = |messages: &[Message]| {
        messages
            .iter()
            .filter(|message| {
                matches!(message, Message::User { content } if content.contains("make check"))
            })
            .count()
    };
    assert_eq!(notices(&sent[0].messages), 0);
    assert_eq!(
        notices(&sent[1].messages),
        1,
        "announced with the second prompt"
    );
    assert_eq!(notices(&sent[2].messages), 1, "and not again");
    assert_eq!(
        sent[1].messages[0], sent[0].messages[0],
        "the system prompt keeps its bytes"
    );
    harness.assert_consistent();
}

mod subagent;
