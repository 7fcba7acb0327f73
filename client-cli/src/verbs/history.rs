//! What a session did and holds: checkpoints and rewind, cache and cost figures, compaction.

use std::process::ExitCode;

use super::{connect, print_json};
use crate::render;

pub async fn rewind(
    id: &str,
    turn: Option<u32>,
    undo: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    let result = match (turn, undo) {
        (Some(turn), _) => client.rewind(id, turn).await?,
        (None, true) => client.undo_rewind(id).await?,
        (None, false) => {
            let checkpoints = client.checkpoints(id).await?;
            if json {
                print_json(&checkpoints)?;
            } else {
                print!("{}", render::checkpoint_table(&checkpoints));
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    if json {
        print_json(&result)?;
    } else {
        print!("{}", render::rewind_summary(&result, undo));
    }
    if !result.failed.is_empty() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn cache(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let report = connect(true).await?.cache(id).await?;
    if json {
        print_json(&report)?;
    } else {
        print!("{}", render::cache_table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn cost(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let report = connect(true).await?.cost(id).await?;
    if json {
        print_json(&report)?;
    } else {
        print!("{}", render::cost_table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn compact(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    connect(true).await?.compact(id).await?;
    if json {
        print_json(&serde_json::json!({ "queued": true }))?;
    } else {
        println!("compaction queued; follow it with `cwcode-cli events {id} --follow`");
    }
    Ok(ExitCode::SUCCESS)
}
