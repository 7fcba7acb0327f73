//! The session picker: a new session, the sessions of this directory (most recent first), then
//! the others; typing filters by id, title or directory, and an id that matches nothing listed
//! is tried as is (the daemon resolves unique prefixes).

use std::collections::HashMap;

use cwcode_protocol::SessionInfo;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    New,
    Session(SessionInfo),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    New,
    Attach(String),
}

#[derive(Debug, Clone)]
pub struct Picker {
    items: Vec<Item>,
    pub filter: String,
    pub selected: usize,
    pub cwd: String,
    /// Why the last choice failed (an id that does not exist), shown under the list.
    pub error: Option<String>,
    /// A line under a session: its last answer or prompt, by session id, once read.
    previews: HashMap<String, String>,
}

impl Picker {
    /// `sessions` as `session/list` returns them, most recent first.
    pub fn new(sessions: &[SessionInfo], cwd: &str) -> Self {
        let (here, elsewhere): (Vec<_>, Vec<_>) = sessions
            .iter()
            .cloned()
            .partition(|session| session.cwd == cwd);
        let mut items = vec![Item::New];
        let has_here = !here.is_empty();
        items.extend(here.into_iter().map(Item::Session));
        items.extend(elsewhere.into_iter().map(Item::Session));
        Self {
            items,
            filter: String::new(),
            // Enter continues the latest work here; the new session is one Up away.
            selected: usize::from(has_here),
            cwd: cwd.to_owned(),
            error: None,
            previews: HashMap::new(),
        }
    }

    /// The sessions to read a preview of, with the `seq` their journal ends at, in the order
    /// they are listed (the first ones are the ones seen).
    pub fn wanted_previews(&self) -> Vec<(String, u64)> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Session(session) if session.last_seq > 0 => {
                    Some((session.id.clone(), session.last_seq))
                }
                _ => None,
            })
            .collect()
    }

    pub fn set_previews(&mut self, previews: Vec<(String, String)>) {
        self.previews.extend(previews);
    }

    pub fn preview(&self, session_id: &str) -> Option<&str> {
        self.previews.get(session_id).map(String::as_str)
    }

    pub fn visible(&self) -> Vec<&Item> {
        let filter = self.filter.to_lowercase();
        self.items
            .iter()
            .filter(|item| match item {
                Item::New => filter.is_empty(),
                // Anywhere in the id: the end of an id is what `cwcode-cli ls` users remember
                // as often as its start.
                Item::Session(session) => {
                    filter.is_empty()
                        || session.id.to_lowercase().contains(&filter)
                        || session.title.to_lowercase().contains(&filter)
                        || session.cwd.to_lowercase().contains(&filter)
                }
            })
            .collect()
    }

    pub fn type_char(&mut self, c: char) {
        self.filter.push(c);
        self.selected = 0;
        self.error = None;
    }

    pub fn backspace(&mut self) {
        self.filter.pop();
        self.selected = 0;
        self.error = None;
    }

    pub fn up(&mut self) {
        self.selected = self.selected.saturating_sub(1);
    }

    pub fn down(&mut self) {
        let count = self.visible().len();
        if self.selected + 1 < count {
            self.selected += 1;
        }
    }

    pub fn choose(&self) -> Option<Choice> {
        match self.visible().get(self.selected) {
            Some(Item::New) => Some(Choice::New),
            Some(Item::Session(session)) => Some(Choice::Attach(session.id.clone())),
            None if !self.filter.trim().is_empty() => {
                Some(Choice::Attach(self.filter.trim().to_owned()))
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::session;

    #[test]
    fn sessions_of_this_directory_come_first_and_the_latest_is_selected() {
        let sessions = [
            session("aaa", "/elsewhere", "other"),
            session("bbb", "/here", "recent"),
            session("ccc", "/here", "older"),
        ];
        let picker = Picker::new(&sessions, "/here");
        let order: Vec<String> = picker
            .visible()
            .iter()
            .map(|item| match item {
                Item::New => "new".to_owned(),
                Item::Session(s) => s.id.clone(),
            })
            .collect();
        assert_eq!(order, ["new", "bbb", "ccc", "aaa"]);
        assert_eq!(picker.choose(), Some(Choice::Attach("bbb".to_owned())));
        let mut picker = picker;
        picker.up();
        assert_eq!(picker.choose(), Some(Choice::New));
    }

    #[test]
    fn typing_filters_and_an_unknown_id_is_tried_as_typed() {
        let sessions = [session("0198abc", "/here", "fix tests")];
        let mut picker = Picker::new(&sessions, "/here");
        for c in "fix".chars() {
            picker.type_char(c);
        }
        assert_eq!(picker.choose(), Some(Choice::Attach("0198abc".to_owned())));
        picker.filter = "0199".to_owned();
        assert!(picker.visible().is_empty());
        assert_eq!(picker.choose(), Some(Choice::Attach("0199".to_owned())));
    }

    #[test]
    fn the_filter_matches_anywhere_in_the_id_or_the_title() {
        let sessions = [
            session("0198a1b2c3d4e5f6", "/here", "coupons before tax"),
            session("0198ffee00112233", "/here", "the cart total"),
        ];
        let mut picker = Picker::new(&sessions, "/here");
        let shown = |picker: &Picker| -> Vec<String> {
            picker
                .visible()
                .iter()
                .filter_map(|item| match item {
                    Item::Session(session) => Some(session.id.clone()),
                    Item::New => None,
                })
                .collect()
        };
        picker.filter = "c3d4".to_owned();
        assert_eq!(shown(&picker), ["0198a1b2c3d4e5f6"]);
        picker.filter = "TOTAL".to_owned();
        assert_eq!(shown(&picker), ["0198ffee00112233"]);
        picker.filter = "before".to_owned();
        assert_eq!(shown(&picker), ["0198a1b2c3d4e5f6"]);
    }
}
