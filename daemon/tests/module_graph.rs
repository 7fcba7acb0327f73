//! The daemon's rooms depend on each other one way (SPEC §2): server → session → agent and goals
//! → provider, tools and journal → store → sandbox. This test reads every `crate::ROOM` reference
//! in the sources and fails on an edge that points back up, unless it is listed as known; a known
//! one that is gone must leave the list too, so the list only shrinks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// Each room's layer: an edge may only go to a room of a higher number.
const LAYERS: &[(&str, u32)] = &[
    ("server", 0),
    ("session", 1),
    ("agent", 2),
    ("goals", 2),
    ("provider", 3),
    ("tools", 3),
    ("journal", 3),
    ("store", 4),
    ("sandbox", 5),
    ("util", 6),
];

/// Edges that point back up today, each to be broken (issue 11, item 2).
const KNOWN_BACK_EDGES: &[(&str, &str)] = &[];

fn layer(room: &str) -> Option<u32> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == room)
        .map(|(_, layer)| *layer)
}

/// Every `(from room, to room)` of the sources under `src`, with the file that has it.
fn edges(src: &Path) -> Vec<(String, String, String)> {
    let mut edges = Vec::new();
    let mut pending = vec![src.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let from = relative
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if layer(&from).is_none() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("crate::") {
                let to: String = text[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if to != from && layer(&to).is_some() {
                    edges.push((from.clone(), to, relative.display().to_string()));
                }
            }
        }
    }
    edges
}

#[test]
fn no_room_depends_on_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    assert!(
        edges.len() > 20,
        "found only {} edges: is the source tree where this test looks?",
        edges.len()
    );
    let mut back_edges = BTreeSet::new();
    for (from, to, file) in &edges {
        if layer(from) >= layer(to) {
            let known = KNOWN_BACK_EDGES.contains(&(from.as_str(), to.as_str()));
            assert!(
                known,
                "{file}: `{from}` uses `crate::{to}`, a room above it (SPEC §2: server → session → \
                 agent → provider/tools → store → sandbox → util). Move what both need down a room."
            );
            back_edges.insert((from.clone(), to.clone()));
        }
    }
    for (from, to) in KNOWN_BACK_EDGES {
        assert!(
            back_edges.contains(&(from.to_string(), to.to_string())),
            "`{from}` → `{to}` is gone: take it off KNOWN_BACK_EDGES"
        );
    }
}

#[test]
fn the_frontends_never_depend_on_the_daemon() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for frontend in ["client-cli", "client-tui"] {
        let manifest = std::fs::read_to_string(root.join(frontend).join("Cargo.toml")).unwrap();
        assert!(
            !manifest.contains("cwcoded"),
            "{frontend} depends on the daemon: it may use only cwcode-protocol"
        );
    }
}
