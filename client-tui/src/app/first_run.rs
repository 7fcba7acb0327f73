//! The first run's setup inside the app: its keys, and what storing the key changes.

use crossterm::event::KeyEvent;

use super::{App, Exit};
use crate::daemon::Request;
use crate::setup::Outcome;
use crate::transcript::Tone;

impl App {
    pub(super) fn setup_key(&mut self, key: KeyEvent) {
        let Some(setup) = &mut self.setup else {
            return;
        };
        match setup.key(key) {
            Outcome::Nothing => {}
            Outcome::Leave => self.exit = Some(Exit::Failed(setup.by_hand())),
            Outcome::Store(params) => self.outbox.push(Request::SetKey(params)),
        }
    }

    /// The daemon has the key: the setup goes, and a new session starts on that profile.
    pub(super) fn key_stored(&mut self, profile: String) {
        self.setup = None;
        if self.new_profile.is_none()
            && let Some(draft) = &mut self.draft
        {
            draft.params.profile = Some(profile.clone());
            if let Some(session) = &mut self.session {
                session.profile = profile.clone();
            }
        }
        // The profiles again: this one has its key now (and may be the default).
        self.outbox.push(Request::ListProfiles);
        self.note(
            format!(
                "key stored for profile {profile} in config.json (mode 0600): type a prompt to start"
            ),
            Tone::Info,
        );
    }
}
