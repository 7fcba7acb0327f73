//! The memory verbs: `remember`, `recall` and `memory ls|rm`, over the daemon's `memory/*`
//! methods. Notes belong to the directory they were written in, as the agent's own do.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use cwcode_protocol::methods::{MemoryDelete, MemoryList, MemoryRecall, MemoryRemember};
use cwcode_protocol::{
    MemoryDeleteParams, MemoryListParams, MemoryNote, MemoryRecallParams, MemoryRememberParams,
    MemoryScope,
};

use super::{connect, print_json};

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Keep a note for later sessions, in this directory's workspace; the agent finds it with
    /// its `recall` tool.
    Remember {
        /// The note, at most 4 KB (quote it in the shell).
        text: String,
        /// A word to find the note by; repeat for several.
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Search the notes, this directory's first, best match first.
    Recall {
        /// Words to look for; any of them matches, the best matches first.
        query: String,
        /// At most this many notes (default 5, at most 20).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// List or delete notes.
    Memory {
        #[command(subcommand)]
        action: MemoryAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum MemoryAction {
    /// The newest notes first, of every workspace.
    Ls {
        /// Only this directory's notes.
        #[arg(long)]
        here: bool,
        /// At most this many notes (default 50, at most 500).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Delete a note by its number (see `memory ls`).
    Rm {
        /// The note's number, as `memory ls` shows it.
        id: i64,
    },
}

fn current_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

pub async fn run(command: MemoryCommand, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    match command {
        MemoryCommand::Remember { text, tags } => {
            let params = MemoryRememberParams {
                text,
                tags,
                workspace: current_dir()?.display().to_string(),
            };
            let note = client.call::<MemoryRemember>(&params).await?;
            if json {
                print_json(&note)?;
            } else {
                println!("remembered as note #{}", note.id);
            }
        }
        MemoryCommand::Recall { query, limit } => {
            let params = MemoryRecallParams {
                query,
                limit,
                workspace: Some(current_dir()?.display().to_string()),
            };
            let recalled = client.call::<MemoryRecall>(&params).await?;
            if json {
                print_json(&recalled)?;
            } else if recalled.notes.is_empty() {
                println!("no note matches");
            } else {
                for recalled in &recalled.notes {
                    let here = recalled.scope == MemoryScope::Workspace;
                    print!("{}", note_line(&recalled.note, here));
                }
            }
        }
        MemoryCommand::Memory {
            action: MemoryAction::Ls { here, limit },
        } => {
            let cwd = current_dir()?;
            let params = MemoryListParams {
                workspace: here.then(|| cwd.display().to_string()),
                limit,
            };
            let listed = client.call::<MemoryList>(&params).await?;
            if json {
                print_json(&listed)?;
            } else {
                for note in &listed.notes {
                    print!("{}", note_line(note, Path::new(&note.workspace) == cwd));
                }
            }
        }
        MemoryCommand::Memory {
            action: MemoryAction::Rm { id },
        } => {
            let deleted = client
                .call::<MemoryDelete>(&MemoryDeleteParams { id })
                .await?;
            if json {
                print_json(&deleted)?;
            } else if deleted.deleted {
                println!("deleted note #{id}");
            } else {
                eprintln!("cwcode-cli: there is no note #{id}; `cwcode-cli memory ls` lists them");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `#12 2026-12-01 [tags] text`, then the workspace on its own line when it is not this one.
fn note_line(note: &MemoryNote, here: bool) -> String {
    let day = note.created.get(..10).unwrap_or(&note.created);
    let mut line = format!("#{} {day}", note.id);
    if !note.tags.is_empty() {
        line.push_str(&format!(" [{}]", note.tags.join(", ")));
    }
    line.push(' ');
    line.push_str(&note.text);
    line.push('\n');
    if !here {
        line.push_str(&format!("    in {}\n", note.workspace));
    }
    line
}
