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
    ("apiserver", 3),
    ("bench", 3),
    ("check", 3),
    ("checkpoint", 3),
    ("demo", 3),
    ("doctor", 3),
    ("dra", 3),
    ("kubelet_sim", 3),
    ("mock_plugin", 3),
    ("plugin_client", 3),
    ("podresources", 3),
    ("scenario", 3),
    ("smoke", 3),
    // Transport: the one gRPC-over-unix-socket layer and gRPC status facts.
    ("transport", 2),
    ("rpc", 2),
    // Ground: errors, paths, parsers, protocol types and pure rules.
    ("cdi_spec", 1),
    ("contract", 1),
    ("duration", 1),
    ("error", 1),
    ("input", 1),
    ("signal", 1),
    ("model", 1),
    ("paths", 1),
    ("proto", 1),
    ("validate", 1),
    ("wire_events", 1),
    // The kubelet crate (`crates/kubelet`), re-exported under these names:
    // below everything, and it cannot see dpctl (Cargo holds that line).
    ("kubelet_texts", 0),
    ("kubelet_version", 0),
    ("limits", 0),
    ("quantity", 0),
    ("text", 0),
    ("topology", 0),
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

/// The source with the insides of comments, strings and character literals
/// blanked (newlines kept), so that braces and names in them are not code.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i].last().is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            for _ in i + 1..=j {
                out.push(' ');
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    out.push('"');
                    for _ in 0..hashes {
                        out.push(' ');
                    }
                    break;
                }
                out.push(blank(b[j]));
                j += 1;
            }
            i = j;
            continue;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F}'), not a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(k) => {
                    out.push('\'');
                    for _ in i + 1..k {
                        out.push(' ');
                    }
                    out.push('\'');
                    i = k + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The index of the `}` closing the `{` at `open`.
fn closing(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every function in a source file that is not test code, as (name, first
/// line from 1, lines), test modules (`#[cfg(test)] mod`) and `#[test]`
/// functions left out.
fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(src);
    let bytes = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut test_regions = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let at = from + at;
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else { break };
        if bytes[open] == b'{' {
            test_regions.push((at, closing(bytes, open).unwrap_or(code.len())));
        }
        from = open + 1;
    }
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ") {
        let at = from + at;
        from = at + 3;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() || test_regions.iter().any(|&(a, b)| at > a && at < b) {
            continue;
        }
        let before = &code[..at];
        let attrs_start = before.trim_end().rfind('\n').map_or(0, |n| n + 1);
        if code[attrs_start..at].contains("#[test]")
            || before[before.len().saturating_sub(200)..].trim_end().ends_with("#[test]")
        {
            continue;
        }
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else { continue };
        if bytes[open] == b';' {
            continue;
        }
        let end = closing(bytes, open).unwrap_or(code.len() - 1);
        let first = line_of(at);
        found.push((name, first, line_of(end) - first + 1));
    }
    found
}

/// True when the comment block right above line `first` (1-based) says why
/// the function is long: a line containing `long:`.
fn justified(src: &str, first: usize) -> bool {
    let lines: Vec<&str> = src.lines().collect();
    let mut k = first.saturating_sub(1);
    while k > 0 {
        k -= 1;
        let l = lines[k].trim_start();
        if !(l.starts_with("//") || l.starts_with("#[")) {
            break;
        }
        if l.contains("long:") {
            return true;
        }
    }
    false
}

/// Longest a function may be without a reason in its comment.
const MAX_FN_LINES: usize = 80;

#[test]
fn no_function_is_over_80_lines_without_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let src = std::fs::read_to_string(&file).expect("readable source");
        let rel = file.strip_prefix(root).expect("in the repo").display().to_string();
        for (name, first, lines) in functions(&src) {
            let key = format!("{rel}:{name}");
            if lines > MAX_FN_LINES && !justified(&src, first) {
                problems.push(format!("{key}:{lines} (line {first})"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "functions over {MAX_FN_LINES} lines: split them at their seams, or say why in a `long:` comment above:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_function_scanner_skips_strings_comments_and_tests() {
    let src = "fn a() {\n    let s = \"}}\"; // }\n    let c = '{';\n}\n/// long: a table\nfn b<'x>(v: &'x str) -> &'x str {\n    v\n}\n#[cfg(test)]\nmod tests {\n    fn helper() {}\n}\n";
    assert_eq!(functions(src), [("a".to_string(), 1, 4), ("b".to_string(), 6, 3)]);
    assert!(justified(src, 6) && !justified(src, 1));
}

/// `code` with test modules (`#[cfg(test)] mod ... { }`) blanked.
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]") {
        let at = from + at;
        let Some(open) = out[at..].find(['{', ';']).map(|o| at + o) else { break };
        if out.as_bytes()[open] == b'{' {
            let end = closing(out.as_bytes(), open).unwrap_or(out.len() - 1);
            let blank: String = out[at..=end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
            out.replace_range(at..=end, &blank);
        }
        from = open + 1;
    }
    out
}

/// The first path segment of each path after `prefix` (`super::a::b`,
/// `super::{a, b::c}` over several lines).
fn first_segments(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let rest = &code[from + at + prefix.len()..];
        from += at + prefix.len();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        found.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 {
                    item.push(c);
                }
            }
            found.insert(ident(&item));
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

/// Inside a domain folder: each child module (file or sub-folder) and the
/// sibling modules it uses, directly (`super::b`, `crate::folder::b`) or
/// through a name its `mod.rs` re-exports from a sibling (`super::Thing`
/// where `mod.rs` says `pub use b::Thing`). `mod.rs` itself declares and
/// drives its children: its own items are the folder's surface, so a child
/// naming them is the tree's shape, not a cycle between peers.
fn folder_graph(folder: &Path, name: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut children: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(folder).expect("readable folder") {
        let path = entry.expect("directory entry").path();
        let stem = path.file_stem().expect("a name").to_string_lossy().into_owned();
        if path.is_dir() {
            let mut files = Vec::new();
            rust_files(&path, &mut files);
            children.entry(stem).or_default().extend(files);
        } else if path.extension().is_some_and(|x| x == "rs") && stem != "mod" {
            children.entry(stem).or_default().push(path);
        }
    }
    // Names mod.rs brings in from a child (`pub use b::{X, Y}`, `use b::Z`).
    // The folder's own module: `mod.rs`, or `folder.rs` beside it.
    let own = if folder.join("mod.rs").exists() { folder.join("mod.rs") } else { folder.with_extension("rs") };
    let mod_rs = without_tests(&code_only(&std::fs::read_to_string(own).unwrap_or_default()));
    let mut reexported: BTreeMap<String, String> = BTreeMap::new();
    for stmt in mod_rs.split(';') {
        let stmt = stmt.trim();
        let Some(at) = stmt.find("use ") else { continue };
        let path = stmt[at + 4..].trim().trim_start_matches("self::");
        let Some((child, items)) = path.split_once("::") else { continue };
        if !children.contains_key(child) {
            continue;
        }
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let last = item.rsplit("::").next().unwrap_or("");
            let alias = last.rsplit(" as ").next().unwrap_or(last).trim();
            if !alias.is_empty() && alias != "self" {
                reexported.insert(alias.to_string(), child.to_string());
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (child, files) in &children {
        let uses = graph.entry(child.clone()).or_default();
        for file in files {
            let code = without_tests(&code_only(&std::fs::read_to_string(file).expect("readable source")));
            let direct = file.parent() == Some(folder);
            let mut named = first_segments(&code, &format!("crate::{name}::"));
            if direct {
                named.extend(first_segments(&code, "super::"));
            }
            for n in named {
                let target = if children.contains_key(&n) { Some(n) } else { reexported.get(&n).cloned() };
                if let Some(t) = target.filter(|t| t != child) {
                    uses.insert(t);
                }
            }
        }
    }
    graph
}

/// Cycles between modules of one folder (nested folders too, named by
/// their crate path: `kubelet_sim::manager: a -> b -> a`) that are the
/// honest shape, each with the reason. None today: every cycle found was
/// broken by moving the shared piece into a leaf module
/// (kubelet_sim/pod.rs and outcome.rs, kubelet_sim/manager/rejection.rs,
/// mock_plugin/placeholder.rs, the encoded stream type in
/// mock_plugin/service.rs, cli/args.rs).
const FOLDER_CYCLES_ALLOWED: &[(&str, &str)] = &[];

/// Every folder of modules under `dir`, nested ones too, sorted.
fn module_folders(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            found.extend(module_folders(&path));
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn no_two_modules_of_a_folder_use_each_other() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    let mut folders = Vec::new();
    for root in [repo.join("src/lib"), repo.join("crates/kubelet/src")] {
        folders.extend(module_folders(&root).into_iter().map(|f| (root.clone(), f)));
    }
    assert!(folders.iter().any(|(_, f)| f.ends_with("kubelet_sim/manager")), "nested folders are not scanned");
    assert!(folders.iter().any(|(_, f)| f.ends_with("kubelet/src/topology")), "the kubelet crate is not scanned");
    for (root, folder) in folders {
        // The folder's path in its crate: `kubelet_sim::manager` for src/lib/kubelet_sim/manager.
        let rel = folder.strip_prefix(&root).expect("under the crate's root");
        let name = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("::");
        let graph = folder_graph(&folder, &name);
        for (a, uses) in &graph {
            // Each cycle once, from the module whose name sorts first, found by search.
            let mut stack = vec![(a.clone(), vec![a.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((node, path)) = stack.pop() {
                for next in graph.get(&node).into_iter().flatten() {
                    if next == a {
                        let cycle = format!("{name}: {} -> {a}", path.join(" -> "));
                        if path.iter().all(|p| p >= a)
                            && !FOLDER_CYCLES_ALLOWED.iter().any(|(c, _)| *c == cycle)
                            && !problems.contains(&cycle)
                        {
                            problems.push(cycle);
                        }
                    } else if next > a && seen.insert(next.clone()) {
                        let mut p = path.clone();
                        p.push(next.clone());
                        stack.push((next.clone(), p));
                    }
                }
            }
            let _ = uses;
        }
    }
    assert!(
        problems.is_empty(),
        "modules of one folder use each other (move the shared piece into a leaf module, or say in \
         FOLDER_CYCLES_ALLOWED why the cycle is honest):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_folder_scanner_follows_super_paths_and_re_exports() {
    let dir = std::env::temp_dir().join(format!("dpctl-layers-{}", std::process::id()));
    let folder = dir.join("dom");
    std::fs::create_dir_all(&folder).expect("temp folder");
    let write = |name: &str, text: &str| std::fs::write(folder.join(name), text).expect("write");
    write("mod.rs", "mod a;\nmod b;\nmod c;\npub use b::{Thing, other::Deep as Alias};\nstruct Own;\n");
    write("a.rs", "use super::{Own, Thing};\nfn f() { let s = \"super::c\"; } // super::c\n");
    write("b.rs", "use super::a::f;\n#[cfg(test)]\nmod tests {\n    use super::super::c::X;\n}\n");
    write("c.rs", "fn g() { crate::dom::Alias::new(); }\n");
    let graph = folder_graph(&folder, "dom");
    std::fs::remove_dir_all(&dir).expect("cleanup");
    let edges = |m: &str| graph[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(edges("a"), ["b"], "Thing is b's, Own is mod.rs's own, strings and comments do not count");
    assert_eq!(edges("b"), ["a"], "test modules do not count");
    assert_eq!(edges("c"), ["b"], "through crate::dom:: and an alias");
}

#[test]
fn only_the_command_layer_uses_clap() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut users: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(root.join("cli")))
        .filter(|f| code_only(&std::fs::read_to_string(f).expect("readable source")).contains("clap::"))
        .map(|f| f.strip_prefix(&root).expect("under src/lib").display().to_string())
        .collect();
    users.sort();
    assert!(users.is_empty(), "clap outside src/lib/cli (flags are the command layer's): {users:?}");
}

/// The library never prints and never asks the process's terminal: commands
/// write through the `output::Streams` that `cli::run` builds from the
/// binary's `output::Term` (which says whether stdout and stderr are
/// terminals), so tests can hand it buffers. indicatif's draw targets reach
/// the process's stderr directly too; the one documented exception is
/// `output::progress_bar`, which draws only when its caller passes
/// `Streams.progress` (stderr is a terminal, not quiet, not `-v`, not JSON),
/// something no test's buffers ever are.
#[test]
fn the_library_writes_only_through_the_term_it_is_given() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let banned = [
        "println!(",
        "print!(",
        "eprintln!(",
        "eprint!(",
        "dbg!(",
        "io::stdout()",
        "io::stderr()",
        "ProgressDrawTarget::stderr",
        "ProgressDrawTarget::stdout",
        "ProgressDrawTarget::term",
    ];
    // (file, banned text, times allowed): the progress bar's draw target.
    let exceptions = [("output/mod.rs", "ProgressDrawTarget::stderr", 1)];
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).expect("under src/lib").display().to_string();
        let code = without_tests(&code_only(&std::fs::read_to_string(f).expect("readable source")));
        for b in banned {
            let n = code.matches(b).count();
            let allowed = exceptions.iter().find(|(file, text, _)| *file == rel && *text == b).map_or(0, |e| e.2);
            if n > allowed {
                problems.push(format!("{rel}: {b}"));
            }
        }
        // The exception holds only while every progress bar is asked for
        // with the caller's `progress` flag (the bench spinner: only under
        // `s.progress.then(...)`).
        for line in code.lines().filter(|l| l.contains("progress_bar(") && !l.contains("pub fn progress_bar")) {
            let gated = line.contains("progress_bar(s.progress,")
                || line.contains("progress_bar(io.progress,")
                || (rel == "output/bench.rs" && line.contains("progress_bar(true,"));
            if !gated {
                problems.push(format!("{rel}: a progress bar not gated by Streams.progress: {}", line.trim()));
            }
        }
        for line in code.lines().filter(|l| l.contains("Spinner::start(") && !l.contains("pub fn start")) {
            if !line.contains(".progress.then(") {
                problems.push(format!("{rel}: a bench spinner not gated by Streams.progress: {}", line.trim()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the library reaches the process's stdout/stderr itself:\n  {}",
        problems.join("\n  ")
    );
}

/// Every file under `dir` (recursively) that reads as text, skipping `target`.
fn text_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                text_files(&path, out);
            }
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
}

/// The places that cite the reference: code, tests, help and README texts.
fn citing_files() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "completions", "benches", "examples", "deploy"] {
        text_files(&root.join(dir), &mut files);
    }
    for file in ["README.md", "BENCHMARKS.md"] {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        files.push((path, text));
    }
    files.sort();
    files
}

/// The section numbers a page's headings carry: `## 3. Title` gives "3",
/// `### 3.2 Title` gives "3.2"; headings inside code fences do not count.
fn doc_sections(page: &str) -> BTreeSet<String> {
    let mut sections = BTreeSet::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else { continue };
        let number: String = heading
            .trim_start_matches('#')
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let number = number.trim_end_matches('.');
        if number.starts_with(|c: char| c.is_ascii_digit()) {
            sections.insert(number.to_string());
        }
    }
    sections
}

/// Every citation of a page under docs/ in `text` as (page, section): the section
/// is the number right after ` §` (`docs/protocol.md §3.7` gives
/// ("protocol.md", Some("3.7")); a range `§2.2–2.5` gives its first number).
fn doc_citations(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("docs/") {
        let rest = &text[at + "docs/".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        let Some(after) = rest[name.len()..].strip_prefix(".md") else { continue };
        if name.is_empty() {
            continue;
        }
        let section = after.strip_prefix(" §").map(|s| {
            let n: String = s.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            n.trim_end_matches('.').to_string()
        });
        found.push((format!("{name}.md"), section));
    }
    found
}

/// Citations of a section of a Markdown page that do not go through `docs/`
/// (a page name, then a space and a section sign): the byte offset of each.
fn bare_section_citations(text: &str) -> Vec<usize> {
    // Built from pieces so that this file does not match itself.
    let needle = [".md", " §"].concat();
    text.match_indices(needle.as_str())
        .map(|(at, _)| at)
        .filter(|&at| {
            let start =
                text[..at].rfind(|c: char| !(c.is_ascii_alphanumeric() || "-_/.".contains(c))).map_or(0, |i| i + 1);
            let path = &text[start..at];
            !path.starts_with("docs/") || path.contains("..")
        })
        .collect()
}

/// The reference under docs/ is the repo's own: nothing points at a
/// directory outside the clone, and every section citation names a page
/// that exists and a section one of its headings carries, so a comment,
/// help text or README line never sends a reader to a dead end.
#[test]
fn every_reference_citation_resolves_inside_the_repo() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Built from pieces so that this file does not match itself.
    let outside = [["..", "/shared"].concat(), ["shared", "/spec"].concat()];
    let mut problems = Vec::new();
    let mut pages: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    let mut cited = 0;
    for (path, text) in citing_files() {
        let shown = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        let line_of = |at: usize| text[..at].lines().count().max(1);
        for needle in &outside {
            for (at, _) in text.match_indices(needle.as_str()) {
                problems.push(format!("{shown}:{}: points outside the repo ({needle})", line_of(at)));
            }
        }
        for at in bare_section_citations(&text) {
            problems.push(format!("{shown}:{}: a section citation not under docs/", line_of(at)));
        }
        for (page, section) in doc_citations(&text) {
            cited += 1;
            let sections = pages.entry(page.clone()).or_insert_with(|| {
                std::fs::read_to_string(root.join("docs").join(&page)).ok().map(|t| doc_sections(&t))
            });
            match (sections, section) {
                (None, _) => problems.push(format!("{shown}: cites docs/{page}, which does not exist")),
                (Some(known), Some(n)) if !known.contains(&n) => {
                    problems.push(format!("{shown}: cites docs/{page} §{n}, which has no such section heading"))
                }
                _ => {}
            }
        }
    }
    // The reference pages, the referee and the scripts cite each other by
    // page name; what they must not do either is point outside the clone.
    let mut others = Vec::new();
    for dir in ["docs", "conformance", "scripts", ".ci"] {
        text_files(&root.join(dir), &mut others);
    }
    assert!(others.len() > 10, "only {} reference, referee and script files found", others.len());
    for (path, text) in &others {
        let shown = path.strip_prefix(root).unwrap_or(path).display().to_string();
        for needle in &outside {
            for (at, _) in text.match_indices(needle.as_str()) {
                problems
                    .push(format!("{shown}:{}: points outside the repo ({needle})", text[..at].lines().count().max(1)));
            }
        }
    }
    assert!(cited > 100, "the scan found only {cited} citations: is it reading the tree?");
    assert!(problems.is_empty(), "{} dangling citation(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_citation_scanner_finds_pages_sections_and_bare_citations() {
    let page = "# T\n## 1. One\n### 1.2 Sub\n```\n## 9. In a fence\n```\n## Summary\n";
    assert_eq!(doc_sections(page), BTreeSet::from(["1".to_string(), "1.2".to_string()]));
    let text = format!(
        "see docs/{p}.md{s}1.2, docs/{p}.md{s}2.2–2.5; docs/{p}.md{s}9. and docs/{p}.md",
        p = "protocol",
        s = " §"
    );
    let page_ = || "protocol.md".to_string();
    assert_eq!(
        doc_citations(&text),
        [
            (page_(), Some("1.2".to_string())),
            (page_(), Some("2.2".to_string())),
            (page_(), Some("9".to_string())),
            (page_(), None)
        ]
    );
    let bare = format!("({p}.md{s}4) and docs/{p}.md{s}4 and ../{p}.md{s}4", p = "topology", s = " §");
    assert_eq!(bare_section_citations(&bare).len(), 2, "the bare one and the one outside docs/");
}

/// The `//` comments of a Rust source, one per line that has one, with their
/// line numbers (from 1). A `//` inside a string (a URL) counts as a comment
/// start too; the check below only looks for words, so that is harmless.
fn line_comments(src: &str) -> Vec<(usize, &str)> {
    src.lines().enumerate().filter_map(|(i, line)| line.find("//").map(|at| (i + 1, &line[at..]))).collect()
}

/// Whether `comment` names a tracker entry by number: the word "issue" or
/// "issues" (any case, a whole word), one space, then a digit. Upstream
/// references keep their form and pass: `kubernetes#125579`, the word followed
/// by `#` and a number, and URLs (`.../issues/` then a number).
fn names_a_ticket(comment: &str) -> bool {
    let lower = comment.to_lowercase();
    lower.match_indices("issue").any(|(at, _)| {
        if lower[..at].ends_with(|c: char| c.is_alphanumeric()) {
            return false;
        }
        let rest = &lower[at + "issue".len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        rest.strip_prefix(' ').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// Comments say what the code guards against and why, not which ticket asked
/// for it: a ticket number means nothing to a reader of the code.
#[test]
fn no_comment_names_a_ticket_instead_of_a_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for (line, comment) in line_comments(&src) {
            if names_a_ticket(comment) {
                found.push(format!("{}:{line}: {}", file.strip_prefix(root).unwrap_or(file).display(), comment.trim()));
            }
        }
    }
    assert!(files.len() > 50, "only {} Rust files found: is the scan reading the tree?", files.len());
    assert!(
        found.is_empty(),
        "comments that name a ticket; say what the code guards against instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_ticket_scanner_tells_tickets_from_upstream_references() {
    let word = "Issue";
    for ticket in [
        format!("// {word} 12 item 8: x"),
        format!("/// see {} 9", word.to_lowercase()),
        format!("//! ({word}s 10, 12)"),
    ] {
        assert!(names_a_ticket(&ticket), "{ticket}");
    }
    for upstream in [
        "// the race (kubernetes#121994)".to_string(),
        "// the race (issue #121994)".to_string(),
        "// https://github.com/kubernetes/kubernetes/issues/121994".to_string(),
        format!("// a t{} 3 cells thick is another word", word.to_lowercase()),
    ] {
        assert!(!names_a_ticket(&upstream), "{upstream}");
    }
    let src = "let url = \"x\"; // trailing\n// whole line\nno comment";
    assert_eq!(line_comments(src), [(1, "// trailing"), (2, "// whole line")]);
}

/// The simulator's device manager (`src/lib/kubelet_sim/manager/`) is a
/// synchronous state machine inside the async wire shell: it imports no
/// runtime, gRPC, transport or client code, never reads the clock (time is
/// an argument, so its tests are deterministic), and the fields of its
/// state are visible only inside it, so the shell changes the state only
/// through its methods (the compiler enforces it once no field is public).
#[test]
fn the_sim_manager_is_synchronous_and_owns_its_state() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib/kubelet_sim/manager");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("state.rs")), "the manager's state.rs is gone: update this test");
    let banned = [
        "tokio",
        "tonic",
        "futures",
        "hyper",
        "tower",
        "crate::transport",
        "crate::plugin_client",
        "crate::podresources",
        "crate::rpc",
        "async ",
        ".await",
        "Instant::now",
        "SystemTime::now",
        "std::thread",
        "std::fs",
        "std::net",
        "std::os::unix::net",
    ];
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).expect("under the manager").display().to_string();
        // Test modules (tests.rs, tests_*.rs, nested ones too) may take a
        // time origin of their own and read test vectors.
        let file = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if file == "tests.rs" || (file.starts_with("tests_") && file.ends_with(".rs")) {
            continue;
        }
        let code = without_tests(&code_only(&std::fs::read_to_string(f).expect("readable source")));
        for b in banned {
            if code.contains(b) {
                problems.push(format!("manager/{rel}: {b}"));
            }
        }
    }
    // The state's fields, every field of `Manager` and of the DRA state:
    // `pub(super)` at most (visible in the manager only), so the shell
    // changes them only through the manager's transitions.
    let owned = [
        ("state.rs", "State"),
        ("state.rs", "Resource"),
        ("state.rs", "Endpoint"),
        ("mod.rs", "Manager"),
        ("dra/mod.rs", "DraState"),
    ];
    for (file, name) in owned {
        let code = code_only(&std::fs::read_to_string(root.join(file)).unwrap_or_default());
        let open = format!("struct {name} {{");
        let Some(at) = code.find(&open) else {
            problems.push(format!("manager/{file}: no `{open}`"));
            continue;
        };
        let start = at + open.len() - 1;
        let end = closing(code.as_bytes(), start).expect("a closed struct");
        for line in code[start..end].lines() {
            let l = line.trim_start();
            if l.starts_with("pub ") || l.starts_with("pub(crate)") || l.starts_with("pub(in") {
                problems.push(format!("manager/{file}: {name} field visible outside the manager: {}", l.trim()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the sim's manager must stay synchronous and own its state (move the I/O to the shell, \
         pass the time in, keep fields pub(super)):\n  {}",
        problems.join("\n  ")
    );
}

/// What compares kubelet releases or names one in code: the release
/// table's own `at_least` and `minor`, an ordering or equality of
/// `KubeletVersion` values, a match on a release number or on master, the
/// table's bounds, and a flag default written as a number.
const VERSION_COMPARISONS: &[&str] = &[
    ".at_least(",
    ".minor()",
    "< KubeletVersion::",
    "> KubeletVersion::",
    "<= KubeletVersion::",
    ">= KubeletVersion::",
    "== KubeletVersion::",
    "!= KubeletVersion::",
    "KubeletVersion::Release(",
    "KubeletVersion::Master",
    "Release(_)",
    "NEWEST_MINOR",
    "OLDEST_MINOR",
    "default_value = \"1.",
];

/// A file that only tests (`tests.rs`, `tests_*.rs`, declared under
/// `#[cfg(test)]`): tests name the releases they pin.
fn is_test_file(f: &Path) -> bool {
    let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    stem == "tests" || stem.starts_with("tests_")
}

/// Every release rule is a named predicate of `KubeletVersion` in the
/// release table (`kubelet_version/`): no other module compares releases,
/// matches on one, or writes one as a number (the default is `NEWEST_NAME`,
/// the first DRA release `FIRST_WITH_DRA`, a release's number `numbered`).
#[test]
fn no_release_comparison_outside_the_release_table() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let table = manifest.join("crates/kubelet/src/kubelet_version");
    assert!(table.join("mod.rs").exists(), "the release table moved: update this test");
    let mut files = Vec::new();
    rust_files(&manifest.join("src/lib"), &mut files);
    rust_files(&manifest.join("crates/kubelet/src"), &mut files);
    let mut problems = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&table) && !is_test_file(f)) {
        let text = std::fs::read_to_string(f).expect("readable source");
        // `code_only` blanks strings, so an attribute's string is read from the text itself.
        let code = without_tests(&code_only(&text));
        for c in VERSION_COMPARISONS.iter().filter(|c| code.contains(**c) || (c.contains('"') && text.contains(**c))) {
            problems.push(format!("{}: {c}", f.strip_prefix(manifest).expect("in the repository").display()));
        }
    }
    assert!(
        problems.is_empty(),
        "releases are compared only in the release table: add a named predicate to KubeletVersion \
         (its first release and a sentence) and ask it:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_release_scanner_skips_test_files_only() {
    assert!(is_test_file(Path::new("src/lib/kubelet_sim/manager/tests_admission.rs")));
    assert!(is_test_file(Path::new("src/lib/kubelet_sim/manager/dra/tests.rs")));
    assert!(!is_test_file(Path::new("src/lib/smoke/engine.rs")));
    let code = without_tests(&code_only(
        "fn f(v: V) -> bool { v == KubeletVersion::Master }\n#[cfg(test)]\nmod t { fn g() { KubeletVersion::Release(3); } }\n",
    ));
    let found: Vec<_> = VERSION_COMPARISONS.iter().filter(|c| code.contains(**c)).collect();
    assert_eq!(found, [&"== KubeletVersion::", &"KubeletVersion::Master"]);
}

/// What marks code as running a command rather than rendering it: awaiting,
/// the runtime, sockets, signals, opening files, starting processes.
const RUNNER_MARKS: &[&str] = &[
    "async fn",
    "async move",
    ".await",
    "tokio",
    "crate::transport",
    "crate::signal",
    "::connect(",
    "std::net",
    "std::os::unix::net",
    "File::create",
    "std::process",
    "exit::",
];

/// The runner marks found in `code` (comments, strings and test modules
/// blanked first), in [`RUNNER_MARKS`] order.
fn runner_marks(src: &str) -> Vec<&'static str> {
    let code = without_tests(&code_only(src));
    RUNNER_MARKS.iter().copied().filter(|m| code.contains(m)).collect()
}

/// The output layer only renders: it turns data into text, tables and JSON.
/// Each command has one runner (its `cli/` module or a domain `run`) that
/// connects, starts and stops things, waits for Ctrl-C, opens files and
/// chooses the exit code; `output/` has no `async fn`, no transport and no
/// `exit::` code.
#[test]
fn the_output_layer_only_renders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib/output");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("kubelet_sim.rs")), "output/kubelet_sim.rs is gone: update this test");
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let rel = f.strip_prefix(&root).expect("under output").display().to_string();
            let src = std::fs::read_to_string(f).expect("readable source");
            runner_marks(&src).into_iter().map(move |m| format!("output/{rel}: {m}"))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "output/ runs a command (move the loop, the connection, the file or the exit code to the command's \
         runner in cli/ or its domain, and pass the data in):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_runner_scanner_sees_code_not_strings_comments_or_tests() {
    let rendering = "pub fn f(w: &mut dyn Write) { let s = \"async fn .await\"; } // tokio::net\n\
                     #[cfg(test)]\nmod tests {\n    #[tokio::test]\n    async fn t() { f().await; }\n}\n";
    assert!(runner_marks(rendering).is_empty(), "{:?}", runner_marks(rendering));
    let running = "use crate::transport::ClientConfig;\npub async fn run() {\n    let c = Client::connect(p).await;\n    \
                   tokio::select! {}\n    std::fs::File::create(p);\n    Ok(exit::CHECK_FAILED)\n}\n";
    assert_eq!(
        runner_marks(running),
        ["async fn", ".await", "tokio", "crate::transport", "::connect(", "File::create", "exit::"]
    );
}

/// The judgements of `doctor` and `smoke` are pure functions over what the
/// probes and steps saw, so each verdict is unit-tested on data: no
/// runtime, socket, signal, process or file system in them.
#[test]
fn the_doctor_and_smoke_judgements_touch_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib");
    let mut problems = Vec::new();
    for rel in
        ["doctor/judge.rs", "doctor/dra_judge.rs", "doctor/overlap.rs", "smoke/steps/judge.rs", "smoke/dra/judge.rs"]
    {
        let src =
            std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e} (moved? update this test)"));
        let fs = without_tests(&code_only(&src)).contains("std::fs").then_some("std::fs");
        problems.extend(runner_marks(&src).into_iter().chain(fs).map(|m| format!("{rel}: {m}")));
    }
    assert!(
        problems.is_empty(),
        "a judgement does I/O (move it to the probe or the step):\n  {}",
        problems.join("\n  ")
    );
}

/// The names an `after_long_help = NAME` or `after_help = NAME()` attribute
/// gives, as written (`HELP`, `sim_help`, `render::after_help`).
fn help_sources(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for key in ["after_long_help", "after_help", "long_about"] {
        for (at, _) in code.match_indices(key) {
            let rest = code[at + key.len()..].trim_start();
            let Some(rest) = rest.strip_prefix('=') else { continue };
            let name: String =
                rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

/// A command's `--help` is written where its flags are defined: every
/// `after_long_help` in `cli/` names a text or function of `cli/` itself (a
/// bare name, not a path into `output/` or a domain), and `output/` builds
/// no help text, so the renderers hold only what a run shows.
#[test]
fn help_texts_live_with_their_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib");
    let mut files = Vec::new();
    rust_files(&root.join("cli"), &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut seen = 0;
    for f in &files {
        let rel = f.strip_prefix(&root).expect("under src/lib").display().to_string();
        for name in help_sources(&code_only(&std::fs::read_to_string(f).expect("readable source"))) {
            seen += 1;
            if name.contains("::") {
                problems.push(format!("{rel}: help built elsewhere: {name}"));
            }
        }
    }
    assert!(seen > 10, "only {seen} help attributes found in cli/: is the scan reading them?");
    let mut out_files = Vec::new();
    rust_files(&root.join("output"), &mut out_files);
    for f in &out_files {
        let code = without_tests(&code_only(&std::fs::read_to_string(f).expect("readable source")));
        if code.contains("fn after_help") || code.contains("fn after_long_help") {
            let rel = f.strip_prefix(&root).expect("under src/lib").display().to_string();
            problems.push(format!("{rel}: builds a --help text"));
        }
    }
    assert!(problems.is_empty(), "move --help texts into the command's cli/ module:\n  {}", problems.join("\n  "));
}

#[test]
fn the_help_scanner_reads_names_and_paths() {
    let code = "#[command(after_long_help = HELP)]\n#[command(x, after_long_help = render::after_help())]\n";
    assert_eq!(help_sources(code), ["HELP", "render::after_help"]);
}

/// The backticked names in `page` that end in `.rs` and stand for a file of
/// `src/lib/` (relative to it): not a path under `tests/` or `src/`, not a
/// pattern (`tests_*.rs`, `cli/<command>.rs`).
fn named_lib_files(page: &str) -> BTreeSet<String> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.ends_with(".rs") && !t.contains(['*', '<', ' ']))
        .filter(|t| !t.starts_with("tests/") && !t.starts_with("src/") && !t.starts_with("crates/"))
        .map(str::to_string)
        .collect()
}

/// docs/layout.md is the map of `src/lib/` a newcomer reads first, so it
/// cannot drift: every file of `src/lib/` is named in it, every file it
/// names exists, its layer table says what `LAYERS` says, and README's
/// Development section links it.
#[test]
fn the_layout_map_names_every_module_and_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/layout.md")).expect("docs/layout.md");
    let lib = root.join("src/lib");
    let mut files = Vec::new();
    rust_files(&lib, &mut files);
    let on_disk: BTreeSet<String> =
        files.iter().map(|f| f.strip_prefix(&lib).expect("under src/lib").display().to_string()).collect();
    let named = named_lib_files(&page);
    let mut problems: Vec<String> =
        on_disk.difference(&named).map(|f| format!("src/lib/{f} is not named in docs/layout.md §3")).collect();
    problems.extend(named.difference(&on_disk).map(|f| format!("docs/layout.md names {f}, which does not exist")));
    // The kubelet crate's files are named by their path from the repo's root.
    let mut crate_files = Vec::new();
    rust_files(&root.join("crates"), &mut crate_files);
    for f in &crate_files {
        let rel = f.strip_prefix(root).expect("in the repo").display().to_string();
        if !page.contains(&format!("`{rel}`")) {
            problems.push(format!("{rel} is not named in docs/layout.md §3"));
        }
    }
    for &(module, layer) in LAYERS {
        let row = page.lines().find(|l| l.starts_with(&format!("| {layer} |")));
        if !row.is_some_and(|r| r.contains(&format!("`{module}`"))) {
            problems.push(format!("docs/layout.md §1: `{module}` is not in the row of layer {layer}"));
        }
    }
    for row in page.lines().filter(|l| l.starts_with("| ") && l.as_bytes().get(2).is_some_and(u8::is_ascii_digit)) {
        let layer: u8 = row[2..].split(' ').next().and_then(|n| n.parse().ok()).expect("a layer number");
        let cell = row.rsplit('|').nth(1).unwrap_or_default();
        for module in cell.split('`').skip(1).step_by(2) {
            if !LAYERS.contains(&(module, layer)) {
                problems.push(format!("docs/layout.md §1 puts `{module}` in layer {layer}; LAYERS does not"));
            }
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let development = readme.split("## Development").nth(1).unwrap_or_default();
    if !development.contains("(docs/layout.md)") {
        problems.push("README's Development section does not link docs/layout.md".into());
    }
    assert!(on_disk.len() > 150, "only {} files under src/lib: is the scan reading the tree?", on_disk.len());
    assert!(crate_files.len() > 10, "only {} files under crates/: is the scan reading the tree?", crate_files.len());
    assert!(problems.is_empty(), "docs/layout.md is out of date:\n  {}", problems.join("\n  "));
}

#[test]
fn the_layout_scanner_reads_file_names_not_paths_or_patterns() {
    let page = "`cli/mod.rs` and `lib.rs`; `tests/layers.rs`, `src/bin/dpctl.rs`, `tests_*.rs`, `cli/<x>.rs`, `cli`";
    assert_eq!(named_lib_files(page), BTreeSet::from(["cli/mod.rs".to_string(), "lib.rs".to_string()]));
}

/// The sim builds every rejection from this table: no device-manager
/// text is spelt out in kubelet_sim's sources, so none can drift from
/// what `explain` knows.
#[test]
fn kubelet_sim_spells_out_no_kubelet_text() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib/kubelet_sim");
    let mut stack = vec![dir];
    let mut offenders = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // Unit tests may quote the texts they expect: whole test
            // modules (`tests.rs`, `tests_*.rs`) and the `#[cfg(test)]` part of a file.
            if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tests")) {
                continue;
            }
            let all = std::fs::read_to_string(&p).unwrap_or_default();
            let text = all.split("#[cfg(test)]").next().unwrap_or_default();
            for t in dpctl::kubelet_texts::ALL_TEXTS.iter().filter(|t| t.played) {
                let head = t.template.split("{}").next().unwrap_or_default();
                if head.len() > 12 && text.contains(&format!("\"{head}")) {
                    offenders.push(format!("{}: {head}", p.display()));
                }
            }
            if text.contains("unexpected(format!(") {
                offenders.push(format!("{}: unexpected(format!(", p.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "use dpctl::kubelet_texts instead: {offenders:#?}");
}
