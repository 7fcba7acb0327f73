//! `goal ID add|on|off|status`: the goal loop.

use std::process::ExitCode;

use cwcode_protocol::{GoalStartParams, GoalStatus};

use super::{connect, print_json};
use crate::render;

pub async fn add(id: &str, text: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    show(&client.goal_add(id, text).await?, json)
}

/// The budgets `goal on` was given; `none` opts out of config.json's defaults.
pub struct Budget {
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
    pub hours: Option<f64>,
    pub none: bool,
}

pub async fn on(
    id: &str,
    cap: Option<u32>,
    budget: Budget,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    let status = client
        .goal_start(&GoalStartParams {
            session_id: id.to_owned(),
            cap,
            token_budget: budget.tokens,
            cost_budget: budget.cost,
            hours_budget: budget.hours,
            no_budget: budget.none,
        })
        .await?;
    show(&status, json)
}

pub async fn off(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    show(&client.goal_stop(id).await?, json)
}

pub async fn status(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    show(&client.goal_status(id).await?, json)
}

fn show(status: &GoalStatus, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_json(status)?;
    } else {
        print!("{}", render::goal_status(status));
    }
    Ok(ExitCode::SUCCESS)
}
