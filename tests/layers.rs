//! The layering of `src/`, checked from the source text: every `crate::`
//! path in non-test code must point to the same layer or one below it
//! (`util` < `proto` < `core` < `io` < `shell` < `app`), and the imports
//! between modules must form no cycle. A failure names the edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: [&str; 6] = ["util", "proto", "core", "io", "shell", "app"];

fn layer_of(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS.iter().position(|l| *l == top)
}

/// `src/core/timeline.rs` -> `core::timeline`; `src/io/mod.rs` -> `io`.
fn module_of(relative: &str) -> String {
    let path = relative.trim_end_matches(".rs").trim_end_matches("/mod");
    path.replace('/', "::")
}

/// The code before the first `#[cfg(test)]` line: test modules may reach
/// anywhere.
fn non_test(text: &str) -> &str {
    match text.find("\n#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Every module a text names with `crate::layer::module` (groups in
/// braces expanded one level: `crate::io::{http, notify}`), or with
/// `super::` from inside a layer.
fn targets(module: &str, text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let parent = module.rsplit_once("::").map(|(p, _)| p.to_string());
    for (prefix, base) in [
        ("crate::", String::new()),
        ("super::", parent.clone().unwrap_or_default()),
    ] {
        if prefix == "super::" && parent.is_none() {
            continue;
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':' || *c == '{')
                .collect();
            let path = path.trim_end_matches(':');
            let full = if base.is_empty() {
                path.to_string()
            } else {
                format!("{base}::{path}")
            };
            let mut parts: Vec<&str> = full.split("::").collect();
            if parts.last().is_some_and(|p| p.starts_with('{')) {
                // crate::io::{http, notify}: each name in the group.
                parts.pop();
                let group_start = rest.find('{').unwrap_or(0);
                let group_end = rest[group_start..]
                    .find('}')
                    .map_or(rest.len(), |e| group_start + e);
                let layer = parts.join("::");
                for name in rest[group_start + 1..group_end].split(',') {
                    let name = name.trim().split("::").next().unwrap_or("").trim();
                    if name.is_empty() || name == "self" {
                        out.insert(layer.clone());
                    } else if parts.len() == 1 {
                        out.insert(format!("{layer}::{name}"));
                    } else {
                        out.insert(layer.clone());
                    }
                }
                continue;
            }
            // The module is the layer and the next segment.
            let module: Vec<&str> = parts.iter().take(2).copied().collect();
            if !module.is_empty() {
                out.insert(module.join("::"));
            }
        }
    }
    out
}

/// The edges `from -> to` between modules, from `(relative path, text)`.
fn edges(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<String> = files.iter().map(|(p, _)| module_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let from = module_of(path);
        let entry = graph.entry(from.clone()).or_default();
        for to in targets(&from, non_test(text)) {
            // A type named through the module (crate::core::outcome::Ended)
            // counts as an edge to the module if it is one of ours.
            let to = if known.contains(&to) {
                to
            } else {
                to.split("::").next().unwrap_or("").to_string()
            };
            if to != from && !to.is_empty() {
                entry.insert(to);
            }
        }
    }
    graph
}

/// Every problem: upward imports, then the edges that close a cycle.
fn problems(files: &[(String, String)]) -> Vec<String> {
    let graph = edges(files);
    let mut out = Vec::new();
    for (from, tos) in &graph {
        let Some(lf) = layer_of(from) else { continue };
        for to in tos {
            if let Some(lt) = layer_of(to) {
                if lt > lf {
                    out.push(format!(
                        "{from} imports {to}: `{}` is above `{}`",
                        LAYERS[lt], LAYERS[lf]
                    ));
                }
            }
        }
    }
    // Cycles: depth-first search; an edge to a module on the stack closes one.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        out: &mut Vec<String>,
    ) {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|n| n == next).unwrap_or(0);
                    let cycle = stack[at..].join(" -> ");
                    out.push(format!(
                        "{node} imports {next}, closing the cycle {cycle} -> {next}"
                    ));
                }
                Some(_) => {}
                None => visit(next, graph, state, stack, out),
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str()) {
            visit(node, &graph, &mut state, &mut Vec::new(), &mut out);
        }
    }
    out
}

fn source_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                // The crate root and the binary are above every layer.
                if relative == "lib.rs" || relative == "main.rs" {
                    continue;
                }
                files.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_module_is_in_a_layer() {
    let files = source_files();
    assert!(files.len() > 20, "found only {} files", files.len());
    for (path, _) in &files {
        assert!(
            layer_of(&module_of(path)).is_some(),
            "src/{path} is in no layer ({LAYERS:?})"
        );
    }
}

#[test]
fn imports_point_down_and_close_no_cycle() {
    let found = problems(&source_files());
    assert!(found.is_empty(), "layering broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import_and_a_cycle() {
    let mut files = source_files();
    let edges_found: usize = edges(&files).values().map(BTreeSet::len).sum();
    assert!(edges_found > 30, "the scan found only {edges_found} edges");
    // An upward import: the timeline reaching for the shell.
    let timeline = files
        .iter_mut()
        .find(|(p, _)| p == "core/timeline.rs")
        .expect("core/timeline.rs");
    timeline.1 = format!("use crate::shell::supervisor;\n{}", timeline.1);
    let found = problems(&files);
    assert!(
        found
            .iter()
            .any(|p| p.contains("core::timeline imports shell::supervisor")),
        "{found:?}"
    );
    // A cycle inside one layer, named by its edge.
    let files = vec![
        (
            "core/a.rs".to_string(),
            "use crate::core::b::X;\n".to_string(),
        ),
        (
            "core/b.rs".to_string(),
            "use crate::core::{a, c};\n".to_string(),
        ),
        ("core/c.rs".to_string(), String::new()),
    ];
    let found = problems(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("closing the cycle"), "{found:?}");
}
