//! The layer rule as a test: every `crate::` path in `src/lib` runs from a
//! higher layer to the same or a lower one (cli → output → domains →
//! transport → ground), and no two top-level modules use each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The one layer table: each top-level module of `src/lib` and its layer
/// (higher numbers sit higher). A module may use modules of its own layer
/// or below, never above; a new module must be added here.
const LAYERS: &[(&str, u8)] = &[
    // The command layer: flags in, one library call, exit code out.
    ("cli", 5),
    // The one output layer: renders domain data as tables or JSON.
    ("output", 4),
    // Domains: each behaviour dpctl has. They may use each other without cycles.
    ("bench", 3),
    ("check", 3),
    ("checkpoint", 3),
    ("demo", 3),
    ("doctor", 3),
    ("kubelet_sim", 3),
    ("mock_plugin", 3),
    ("plugin_client", 3),
    ("podresources", 3),
    ("smoke", 3),
    ("topology", 3),
    // Transport: the one gRPC-over-unix-socket layer and gRPC status facts.
    ("transport", 2),
    ("rpc", 2),
    // Ground: errors, paths, parsers, protocol types and pure rules.
    ("contract", 1),
    ("duration", 1),
    ("error", 1),
    ("input", 1),
    ("model", 1),
    ("paths", 1),
    ("proto", 1),
    ("text", 1),
    ("validate", 1),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a piece of code names through `crate::` paths
/// (`crate::a::b`, `crate::{a, b::c}`), comments skipped.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // One level of braces is all dpctl's imports use; nested groups
                // name modules of the first segment only.
                let mut depth = 1;
                let mut segment = String::new();
                let mut first = true;
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        ',' if depth == 1 => {
                            if !segment.is_empty() {
                                found.insert(std::mem::take(&mut segment));
                            }
                            first = true;
                            continue;
                        }
                        ':' if depth == 1 => first = false,
                        c if depth == 1 && first && (c.is_alphanumeric() || c == '_') => segment.push(c),
                        _ => {}
                    }
                }
                if !segment.is_empty() {
                    found.insert(segment);
                }
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// Top-level module → the top-level modules it uses.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&root).expect("under src/lib");
        let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let code = std::fs::read_to_string(&file).expect("readable source");
        let uses = graph.entry(module.clone()).or_default();
        // `Error` and `Result` are re-exported at the crate root from `error`.
        for used in crate_paths(&code) {
            let used = if used == "Error" || used == "Result" { "error".to_string() } else { used };
            if used != module {
                uses.insert(used);
            }
        }
    }
    graph
}

#[test]
fn no_module_imports_a_higher_layer() {
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let graph = module_graph();
    let mut problems = Vec::new();
    for (module, uses) in &graph {
        let Some(&own) = layer.get(module.as_str()) else {
            problems.push(format!("src/lib/{module}: not in the layer table in tests/layers.rs"));
            continue;
        };
        for used in uses {
            match layer.get(used.as_str()) {
                Some(&other) if other > own => problems
                    .push(format!("{module} (layer {own}) uses {used} (layer {other}): move the shared piece down")),
                Some(_) => {}
                None => problems.push(format!("{module} uses crate::{used}, which is not in the layer table")),
            }
        }
    }
    assert!(problems.is_empty(), "upward imports:\n  {}", problems.join("\n  "));
}

#[test]
fn no_two_modules_use_each_other() {
    let graph = module_graph();
    // Depth-first search for a cycle among top-level modules.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let mut stack = Vec::new();
        if let Some(cycle) = visit(module, &graph, &mut stack, &mut done) {
            panic!("modules use each other: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_scanner_reads_grouped_and_inline_paths() {
    let code = "use crate::{error::Result, paths};\nlet x = crate::text::list(&v); // crate::cli is a comment\n";
    let found: Vec<String> = crate_paths(code).into_iter().collect();
    assert_eq!(found, ["error", "paths", "text"]);
}
