//! One function per verb, grouped by what they act on. `main.rs` parses the arguments and
//! calls exactly one of them.

pub mod daemon;
pub mod goal;
pub mod history;
pub mod sessions;
pub mod setup;
pub mod turns;

use std::io::Read;

use anyhow::{Context, bail};
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{Client, ConnectOptions};

async fn connect(autostart: bool) -> anyhow::Result<Client> {
    let mut options = ConnectOptions::new(Paths::from_env()?);
    options.autostart = autostart;
    Ok(Client::connect(&options).await?)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// The prompt as given, or read from stdin for `-`.
fn prompt_text(text: String) -> anyhow::Result<String> {
    if text != "-" {
        return Ok(text);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the prompt from stdin")?;
    if text.trim().is_empty() {
        bail!("the prompt read from stdin is empty");
    }
    Ok(text)
}
