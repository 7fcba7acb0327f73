//! Sessions as a whole: create, list, show, delete, and their mode and profile.

use std::path::PathBuf;
use std::process::ExitCode;

use cwcode_protocol::{CreateSessionParams, Mode};

use super::{connect, print_json, workspace};
use crate::render;

pub async fn new(
    cwd: Option<PathBuf>,
    profile: Option<String>,
    mode: Option<Mode>,
    title: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let cwd = workspace(cwd)?;
    let client = connect(true).await?;
    let info = client
        .create_session(&CreateSessionParams {
            cwd,
            profile,
            mode,
            title,
        })
        .await?;
    if json {
        print_json(&info)?;
    } else {
        println!("{}", info.id);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn ls(json: bool) -> anyhow::Result<ExitCode> {
    let sessions = connect(true).await?.list_sessions().await?;
    if json {
        print_json(&sessions)?;
    } else {
        print!("{}", render::session_table(&sessions));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let info = connect(true).await?.get_session(id).await?;
    if json {
        print_json(&info)?;
    } else {
        print!("{}", render::session_details(&info));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn rm(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    connect(true).await?.delete_session(id).await?;
    if json {
        print_json(&serde_json::json!({ "deleted": id }))?;
    } else {
        println!("deleted {id}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn mode(id: &str, mode: Mode, json: bool) -> anyhow::Result<ExitCode> {
    let info = connect(true).await?.set_mode(id, mode).await?;
    if json {
        print_json(&info)?;
    } else {
        println!("{} is in {} mode", info.id, info.mode);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn profile(id: &str, profile: &str, json: bool) -> anyhow::Result<ExitCode> {
    let info = connect(true).await?.set_profile(id, profile).await?;
    if json {
        print_json(&info)?;
    } else {
        println!("{} now uses profile {}", info.id, info.profile);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn profiles(json: bool) -> anyhow::Result<ExitCode> {
    let profiles = connect(true).await?.list_profiles().await?;
    if json {
        print_json(&profiles)?;
    } else {
        print!("{}", render::profile_table(&profiles));
    }
    Ok(ExitCode::SUCCESS)
}
