//! The `goal` and `hooks` sections of `config.json` (SPEC §5): the defaults every goal loop gets
//! (its cap and budgets, so that no loop runs unbounded unless asked), and the commands the
//! daemon runs when something happens that a user away from the terminal wants to hear about.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Longest a verify command may run, in seconds.
pub const MAX_VERIFY_TIMEOUT_SECS: u64 = 3600;
/// The most arguments one hook command may have.
const MAX_HOOK_ARGS: usize = 64;

/// `"goal": {…}`: what `goal on` uses unless told otherwise. A budget set to `null` has no
/// default (the loop then needs one given with `goal on`, or runs without it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GoalDefaults {
    /// Most consecutive cycles.
    pub cap: u32,
    /// Prompt plus completion tokens a loop may use.
    pub token_budget: Option<u64>,
    /// What a loop may cost, priced with the session's profile (needs its `pricing`).
    pub cost_budget: Option<f64>,
    /// Wall-clock hours a loop may run.
    pub hours_budget: Option<f64>,
    /// How long a `(verify: …)` command may run before it counts as failed.
    pub verify_timeout_secs: u64,
}

impl Default for GoalDefaults {
    fn default() -> Self {
        Self {
            cap: 20,
            token_budget: Some(5_000_000),
            cost_budget: None,
            hours_budget: Some(8.0),
            verify_timeout_secs: 600,
        }
    }
}

impl GoalDefaults {
    /// The first field that makes no sense, with why.
    pub(super) fn problem(&self) -> Option<(&'static str, String)> {
        if self.cap == 0 {
            return Some(("goal.cap", "must be at least 1".to_owned()));
        }
        if self.token_budget == Some(0) {
            return Some((
                "goal.token_budget",
                "must be above 0, or null for none".to_owned(),
            ));
        }
        if self
            .cost_budget
            .is_some_and(|cost| !cost.is_finite() || cost <= 0.0)
        {
            return Some((
                "goal.cost_budget",
                "must be above 0, or null for none".to_owned(),
            ));
        }
        if self
            .hours_budget
            .is_some_and(|hours| !hours.is_finite() || hours <= 0.0)
        {
            return Some((
                "goal.hours_budget",
                "must be above 0, or null for none".to_owned(),
            ));
        }
        if !(1..=MAX_VERIFY_TIMEOUT_SECS).contains(&self.verify_timeout_secs) {
            return Some((
                "goal.verify_timeout_secs",
                format!("must be between 1 and {MAX_VERIFY_TIMEOUT_SECS}"),
            ));
        }
        None
    }
}

/// What a hook is run for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// A tool call waits for an approval.
    ApprovalRequested,
    /// A turn ended (completed, cancelled, interrupted or stopped by the storm-breaker).
    TurnFinished,
    /// A turn failed.
    TurnFailed,
    /// A goal loop ended, in any end state.
    GoalFinished,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::ApprovalRequested => "approval_requested",
            HookEvent::TurnFinished => "turn_finished",
            HookEvent::TurnFailed => "turn_failed",
            HookEvent::GoalFinished => "goal_finished",
        }
    }
}

/// `"hooks": {"approval_requested": ["notify-send", "cwcode", "needs you"]}`: an argv array per
/// event, run without a shell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Hooks(BTreeMap<HookEvent, Vec<String>>);

impl Hooks {
    /// The command for `event`, if one is configured.
    pub fn command(&self, event: HookEvent) -> Option<&[String]> {
        self.0.get(&event).map(Vec::as_slice)
    }

    pub(super) fn problem(&self) -> Option<(String, String)> {
        self.0.iter().find_map(|(event, argv)| {
            let field = format!("hooks.{}", event.as_str());
            if argv.first().is_none_or(|program| program.trim().is_empty()) {
                Some((
                    field,
                    "needs a program: [\"notify-send\", \"cwcode\", \"needs you\"]".to_owned(),
                ))
            } else if argv.len() > MAX_HOOK_ARGS {
                Some((field, format!("has more than {MAX_HOOK_ARGS} arguments")))
            } else {
                None
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_defaults_bound_every_loop_unless_set_to_null() {
        let defaults: GoalDefaults = serde_json::from_str("{}").unwrap();
        assert_eq!(defaults, GoalDefaults::default());
        assert_eq!(defaults.token_budget, Some(5_000_000));
        assert_eq!(defaults.hours_budget, Some(8.0));
        let open: GoalDefaults =
            serde_json::from_str(r#"{"token_budget": null, "hours_budget": 0.5, "cap": 5}"#)
                .unwrap();
        assert_eq!(open.token_budget, None);
        assert_eq!(open.hours_budget, Some(0.5));
        assert_eq!(open.cap, 5);
        assert!(open.problem().is_none());
        let wrong: GoalDefaults = serde_json::from_str(r#"{"hours_budget": -1}"#).unwrap();
        assert_eq!(wrong.problem().unwrap().0, "goal.hours_budget");
        assert!(serde_json::from_str::<GoalDefaults>(r#"{"budget": 1}"#).is_err());
    }

    #[test]
    fn hooks_are_an_argv_per_known_event() {
        let hooks: Hooks = serde_json::from_str(
            r#"{"approval_requested": ["notify-send", "cwcode", "needs you"]}"#,
        )
        .unwrap();
        assert_eq!(
            hooks.command(HookEvent::ApprovalRequested),
            Some(
                &[
                    "notify-send".to_owned(),
                    "cwcode".to_owned(),
                    "needs you".to_owned()
                ][..]
            )
        );
        assert_eq!(hooks.command(HookEvent::GoalFinished), None);
        assert!(hooks.problem().is_none());
        let error = serde_json::from_str::<Hooks>(r#"{"approval_asked": ["x"]}"#).unwrap_err();
        assert!(error.to_string().contains("approval_requested"), "{error}");
        let empty: Hooks = serde_json::from_str(r#"{"turn_failed": []}"#).unwrap();
        assert_eq!(empty.problem().unwrap().0, "hooks.turn_failed");
    }
}
