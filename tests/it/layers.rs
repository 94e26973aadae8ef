//! The layering that ARCHITECTURE.md promises, where the compiler cannot
//! check it. Between crates Cargo does (the domain has no dependency on
//! tokio, hyper or warp; nothing below the binary can name it); this file
//! checks the rest on the source:
//!
//! - inside the binary crate, each module uses only the modules its row of
//!   [`BINARY_LAYERS`] names (the layer table of ARCHITECTURE.md, "Inside
//!   the binary");
//! - the domain crate does no IO and starts no thread (a dependency the
//!   compiler cannot refuse: `std` is always there);
//! - no three source files or more import each other in a circle (two
//!   that use each other, a module and its parent, are allowed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The binary's modules, and which of the others each may use. The
/// crates below it (`store`, `snapshot` and `os` are re-exported at its
/// root) may be used by every module. `lib.rs`, `main.rs` and `config`
/// wire everything and are not listed.
const BINARY_LAYERS: &[(&str, &[&str])] = &[
    ("threads", &[]),
    ("metrics", &[]),
    ("storage", &["metrics"]),
    ("serve::build", &["storage", "metrics", "threads"]),
    ("serve::residency", &["serve::build", "storage", "metrics"]),
    (
        "serve::loader",
        &[
            "serve::residency",
            "serve::build",
            "storage",
            "metrics",
            "threads",
        ],
    ),
    ("serve::reload", &["serve::loader"]),
    ("serve::reply", &[]),
    (
        "serve::api",
        &[
            "serve::loader",
            "serve::residency",
            "metrics",
            "serve::reply",
        ],
    ),
    ("serve::ops", &["serve::loader", "metrics", "serve::reply"]),
    ("serve::server", &[]),
    ("serve", &["config", "storage", "metrics"]),
    ("tools::http_client", &[]),
    ("tools::check", &["storage", "threads"]),
    ("tools::diff", &["tools::check", "storage"]),
    ("tools::commands", &["tools::http_client"]),
    ("tools::sign", &["tools::check", "storage"]),
    (
        "tools::publish",
        &[
            "tools::check",
            "tools::diff",
            "tools::http_client",
            "tools::sign",
            "storage",
        ],
    ),
];

/// What the binary's root re-exports from the crates below it.
const BELOW: &[&str] = &["store", "snapshot", "os"];

/// Paths the domain crate must not use: no IO, no threads of its own.
const DOMAIN_FORBIDS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::thread::spawn",
    "std::thread::scope",
    "std::thread::Builder",
    "tokio",
    "hyper",
    "warp",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .expect("a readable source folder")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            rust_files(&entry, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// A file's code without comments and without its unit tests (which sit
/// at the end, after `#[cfg(test)]`): what the product runs.
fn product_code(source: &str) -> String {
    let code = source.split("#[cfg(test)]").next().unwrap_or(source);
    code.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path the code uses: `crate::a::b`, each member of
/// `crate::{a, b::c}` (and of `super::{..}`), and plain `std::fs::File`.
fn used_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) || (i > 0 && is_ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        let path = &code[start..i];
        if path.ends_with("::") && bytes.get(i) == Some(&b'{') {
            let end = code[i..].find('}').map_or(code.len(), |e| i + e);
            for member in code[i + 1..end].split(',') {
                let member = member.trim().trim_start_matches('{');
                if !member.is_empty() {
                    paths.push(format!("{path}{member}"));
                }
            }
            i = end;
        } else {
            paths.push(path.to_owned());
        }
    }
    paths
}

fn starts_with_path(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The binary module a file of `src/` belongs to: the longest row of
/// [`BINARY_LAYERS`] its path falls under.
fn binary_module(file: &Path) -> Option<&'static str> {
    let relative = file.strip_prefix(root().join("src")).ok()?;
    let as_path = relative
        .with_extension("")
        .to_string_lossy()
        .replace('/', "::");
    let as_path = as_path.trim_end_matches("::mod");
    BINARY_LAYERS
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| starts_with_path(as_path, m))
        .max_by_key(|m| m.len())
}

#[test]
fn every_binary_module_uses_only_what_its_layer_allows() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let Some(module) = binary_module(file) else {
            continue;
        };
        seen.insert(module);
        let allowed = BINARY_LAYERS
            .iter()
            .find(|(m, _)| *m == module)
            .map(|(_, a)| *a)
            .unwrap_or_default();
        let code = product_code(&std::fs::read_to_string(file).expect("readable source"));
        for used in used_paths(&code) {
            let Some(rest) = used.strip_prefix("crate::") else {
                continue;
            };
            let ok = BELOW.iter().any(|b| starts_with_path(rest, b))
                || starts_with_path(rest, module)
                || allowed.iter().any(|a| starts_with_path(rest, a))
                // A module may use its own children (`serve` its `api`).
                || BINARY_LAYERS.iter().any(|(m, _)| {
                    starts_with_path(rest, m) && starts_with_path(m, module)
                });
            if !ok {
                problems.push(format!(
                    "{}: uses {used}, but {module} may use only {allowed:?} and the crates below",
                    file.display()
                ));
            }
        }
    }
    for (module, _) in BINARY_LAYERS {
        if !seen.contains(module) {
            problems.push(format!(
                "the layer table names {module}, which src/ does not have"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_domain_does_no_io_and_starts_no_thread() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/domain/src"), &mut files);
    assert!(files.len() > 10, "the domain crate's sources: {files:?}");
    let mut problems = Vec::new();
    for file in &files {
        let code = product_code(&std::fs::read_to_string(file).expect("readable source"));
        for used in used_paths(&code) {
            if let Some(bad) = DOMAIN_FORBIDS.iter().find(|f| starts_with_path(&used, f)) {
                problems.push(format!("{}: uses {used} ({bad})", file.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the domain must stay pure:\n{}",
        problems.join("\n")
    );
}

/// A crate's source files by module path (`store::builder::finish`), and
/// the module path of each file.
struct Crate {
    src: PathBuf,
    modules: BTreeMap<String, PathBuf>,
}

impl Crate {
    fn read(src: PathBuf) -> Crate {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules = files
            .into_iter()
            .filter(|f| !f.ends_with("main.rs"))
            .map(|f| (module_of(&src, &f), f))
            .collect();
        Crate { src, modules }
    }

    /// The file a path names: its longest prefix that is a module.
    fn resolve(&self, path: &[&str]) -> Option<&String> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find_map(|m| self.modules.get_key_value(&m).map(|(k, _)| k))
    }

    /// Each file's module, and the modules (files) of this crate it uses.
    fn imports(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph = BTreeMap::new();
        for (module, file) in &self.modules {
            let code = product_code(&std::fs::read_to_string(file).expect("readable source"));
            let here: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
            let mut uses = BTreeSet::new();
            for used in used_paths(&code) {
                let segments: Vec<&str> = used.split("::").filter(|s| !s.is_empty()).collect();
                let absolute: Vec<&str> = match segments.first() {
                    Some(&"crate") => segments[1..].to_vec(),
                    Some(&"super") | Some(&"self") => {
                        // A `mod.rs` is its folder's module, so `super`
                        // counts from the module either way.
                        let mut base = here.clone();
                        let mut rest = &segments[..];
                        if rest[0] == "self" {
                            rest = &rest[1..];
                        }
                        while rest.first() == Some(&"super") {
                            base.pop();
                            rest = &rest[1..];
                        }
                        base.extend_from_slice(rest);
                        base
                    }
                    _ => continue,
                };
                if let Some(target) = self.resolve(&absolute)
                    && target != module
                {
                    uses.insert(target.clone());
                }
            }
            graph.insert(module.clone(), uses);
        }
        graph
    }
}

/// `src/store/builder/finish.rs` → `store::builder::finish`; `lib.rs` and
/// a folder's `mod.rs` are the folder's module.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file of the crate");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// A circle of three files or more in `graph`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search over the edges that are not half of a pair
    // (a module and its parent may use each other).
    let edge = |a: &String, b: &String| {
        graph[a].contains(b) && !graph.get(b).is_some_and(|back| back.contains(a))
    };
    fn visit(
        node: &String,
        graph: &BTreeMap<String, BTreeSet<String>>,
        edge: &dyn Fn(&String, &String) -> bool,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            return Some(stack[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph[node].iter().filter(|n| graph.contains_key(*n)) {
            if edge(node, next)
                && let Some(found) = visit(next, graph, edge, stack, done)
            {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = visit(node, graph, &edge, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

#[test]
fn no_three_files_import_each_other_in_a_circle() {
    let mut sources = vec![root().join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .map(|e| e.expect("an entry").path().join("src"))
        .collect();
    crates.sort();
    sources.extend(crates);
    let mut problems = Vec::new();
    for src in sources {
        let krate = Crate::read(src);
        if let Some(found) = circle(&krate.imports()) {
            problems.push(format!("{}: {}", krate.src.display(), found.join(" -> ")));
        }
    }
    assert!(
        problems.is_empty(),
        "import circles:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checkers_see_every_form_of_import_and_every_circle() {
    let code = product_code(
        "use crate::{api::Route, store};\nuse std::fs::File; // crate::ops\nfn f() { crate::snapshot::load(); warp::any(); }\n#[cfg(test)]\nmod tests { use std::net::TcpStream; }",
    );
    let paths = used_paths(&code);
    for expected in [
        "crate::api::Route",
        "crate::store",
        "std::fs::File",
        "crate::snapshot::load",
        "warp::any",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} in {paths:?}"
        );
    }
    assert!(
        !paths.iter().any(|p| p.contains("ops")),
        "comments are not code: {paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("net")),
        "unit tests are not the product: {paths:?}"
    );
    assert!(starts_with_path("crate::api::Route", "crate::api"));
    assert!(!starts_with_path("crate::apis", "crate::api"));

    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(
        circle(&graph(&[("a", "b"), ("b", "a")])).is_none(),
        "a pair is allowed"
    );
    assert!(circle(&graph(&[("a", "b"), ("b", "c")])).is_none());
    let found = circle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])).expect("a circle of three");
    assert_eq!(found.len(), 3);
}
