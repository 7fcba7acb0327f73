//! The setup and the raw API: `doctor`, `config set-key`, `rpc`.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::{connect, print_json};
use crate::render;

pub async fn doctor(json: bool) -> anyhow::Result<ExitCode> {
    let report = connect(true).await?.doctor().await?;
    if json {
        print_json(&report)?;
    } else {
        print!("{}", render::doctor(&report));
        for profile in &report.profiles {
            if let Some(variable) = profile.key_only_in(&|name| std::env::var(name).ok()) {
                println!("[FIX] {}", profile.key_only_in_client_advice(variable));
            }
        }
    }
    let healthy = report.config_error.is_none()
        && report.default_profile.is_some()
        && report.home_mode == 0o700
        && report.socket_mode == 0o600
        && report.config_key_exposed.is_none()
        && report.session_problems.iter().all(|problem| problem.loaded);
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub async fn set_key(profile: &str, key: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let key = match key {
        Some(key) => key,
        None => read_key(profile)?,
    };
    connect(true).await?.set_key(profile, &key).await?;
    if json {
        print_json(&serde_json::json!({ "profile": profile, "stored": true }))?;
    } else {
        println!("stored the key of `{profile}` in config.json");
    }
    Ok(ExitCode::SUCCESS)
}

fn read_key(profile: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        eprint!("API key for `{profile}` (input is not hidden; paste and press Enter): ");
    }
    let mut key = String::new();
    std::io::stdin()
        .read_line(&mut key)
        .context("cannot read the key from stdin")?;
    let key = key.trim().to_owned();
    if key.is_empty() {
        bail!("no key given");
    }
    Ok(key)
}

pub async fn rpc(method: &str, params: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let params = params
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .context("the params are not valid JSON")?;
    let result = connect(true).await?.call_raw(method, params).await?;
    if json || !std::io::stdout().is_terminal() {
        print_json(&result)?;
    } else {
        println!("{}", serde_json::to_string_pretty(&result)?);
    }
    Ok(ExitCode::SUCCESS)
}
