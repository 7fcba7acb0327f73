//! The background task that owns the session's subscription for the whole life of the program.
//! It prints every event, whoever caused it (this terminal, another one, a script), and tells
//! the input loop about the few that change what input means: turns, approvals, the mode.

use std::sync::Arc;

use cwcode_protocol::client::EventStream;
use cwcode_protocol::{Client, EventKind, Mode};
use tokio::sync::mpsc::UnboundedSender;

use crate::render;
use crate::screen::{self, SharedScreen};

/// How often a dropped subscription is resumed before giving up. The daemon drops a client that
/// falls thousands of events behind; doing so again and again means this terminal cannot keep up.
const MAX_RESUBSCRIBES: u32 = 3;

/// What the input loop needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A turn was accepted (queued or started): the session is busy until it finishes.
    TurnKnown(u32),
    TurnFinished(u32),
    ApprovalRequested {
        request_id: String,
        tool: String,
        arguments: String,
    },
    ApprovalResolved(String),
    ModeChanged(Mode),
    /// Every event journalled before this client attached has been printed.
    CaughtUp,
    /// No more events will come; the reason says why.
    Ended(String),
}

pub struct Printer {
    pub client: Arc<Client>,
    pub session_id: String,
    pub stream: EventStream,
    /// The journal's last `seq` when the replay was requested; 0 when nothing is replayed.
    pub replay_until: u64,
    pub screen: SharedScreen,
    pub notices: UnboundedSender<Notice>,
}

impl Printer {
    pub async fn run(mut self) {
        let reason = self.print_until_end().await;
        // The input loop may be gone already (the user detached): nothing left to tell.
        let _ = self.notices.send(Notice::Ended(reason));
    }

    fn notify(&self, notice: Notice) {
        let _ = self.notices.send(notice);
    }

    /// Prints events until the stream ends for good; returns why it ended.
    async fn print_until_end(&mut self) -> String {
        let mut caught_up = false;
        if self.replay_until == 0 {
            caught_up = true;
            self.notify(Notice::CaughtUp);
        }
        let mut resubscribes = 0;
        loop {
            let event = match self.stream.next().await {
                None => return "the connection to cwcoded closed".to_owned(),
                Some(Ok(event)) => event,
                Some(Err(error)) => {
                    // One event this build cannot read (a newer daemon?) should not end the session.
                    screen::lock(&self.screen).error(&format!("skipped an event: {error}"));
                    continue;
                }
            };
            if let EventKind::SubscriptionEnded { reason } = &event.kind {
                if resubscribes >= MAX_RESUBSCRIBES {
                    return format!("the daemon ended the event stream: {reason}");
                }
                resubscribes += 1;
                // `seq` is the last event this subscription delivered: resume right after it.
                match self
                    .client
                    .subscribe(&self.session_id, Some(event.seq))
                    .await
                {
                    Ok(stream) => {
                        self.stream = stream;
                        let mut screen = screen::lock(&self.screen);
                        let note = screen.style.dim(&format!(
                            "· the event stream was dropped ({reason}); resumed without losing events"
                        ));
                        screen.line(&note);
                        continue;
                    }
                    Err(error) => {
                        return format!(
                            "the daemon ended the event stream ({reason}) and resubscribing failed: {error}"
                        );
                    }
                }
            }
            self.print(&event.kind);
            if !caught_up && event.seq >= self.replay_until {
                caught_up = true;
                let mut screen = screen::lock(&self.screen);
                let note = screen.style.dim("· end of the transcript; live from here");
                screen.line(&note);
                drop(screen);
                self.notify(Notice::CaughtUp);
            }
        }
    }

    fn print(&self, kind: &EventKind) {
        let mut screen = screen::lock(&self.screen);
        let own = match kind {
            EventKind::PromptQueued { turn, prompt } | EventKind::TurnStarted { turn, prompt } => {
                screen.claim_own_turn(*turn, prompt)
            }
            _ => false,
        };
        let output = render::event(kind, own, screen.style);
        screen.show(output);
        // The lock is released before notifying so the input loop never waits on the printer.
        drop(screen);
        let notice = match kind {
            EventKind::PromptQueued { turn, .. } | EventKind::TurnStarted { turn, .. } => {
                Notice::TurnKnown(*turn)
            }
            EventKind::TurnFinished { turn, .. } => Notice::TurnFinished(*turn),
            EventKind::ApprovalRequested {
                request_id,
                tool,
                arguments,
                ..
            } => Notice::ApprovalRequested {
                request_id: request_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            },
            EventKind::ApprovalResolved { request_id, .. } => {
                Notice::ApprovalResolved(request_id.clone())
            }
            EventKind::ModeChanged { mode } => Notice::ModeChanged(*mode),
            _ => return,
        };
        self.notify(notice);
    }
}
