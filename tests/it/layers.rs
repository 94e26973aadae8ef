//! The layering that ARCHITECTURE.md promises, where the compiler cannot
//! check it. Between crates Cargo does (the domain has no dependency on
//! tokio, hyper or warp; nothing below the binary can name it); this file
//! checks the rest on the source:
//!
//! - inside the binary crate, each module uses only the modules its row of
//!   [`BINARY_LAYERS`] names (the layer table of ARCHITECTURE.md, "Layers
//!   inside the binary");
//! - the domain crate does no IO and starts no thread (a dependency the
//!   compiler cannot refuse: `std` is always there);
//! - no three source files or more import each other in a circle, even
//!   where some of them also use each other in pairs (two files that use
//!   each other, a module and its parent, are allowed; so is a row of such
//!   pairs). A circle found is named file by file, with every file of its
//!   knot (the files that all reach each other).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The binary's modules, and which of the others each may use. The
/// crates below it (`portfolio_domain`, `portfolio_os`, ...) are named by
/// their own names, never re-exported as if they were modules of the
/// binary, and every module may use them. `lib.rs`, `main.rs` and `config`
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
        &["serve::residency", "metrics", "serve::reply"],
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

/// A file's code without comments and without its unit tests (the module
/// of them at the end, `#[cfg(test)] mod tests`): what the product runs.
/// Code after a test-only item before them (a helper, `#[cfg(test)] impl`)
/// is the product's too, so such an item is read with it.
fn product_code(source: &str) -> String {
    let tests = source
        .match_indices("#[cfg(test)]")
        .find(|(at, attribute)| {
            let item = source[at + attribute.len()..].trim_start();
            let item = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|v| item.strip_prefix(v))
                .unwrap_or(item);
            item.starts_with("mod ")
        });
    let code = &source[..tests.map_or(source.len(), |(at, _)| at)];
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
        } else if path.contains("::") {
            // A bare word is no path: `pub(super)` is a visibility, not a
            // use of the parent.
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
            let ok = starts_with_path(rest, module)
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

/// A crate's source files by module path (`store::builder::finish`).
struct Crate {
    modules: BTreeMap<String, PathBuf>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let modules = files
            .into_iter()
            .filter(|f| !f.ends_with("main.rs"))
            .map(|f| (module_of(src, &f), f))
            .collect();
        Crate { modules }
    }

    /// The file a path names: its longest prefix that is a module.
    fn resolve(&self, path: &[&str]) -> Option<&String> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find_map(|m| self.modules.get_key_value(&m).map(|(k, _)| k))
    }

    /// Each file's module, and the modules (files) of this crate it uses
    /// through `crate::`, `self::` and `super::` paths. A parent's plain
    /// `child::item` is not counted: a module uses its own children freely,
    /// and counting it would make a circle of every child that uses the
    /// parent's items and a sibling.
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

/// A crate's import graph: each module, and the modules it uses.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Files that all reach each other through their imports (a strongly
/// connected component of three or more), and a shortest circle among
/// them: `circle[0]` uses `circle[1]`, ..., the last uses `circle[0]`.
#[derive(Debug)]
struct Knot {
    circle: Vec<String>,
    files: Vec<String>,
}

/// Every knot of three files or more in `graph` that holds a circle of
/// three or more, in the order of their first module.
///
/// Two files that use each other (a module and its parent, say) are
/// allowed, and so are several such pairs in a row: `a <-> b <-> c` is no
/// circle unless `c` also uses `a` (or `a` `c`), because no file then
/// comes back to itself without passing one twice. Everything else that
/// comes back to where it started is a circle: a circle is a directed
/// path `a -> b -> c -> ... -> a` through three distinct files or more,
/// whether or not some of them also use each other the other way, as
/// `pack <-> pass <-> train` with `pack -> train` does.
fn knots(graph: &Graph) -> Vec<Knot> {
    components(graph)
        .into_iter()
        .filter(|c| c.len() >= 3)
        .filter_map(|files| {
            let circle = shortest_circle(graph, &files)?;
            Some(Knot {
                circle,
                files: files.into_iter().collect(),
            })
        })
        .collect()
}

/// The strongly connected components of `graph` (Tarjan's algorithm),
/// sorted by their first module.
fn components(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, node: &'g str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            self.on_stack.insert(node);
            let graph = self.graph;
            for next in graph[node].iter().filter(|n| graph.contains_key(*n)) {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = BTreeSet::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.insert(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                self.found.push(component);
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !tarjan.index.contains_key(node.as_str()) {
            tarjan.visit(node);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

/// A shortest circle of three files or more inside `files` (a strongly
/// connected component), starting at the first file, in order, that lies
/// on one; none if the component is only pairs that use each other.
///
/// For each file `s` and each file `a` it uses, a breadth-first search
/// from `a` that never enters `s` finds the nearest file `u` other than
/// `a` that uses `s`: `s -> a -> ... -> u -> s` is then the shortest such
/// circle through `s -> a`, and it has three files or more.
fn shortest_circle(graph: &Graph, files: &BTreeSet<String>) -> Option<Vec<String>> {
    let uses = |node: &str| graph[node].iter().filter(|n| files.contains(*n));
    let mut best: Option<Vec<String>> = None;
    for s in files {
        for a in uses(s) {
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([a.as_str()]);
            came_from.insert(a, s);
            while let Some(u) = queue.pop_front() {
                if u != a && graph[u].contains(s) {
                    let mut path = vec![u.to_owned()];
                    let mut at = u;
                    while at != a {
                        at = came_from[at];
                        path.push(at.to_owned());
                    }
                    path.push(s.clone());
                    path.reverse();
                    if best.as_ref().is_none_or(|b| path.len() < b.len()) {
                        best = Some(path);
                    }
                    break;
                }
                for next in uses(u) {
                    if next != s && !came_from.contains_key(next.as_str()) {
                        came_from.insert(next, u);
                        queue.push_back(next);
                    }
                }
            }
            if best.as_ref().is_some_and(|b| b.len() == 3) {
                return best;
            }
        }
    }
    best
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
        let krate = Crate::read(&src);
        let file = |module: &String| {
            krate.modules[module]
                .strip_prefix(root())
                .unwrap_or(&krate.modules[module])
                .display()
                .to_string()
        };
        for knot in knots(&krate.imports()) {
            let mut circle: Vec<String> = knot.circle.iter().map(file).collect();
            circle.push(circle[0].clone());
            let files: Vec<String> = knot.files.iter().map(file).collect();
            problems.push(format!(
                "{}\n    ({} files reach each other: {})",
                circle.join(" -> "),
                files.len(),
                files.join(", ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "import circles of three files or more (each a shortest one among \
         files that all reach each other; two files that use each other are \
         allowed):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_import_checker_sees_every_form_of_import() {
    let code = product_code(
        "use crate::{api::Route, store};\npub(super) fn h() {}\nuse std::fs::File; // crate::ops\nfn f() { crate::snapshot::load(); warp::any(); }\n#[cfg(test)]\nfn helper() {}\nfn g() { crate::limit::admit(); }\n#[cfg(test)]\nmod tests { use std::net::TcpStream; }",
    );
    let paths = used_paths(&code);
    for expected in [
        "crate::api::Route",
        "crate::store",
        "std::fs::File",
        "crate::snapshot::load",
        "warp::any",
        // Past a test-only item, the product goes on.
        "crate::limit::admit",
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
    assert!(
        !paths.iter().any(|p| p == "super"),
        "a visibility is not a use: {paths:?}"
    );
    assert!(starts_with_path("crate::api::Route", "crate::api"));
    assert!(!starts_with_path("crate::apis", "crate::api"));
}

/// A graph of the edges given, each `(a, b)` meaning `a` uses `b`.
fn graph(edges: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for (a, b) in edges {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    }
    g
}

/// The circles [`knots`] finds in the graph of `edges`.
fn circles(edges: &[(&str, &str)]) -> Vec<Vec<String>> {
    knots(&graph(edges)).into_iter().map(|k| k.circle).collect()
}

#[test]
fn the_circle_checker_allows_pairs_and_catches_every_circle_of_three_or_more() {
    let none: Vec<Vec<String>> = Vec::new();
    assert_eq!(
        circles(&[("a", "b"), ("b", "a")]),
        none,
        "a pair is allowed"
    );
    assert_eq!(circles(&[("a", "b"), ("b", "c")]), none, "a line");
    assert_eq!(
        circles(&[("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")]),
        none,
        "pairs in a row, a <-> b <-> c: no file comes back without passing one twice"
    );
    assert_eq!(
        circles(&[("a", "b"), ("b", "c"), ("c", "a")]),
        [["a", "b", "c"]]
    );

    // The shape gzip-fragments had: pack and pass use each other, so do
    // pass and train, and pack uses train. Dropping the pairs' edges hid
    // pack -> train -> pass -> pack.
    let gzip = [
        ("pack", "pass"),
        ("pass", "pack"),
        ("pass", "train"),
        ("train", "pass"),
        ("pack", "train"),
    ];
    assert_eq!(circles(&gzip), [["pack", "train", "pass"]]);
    let knot = &knots(&graph(&gzip))[0];
    assert_eq!(knot.files, ["pack", "pass", "train"]);
    // Three files that all use each other.
    assert_eq!(
        circles(&[
            ("a", "b"),
            ("b", "a"),
            ("b", "c"),
            ("c", "b"),
            ("c", "a"),
            ("a", "c"),
        ]),
        [["a", "b", "c"]]
    );

    // A circle of five, and a shortcut that makes a shorter one of three:
    // the shortest is named, with all five files of the knot.
    let five = [
        ("origin", "dir"),
        ("dir", "copies"),
        ("copies", "objects"),
        ("objects", "cached"),
        ("cached", "origin"),
    ];
    assert_eq!(
        circles(&five),
        [["cached", "origin", "dir", "copies", "objects"]]
    );
    let shortcut = [&five[..], &[("copies", "origin")]].concat();
    let knot = &knots(&graph(&shortcut))[0];
    assert_eq!(knot.circle, ["copies", "origin", "dir"]);
    assert_eq!(knot.files.len(), 5);

    // Two knots apart, each named; a pair beside them stays allowed.
    assert_eq!(
        circles(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("x", "y"),
            ("y", "z"),
            ("z", "x"),
            ("p", "q"),
            ("q", "p"),
            ("c", "x"),
        ]),
        [["a", "b", "c"], ["x", "y", "z"]]
    );
}
