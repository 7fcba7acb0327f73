//! `daemon start|stop|status`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use cwcode_protocol::paths::Paths;

use super::{connect, print_json};
use crate::render;

pub async fn start(json: bool) -> anyhow::Result<ExitCode> {
    let info = connect(true).await?.info().await?;
    if json {
        print_json(&info)?;
    } else {
        println!("cwcoded running: pid {}, socket {}", info.pid, info.socket);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn status(json: bool) -> anyhow::Result<ExitCode> {
    match connect(false).await {
        Ok(client) => {
            let info = client.info().await?;
            if json {
                print_json(&info)?;
            } else {
                print!("{}", render::daemon_status(&info));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            if json {
                print_json(&serde_json::json!({ "running": false }))?;
            } else {
                println!("cwcoded is not running ({error:#})");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

pub async fn stop(json: bool) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    let Ok(client) = connect(false).await else {
        if json {
            print_json(&serde_json::json!({ "stopped": true, "wasRunning": false }))?;
        } else {
            println!("cwcoded is not running");
        }
        return Ok(ExitCode::SUCCESS);
    };
    // The daemon may close the connection before its answer arrives: it is stopping
    // either way, which the socket's disappearance confirms below.
    if let Err(error) = client.shutdown().await
        && error.rpc_code().is_some()
    {
        return Err(error.into());
    }
    // The daemon removes its socket as the last step of draining.
    for _ in 0..1500 {
        if !paths.socket.exists() {
            if json {
                print_json(&serde_json::json!({ "stopped": true }))?;
            } else {
                println!("cwcoded stopped");
            }
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!(
        "cwcoded did not stop within 15 s; see its log, {}",
        paths.log_file().display()
    );
}
