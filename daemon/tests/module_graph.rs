//! The daemon's rooms depend on each other one way (SPEC §2): server → session → agent and goals
//! → provider, tools and journal → store → sandbox → util. This test reads every `crate::ROOM`
//! reference in the sources and fails on an edge that points back up, unless it is listed as
//! known; a known one that is gone must leave the list too, so the list only shrinks. A second
//! test fails on any circle of imports between the top-level modules of every crate in the
//! workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each room's layer: an edge may only go to a room of a higher number.
const LAYERS: &[(&str, u32)] = &[
    ("server", 0),
    ("session", 1),
    ("agent", 2),
    ("goals", 2),
    ("hooks", 2),
    ("provider", 3),
    ("tools", 3),
    ("journal", 3),
    ("store", 4),
    ("memory", 4),
    ("mcp", 4),
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
    for (relative, from, text) in sources(src) {
        if layer(&from).is_none() {
            continue;
        }
        for (at, _) in text.match_indices("crate::") {
            let to: String = text[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if to != from && layer(&to).is_some() {
                edges.push((from.clone(), to, relative.clone()));
            }
        }
    }
    edges
}

/// Every `.rs` file under `src`: its path relative to `src`, the top-level module it belongs to,
/// and its text.
fn sources(src: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![src.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path.strip_prefix(src).unwrap();
                let first = relative.components().next().unwrap().as_os_str();
                let module = first.to_string_lossy().trim_end_matches(".rs").to_owned();
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((relative.display().to_string(), module, text));
            }
        }
    }
    files
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

/// The crates whose top-level modules must import each other without a circle.
const CRATES: &[&str] = &["daemon", "protocol", "client-tui", "client-cli"];

/// Circles tolerated today, as `(crate, module, module)`; none, and it should stay that way.
const KNOWN_CIRCLES: &[(&str, &str, &str)] = &[];

/// The top-level modules of a crate's `src` (each `NAME.rs` or `NAME/`), minus the crate roots
/// and the modules compiled only for tests (`#[cfg(test)] mod NAME;`), whose imports do not
/// shape the program.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut test_only = BTreeSet::new();
    for root in ["main.rs", "lib.rs"] {
        let Ok(text) = std::fs::read_to_string(src.join(root)) else {
            continue;
        };
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line == "#[cfg(test)]"
                && let Some(name) = lines
                    .next()
                    .and_then(|next| next.strip_prefix("mod "))
                    .and_then(|rest| rest.strip_suffix(';'))
            {
                test_only.insert(name.to_owned());
            }
        }
    }
    std::fs::read_dir(src)
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs").map(str::to_owned)
            }
        })
        .filter(|name| !["main", "lib"].contains(&name.as_str()) && !test_only.contains(name))
        .collect()
}

/// The modules a `crate::` path names: `crate::a::…` names `a`, `crate::{a, b::c}` names both.
fn named_after_crate(rest: &str) -> Vec<String> {
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let mut names = Vec::new();
    let mut depth = 1;
    let mut segment_start = true;
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => segment_start = true,
            c if c.is_whitespace() => {}
            _ if segment_start && depth == 1 => {
                names.push(ident(&group[at..]));
                segment_start = false;
            }
            _ => {}
        }
    }
    names
}

/// `module → modules it imports` for one crate, from the code (not the comments) before each
/// file's tests.
fn module_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = top_level_modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, from, text) in sources(src) {
        if !modules.contains(&from) {
            continue;
        }
        // Doc links (`[`crate::x`]`) are not imports, and tests do not shape the program.
        let program: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (at, _) in program.match_indices("crate::") {
            for to in named_after_crate(&program[at + "crate::".len()..]) {
                if to != from && modules.contains(&to) {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    edges
}

/// Every circle found by a depth-first walk, each as the path that closes it (`a → b → a`).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit(
        module: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(start) = path.iter().position(|seen| seen == module) {
            let mut circle = path[start..].to_vec();
            circle.push(module.to_owned());
            found.push(circle);
            return;
        }
        if !done.insert(module.to_owned()) {
            return;
        }
        path.push(module.to_owned());
        for next in edges.get(module).into_iter().flatten() {
            visit(next, edges, path, done, found);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        visit(module, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn the_circle_finder_sees_a_circle_and_a_grouped_import() {
    let edges = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(circles(&edges), [["a", "b", "c", "a"]]);
    assert_eq!(
        named_after_crate("{wrap, diff::{self, Diff}, format::money};"),
        ["wrap", "diff", "format"]
    );
    assert_eq!(named_after_crate("store::atomic_write"), ["store"]);
}

#[test]
fn no_crate_has_a_circle_of_module_imports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut unexpected = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        assert!(
            !top_level_modules(&src).is_empty(),
            "{krate}: no modules found: is its source where this test looks?"
        );
        let edges = module_edges(&src);
        for circle in circles(&edges) {
            let known = KNOWN_CIRCLES.iter().any(|(name, a, b)| {
                name == krate && circle.contains(&a.to_string()) && circle.contains(&b.to_string())
            });
            if !known {
                unexpected.push(format!("{krate}: {}", circle.join(" → ")));
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "modules that import each other (move what both need into a module that imports \
         neither):\n{}",
        unexpected.join("\n")
    );
}
