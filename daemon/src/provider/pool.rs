//! The daemon's providers: the current configuration and one client per profile, built on first
//! use and reused so that connections stay warm. `config.json` is watched: an edit takes effect
//! within moments, and an edit that does not load leaves the last good configuration in force
//! (SPEC §3, §10).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use cwcode_protocol::ProfileInfo;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::config::write_api_key;
use super::{Config, ConfigError, Provider};

/// Editors save in several steps (truncate, write, rename); the file is read once they are done.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// No profile was named and none is the default.
#[derive(Debug, thiserror::Error)]
#[error("{fix}")]
pub struct NoDefaultProfile {
    /// What a first run has to set, naming the variables and the command.
    fix: String,
}

pub struct Pool {
    shared: Arc<Shared>,
    /// Dropping it ends the watching thread.
    _watcher: Option<RecommendedWatcher>,
}

struct Shared {
    config_path: PathBuf,
    config: RwLock<Arc<Config>>,
    clients: Mutex<HashMap<String, Arc<Provider>>>,
    last_error: Mutex<Option<String>>,
    /// Serialises the daemon's own writes of config.json.
    writing: Mutex<()>,
}

impl Pool {
    /// Loads `config.json` and starts watching it. A watcher that cannot be set up is logged and
    /// the pool works without hot reload.
    pub fn load(config_path: PathBuf) -> Result<Self, ConfigError> {
        let config = Config::load(&config_path)?;
        let shared = Arc::new(Shared {
            config_path,
            config: RwLock::new(Arc::new(config)),
            clients: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
            writing: Mutex::new(()),
        });
        let watcher = match watch(&shared) {
            Ok(watcher) => Some(watcher),
            Err(error) => {
                tracing::warn!(
                    path = %shared.config_path.display(),
                    %error,
                    "cannot watch config.json; edits take effect on restart"
                );
                None
            }
        };
        Ok(Self {
            shared,
            _watcher: watcher,
        })
    }

    pub fn config(&self) -> Arc<Config> {
        self.shared.config()
    }

    /// Re-reads `config.json`; on error the previous configuration stays in force and the error
    /// is kept for [`Pool::last_error`].
    pub fn reload(&self) -> Result<(), ConfigError> {
        self.shared.reload()
    }

    /// Why the last reload of `config.json` failed, while the file stays broken: the daemon is
    /// running on the configuration before that edit.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.shared.last_error).clone()
    }

    /// The profile a new session gets when it names none; without one, the error tells a first
    /// run exactly what to set.
    pub fn default_profile(&self) -> Result<String, NoDefaultProfile> {
        let config = self.config();
        config
            .default_profile_name()
            .map(str::to_owned)
            .ok_or_else(|| NoDefaultProfile {
                fix: config.first_run_message(&self.shared.config_path),
            })
    }

    /// Checks that a profile exists, for a clear error at session creation.
    pub fn check_profile(&self, name: &str) -> Result<(), ConfigError> {
        self.config().profile(name).map(|_| ())
    }

    /// The client for a profile; the error says what to fix.
    pub fn get(&self, name: &str) -> Result<Arc<Provider>, String> {
        let mut clients = lock(&self.shared.clients);
        if let Some(client) = clients.get(name) {
            return Ok(Arc::clone(client));
        }
        let config = self.config();
        let profile = config.profile(name).map_err(|error| error.to_string())?;
        let client = Arc::new(Provider::new(name, profile).map_err(|error| error.to_string())?);
        clients.insert(name.to_owned(), Arc::clone(&client));
        Ok(client)
    }

    /// Stores `key` as the `api_key` of `profile` in `config.json` (0600, replaced atomically,
    /// everything else kept) and applies it at once. The key is never logged.
    pub fn set_key(&self, profile: &str, key: &str) -> Result<(), ConfigError> {
        let _writing = lock(&self.shared.writing);
        write_api_key(&self.shared.config_path, profile, key)?;
        self.shared.reload()
    }

    pub fn secret_values(&self) -> Arc<[String]> {
        self.config().secret_values().into()
    }

    pub fn profiles(&self) -> Vec<ProfileInfo> {
        let config = self.config();
        let default = config.default_profile_name();
        config
            .profile_names()
            .filter_map(|name| {
                let profile = config.profile(name).ok()?;
                Some(ProfileInfo {
                    name: name.to_owned(),
                    base_url: profile.base_url.clone(),
                    model: profile.model.clone(),
                    has_key: profile.has_key(),
                    is_default: default == Some(name),
                    context_window: profile.context_window,
                    prices: profile.pricing.as_ref().map(Into::into),
                    key_env: profile
                        .api_key_env
                        .clone()
                        .filter(|_| profile.api_key.is_none()),
                })
            })
            .collect()
    }
}

impl Shared {
    fn config(&self) -> Arc<Config> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn reload(&self) -> Result<(), ConfigError> {
        let config = match Config::load(&self.config_path) {
            Ok(config) => config,
            Err(error) => {
                *lock(&self.last_error) = Some(error.to_string());
                return Err(error);
            }
        };
        let previous = std::mem::replace(
            &mut *self.config.write().unwrap_or_else(PoisonError::into_inner),
            Arc::new(config),
        );
        *lock(&self.last_error) = None;
        // A client whose profile did not change keeps its warm connections (and the model a
        // local server was found to serve).
        let current = self.config();
        lock(&self.clients)
            .retain(|name, _| current.profile(name).ok() == previous.profile(name).ok());
        Ok(())
    }

    /// The watcher's reload: nobody waits for its result, so it is logged.
    fn reload_logged(&self) {
        match self.reload() {
            Ok(()) => tracing::info!(path = %self.config_path.display(), "config.json reloaded"),
            Err(error) => tracing::error!(
                %error,
                "config.json does not load; the previous configuration stays in force"
            ),
        }
    }
}

/// Watches the directory rather than the file: a file replaced by a rename (as cwcode and most
/// editors save) would otherwise drop the watch with the old inode.
fn watch(shared: &Arc<Shared>) -> notify::Result<RecommendedWatcher> {
    let dir = match shared.config_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let file_name = shared
        .config_path
        .file_name()
        .map(OsString::from)
        .unwrap_or_default();
    let (changed, changes) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) if concerns(&event, &file_name) => {
                // The receiver is gone only when the pool is; nothing is left to tell.
                let _ = changed.send(());
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "watching config.json failed"),
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("config-watch".to_owned())
        .spawn(move || reload_on_change(&weak, &changes))
        .map_err(notify::Error::io)?;
    Ok(watcher)
}

/// A change to the file itself. Reads are reported too (inotify's open events), and reloading
/// reads the file, so only writes, creations, renames and removals count.
fn concerns(event: &notify::Event, file_name: &OsString) -> bool {
    let changes = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    changes
        && event
            .paths
            .iter()
            .any(|path| path.file_name() == Some(file_name.as_os_str()))
}

/// Waits for a change, then for a quiet spell, then reloads; ends when the pool is dropped.
fn reload_on_change(shared: &Weak<Shared>, changes: &mpsc::Receiver<()>) {
    while changes.recv().is_ok() {
        loop {
            match changes.recv_timeout(DEBOUNCE) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.reload_logged();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Polls until `condition` holds, for up to five seconds.
    fn eventually(condition: impl Fn() -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn model_of(pool: &Pool, name: &str) -> Option<String> {
        pool.config()
            .profile(name)
            .ok()
            .map(|profile| profile.model.clone())
    }

    #[test]
    fn an_edit_is_picked_up_and_a_broken_edit_keeps_the_last_good_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            r#"{"profiles": {"mine": {"base_url": "http://127.0.0.1:9/v1", "model": "one"}}}"#,
        )
        .unwrap();
        let pool = Pool::load(path.clone()).unwrap();
        assert_eq!(model_of(&pool, "mine").as_deref(), Some("one"));

        std::fs::write(
            &path,
            r#"{"profiles": {"mine": {"base_url": "http://127.0.0.1:9/v1", "model": "two"}}}"#,
        )
        .unwrap();
        assert!(eventually(
            || model_of(&pool, "mine").as_deref() == Some("two")
        ));
        assert_eq!(pool.last_error(), None);

        std::fs::write(
            &path,
            "{\"profiles\": {\"mine\": {\"base_url\": \"http://127.0.0.1:9/v1\",\n \"model\": 3}}}",
        )
        .unwrap();
        assert!(eventually(|| pool.last_error().is_some()));
        let error = pool.last_error().unwrap();
        assert!(
            error.contains("config.json:2:") && error.contains("profiles.mine.model"),
            "{error}"
        );
        assert_eq!(model_of(&pool, "mine").as_deref(), Some("two"));

        std::fs::write(
            &path,
            r#"{"profiles": {"mine": {"base_url": "http://127.0.0.1:9/v1", "model": "three"}}}"#,
        )
        .unwrap();
        assert!(eventually(
            || model_of(&pool, "mine").as_deref() == Some("three")
        ));
        assert_eq!(pool.last_error(), None);
    }

    #[test]
    fn a_file_replaced_by_rename_is_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let pool = Pool::load(path.clone()).unwrap();
        assert!(model_of(&pool, "mine").is_none());
        let staged = dir.path().join("config.json.new");
        std::fs::write(
            &staged,
            r#"{"profiles": {"mine": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}}"#,
        )
        .unwrap();
        std::fs::rename(&staged, &path).unwrap();
        assert!(eventually(|| model_of(&pool, "mine").is_some()));
    }

    #[test]
    fn an_unchanged_profile_keeps_its_client_across_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let write = |model: &str| {
            std::fs::write(
                &path,
                format!(
                    r#"{{"profiles": {{"a": {{"base_url": "http://127.0.0.1:9/v1", "model": "{model}"}},
                        "b": {{"base_url": "http://127.0.0.1:9/v1", "model": "b"}}}}}}"#
                ),
            )
            .unwrap();
        };
        write("a1");
        let pool = Pool::load(path.clone()).unwrap();
        let (a, b) = (pool.get("a").unwrap(), pool.get("b").unwrap());
        write("a2");
        pool.reload().unwrap();
        assert!(Arc::ptr_eq(&b, &pool.get("b").unwrap()));
        let new_a = pool.get("a").unwrap();
        assert!(!Arc::ptr_eq(&a, &new_a));
        assert_eq!(new_a.model(), "a2");
    }

    #[test]
    fn set_key_makes_a_built_in_usable_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let pool = Pool::load(path.clone()).unwrap();
        pool.set_key("qwen3.6-27b", "sk-dash").unwrap();
        let provider = pool.get("qwen3.6-27b").unwrap();
        assert_eq!(provider.model(), "qwen3.6-27b");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("sk-dash"));
        assert!(matches!(
            pool.set_key("nope", "sk"),
            Err(ConfigError::UnknownProfile { .. })
        ));
        assert_eq!(pool.last_error(), None);
    }

    #[test]
    fn the_first_run_error_says_what_to_set() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::load(dir.path().join("config.json")).unwrap();
        // The test's environment may hold real keys; only an empty one has no default.
        if pool.config().default_profile_name().is_none() {
            let error = pool.default_profile().unwrap_err().to_string();
            assert!(
                error.contains("cwcode-cli config set-key") && error.contains("DEEPSEEK_API_KEY"),
                "{error}"
            );
        }
        let profiles = pool.profiles();
        assert_eq!(profiles.len(), 5);
        let local = profiles
            .iter()
            .find(|profile| profile.name == "local-vllm")
            .unwrap();
        assert!(local.has_key, "a keyless profile needs none");
    }

    #[test]
    fn a_broken_file_at_start_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(Pool::load(path), Err(ConfigError::Parse { .. })));
    }

    #[test]
    fn reads_do_not_count_as_changes() {
        let name = OsString::from("config.json");
        let event = |kind| notify::Event {
            kind,
            paths: vec![PathBuf::from("/h/config.json")],
            attrs: Default::default(),
        };
        assert!(!concerns(
            &event(EventKind::Access(AccessKind::Open(
                notify::event::AccessMode::Any
            ))),
            &name
        ));
        assert!(concerns(
            &event(EventKind::Access(AccessKind::Close(AccessMode::Write))),
            &name
        ));
        assert!(concerns(
            &event(EventKind::Modify(notify::event::ModifyKind::Any)),
            &name
        ));
        let mut other = event(EventKind::Modify(notify::event::ModifyKind::Any));
        other.paths = vec![PathBuf::from("/h/cwcoded.log")];
        assert!(!concerns(&other, &name));
    }
}
