//! The layering of `src/`, checked from the source text: every path to one
//! of drainit's modules (`crate::…`, `super::…`, groups in braces, across
//! lines) in non-test code must point to the same layer or one below it
//! (`util` < `proto` < `core` < `io` < `shell` < `app`), and the imports
//! between modules must form no cycle. A failure names the edge. The crate
//! root only declares the layers, so nothing can be laundered through it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: [&str; 6] = ["util", "proto", "core", "io", "shell", "app"];

fn layer_of(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    LAYERS.iter().position(|l| *l == top)
}

/// `core/timeline.rs` -> `core::timeline`; `io/mod.rs` -> `io`.
fn module_of(relative: &str) -> String {
    let path = relative.trim_end_matches(".rs").trim_end_matches("/mod");
    path.replace('/', "::")
}

/// The text without comments and without `#[cfg(test)]` items (a test
/// module may reach anywhere); code after a test module still counts.
fn non_test(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the item: to its `;` or its matching closing brace.
            let mut depth = 0i32;
            let mut opened = false;
            for item in lines.by_ref() {
                depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
                opened |= item.contains('{');
                if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Reads a path from `text` at `at` (after `crate::` or `super::`): names
/// joined by `::`, whitespace allowed, a `{…}` group expanded into one path
/// per item (nested groups too). Returns the paths, relative to the start.
fn paths_at(text: &[u8], mut at: usize) -> Vec<Vec<String>> {
    let skip_ws = |at: &mut usize| {
        while *at < text.len() && (text[*at] as char).is_whitespace() {
            *at += 1;
        }
    };
    let mut segments = Vec::new();
    loop {
        skip_ws(&mut at);
        if at < text.len() && text[at] == b'{' {
            // A group: split at top-level commas, parse each item.
            let mut depth = 0;
            let start = at + 1;
            let mut items = Vec::new();
            let mut item_start = start;
            let mut i = at;
            while i < text.len() {
                match text[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push((item_start, i));
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        items.push((item_start, i));
                        item_start = i + 1;
                    }
                    _ => {}
                }
                i += 1;
            }
            let mut out = Vec::new();
            for (s, e) in items {
                let item = &text[..e];
                for tail in paths_at(item, s) {
                    let mut full = segments.clone();
                    if tail.first().is_some_and(|t| t == "self") {
                        full.extend(tail.into_iter().skip(1));
                    } else {
                        full.extend(tail);
                    }
                    out.push(full);
                }
            }
            return out;
        }
        let start = at;
        while at < text.len() && ((text[at] as char).is_alphanumeric() || text[at] == b'_') {
            at += 1;
        }
        if start == at {
            break;
        }
        segments.push(String::from_utf8_lossy(&text[start..at]).to_string());
        let mut next = at;
        skip_ws(&mut next);
        if text.get(next..next + 2) == Some(b"::") {
            at = next + 2;
        } else {
            break;
        }
    }
    vec![segments]
}

/// Every path to one of drainit's modules that `module`'s text names,
/// resolved to a full path from the crate root.
fn targets(module: &str, text: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let own: Vec<String> = module.split("::").map(String::from).collect();
    for (i, _) in text.match_indices("crate") {
        let before = i.checked_sub(1).map(|b| bytes[b] as char);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
            continue;
        }
        let mut at = i + "crate".len();
        while at < bytes.len() && (bytes[at] as char).is_whitespace() {
            at += 1;
        }
        if text.get(at..at + 2) != Some("::") {
            continue;
        }
        out.extend(paths_at(bytes, at + 2));
    }
    for (i, _) in text.match_indices("super") {
        let before = i.checked_sub(1).map(|b| bytes[b] as char);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut after = i + 5;
        while after < bytes.len() && (bytes[after] as char).is_whitespace() {
            after += 1;
        }
        if text.get(after..after + 2) != Some("::") {
            continue; // `supervisor`, `super` alone
        }
        // super::super::x climbs once per `super`.
        let mut base = own.clone();
        let mut at = i;
        while text.get(at..at + 5) == Some("super") {
            base.pop();
            at += 5;
            while at < bytes.len() && (bytes[at] as char).is_whitespace() {
                at += 1;
            }
            if text.get(at..at + 2) != Some("::") {
                break;
            }
            at += 2;
            while at < bytes.len() && (bytes[at] as char).is_whitespace() {
                at += 1;
            }
        }
        for tail in paths_at(bytes, at) {
            let mut full = base.clone();
            full.extend(tail);
            out.push(full);
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
        for target in targets(&from, &non_test(text)) {
            // The longest known module the path goes through.
            let to = (1..=target.len())
                .rev()
                .map(|n| target[..n].join("::"))
                .find(|m| known.contains(m))
                .or_else(|| target.first().cloned().filter(|t| layer_of(t).is_some()));
            if let Some(to) = to.filter(|t| *t != from && !from.starts_with(&format!("{t}::"))) {
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

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module file under `src/` but the crate root, the binary and the
/// test-only module files (`*_tests.rs`).
fn source_files() -> Vec<(String, String)> {
    let root = root();
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
                if relative == "lib.rs" || relative == "main.rs" || relative.ends_with("_tests.rs")
                {
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
fn every_module_is_in_a_layer_and_the_root_only_declares_them() {
    let files = source_files();
    assert!(files.len() > 20, "found only {} files", files.len());
    for (path, _) in &files {
        assert!(
            layer_of(&module_of(path)).is_some(),
            "src/{path} is in no layer ({LAYERS:?})"
        );
    }
    let lib = std::fs::read_to_string(root().join("lib.rs")).unwrap();
    for line in lib.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let declares = LAYERS.iter().any(|l| line == format!("pub mod {l};"));
        assert!(
            line.starts_with("//") || declares,
            "src/lib.rs may only declare the layers: {line}"
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
    let files = source_files();
    let edges_found: usize = edges(&files).values().map(BTreeSet::len).sum();
    assert!(edges_found > 40, "the scan found only {edges_found} edges");
    let graph = edges(&files);
    for (from, to) in [
        ("shell::supervisor", "core::machine"),
        ("core::machine::report", "core::status"),
        ("io::reaper", "core::outcome"),
        ("app::main", "shell::supervisor"),
    ] {
        assert!(
            graph[from].contains(to),
            "{from} -> {to} not seen: {:?}",
            graph[from]
        );
    }
    // Upward imports in every shape the code could take.
    for import in [
        "use crate::shell::supervisor;",
        "use crate::{shell::executor::Executor, util::time};",
        "use crate::{\n    util::time,\n    shell::{executor, supervisor},\n};",
        "use super::super::shell::executor;",
        "fn f() { crate::shell::executor::x(); }",
        "use crate\n    ::shell::executor;",
        "#[cfg(test)]\nmod tests {}\nuse crate::shell::executor;",
    ] {
        let mut files = files.clone();
        let timeline = files
            .iter_mut()
            .find(|(p, _)| p == "core/timeline.rs")
            .expect("core/timeline.rs");
        timeline.1 = format!("{import}\n{}", timeline.1);
        let found = problems(&files);
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("core::timeline imports shell::")),
            "{import:?}: {found:?}"
        );
    }
    // `super::` in a layer's mod.rs is the crate root.
    let mut files = files.clone();
    let util = files.iter_mut().find(|(p, _)| p == "util/mod.rs").unwrap();
    util.1.push_str("\nuse super::app::main;\n");
    assert!(problems(&files)
        .iter()
        .any(|p| p.starts_with("util imports app::main")));
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
