//! The daemon's providers: the current configuration and one client per profile, built on first
//! use and reused so that connections stay warm.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use cwcode_protocol::ProfileInfo;

use super::{Config, ConfigError, Provider};

pub struct Pool {
    config_path: PathBuf,
    config: RwLock<Arc<Config>>,
    clients: Mutex<HashMap<String, Arc<Provider>>>,
}

impl Pool {
    pub fn load(config_path: PathBuf) -> Result<Self, ConfigError> {
        let config = Config::load(&config_path)?;
        Ok(Self {
            config_path,
            config: RwLock::new(Arc::new(config)),
            clients: Mutex::new(HashMap::new()),
        })
    }

    pub fn config(&self) -> Arc<Config> {
        Arc::clone(
            &self
                .config
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Re-reads `config.json`; on error the previous configuration stays in force.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let config = Config::load(&self.config_path)?;
        *self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(config);
        self.clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        Ok(())
    }

    /// The profile a new session gets when it names none.
    pub fn default_profile(&self) -> Result<String, String> {
        let config = self.config();
        config.default_profile_name().map(str::to_owned).ok_or_else(|| {
            format!(
                "no profile is configured: add one to {} (\"profiles\": {{\"NAME\": {{\"base_url\": …, \"model\": …, \"api_key_env\": …}}}}) and set \"default_profile\"",
                self.config_path.display()
            )
        })
    }

    /// Checks that a profile exists, for a clear error at session creation.
    pub fn check_profile(&self, name: &str) -> Result<(), ConfigError> {
        self.config().profile(name).map(|_| ())
    }

    /// The client for a profile; the error says what to fix.
    pub fn get(&self, name: &str) -> Result<Arc<Provider>, String> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = clients.get(name) {
            return Ok(Arc::clone(client));
        }
        let config = self.config();
        let profile = config.profile(name).map_err(|error| error.to_string())?;
        let client = Arc::new(Provider::new(name, profile).map_err(|error| error.to_string())?);
        clients.insert(name.to_owned(), Arc::clone(&client));
        Ok(client)
    }

    pub fn secret_env_names(&self) -> Arc<[String]> {
        self.config().secret_env_names().into()
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
                    has_key: profile.api_key.is_some()
                        || profile
                            .api_key_env
                            .as_deref()
                            .is_some_and(|var| std::env::var_os(var).is_some()),
                    is_default: default == Some(name),
                })
            })
            .collect()
    }
}
