//! The layering that ARCHITECTURE.md promises, checked on the source. The
//! layer table in ARCHITECTURE.md ("## Layers") is the allow list: every
//! top-level module of `src/` has a row, and a module may use of the crate
//! only itself and the modules its row names under "may import". On top of
//! that, the store and the snapshot format do no IO.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// External paths the foundation must not use: the store and the snapshot
/// format do no IO and know no HTTP (ARCHITECTURE.md, "Invariants").
const NO_IO: &[&str] = &["std::fs", "std::net", "tokio", "warp", "hyper"];
const NO_IO_LAYERS: &[&str] = &["store", "snapshot"];

/// What a row's "may import" cell allows.
#[derive(Debug)]
enum Allowed {
    /// The wiring (`lib.rs`, `main.rs`): anything.
    Anything,
    Modules(Vec<String>),
}

/// The layer table of ARCHITECTURE.md: module name (`store`, `metrics`)
/// to what it may import.
fn layer_table() -> BTreeMap<String, Allowed> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("a \"## Layers\" section in ARCHITECTURE.md");
    let mut table = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a layer row has three cells: {line}");
        let allowed = if cells[2].starts_with("anything") {
            Allowed::Anything
        } else {
            Allowed::Modules(ticked(cells[2]).map(module_name).collect())
        };
        for layer in ticked(cells[0]) {
            let previous = table.insert(
                module_name(layer),
                match &allowed {
                    Allowed::Anything => Allowed::Anything,
                    Allowed::Modules(m) => Allowed::Modules(m.clone()),
                },
            );
            assert!(
                previous.is_none(),
                "{layer} has two rows in the layer table"
            );
        }
    }
    assert!(table.len() > 5, "the layer table was not found: {table:?}");
    table
}

/// The `code` spans of a table cell.
fn ticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

/// `store/` and `metrics.rs` both name a module: `store`, `metrics`.
fn module_name(text: &str) -> String {
    text.trim_end_matches('/')
        .trim_end_matches(".rs")
        .to_owned()
}

/// Every top-level module of `src/`: its name and its file or folder.
fn top_level_modules() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: Vec<(String, PathBuf)> = std::fs::read_dir(&src)
        .expect("src/")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (module_name(&name), p)
        })
        .collect();
    modules.sort();
    modules
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

/// Every path a source file uses, outside comments: `crate::a::b`,
/// `crate::{a, b::c}` and plain `std::fs::File`, `warp::Filter` as written.
fn used_paths(source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
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
        if path.starts_with("crate::") && bytes.get(i) == Some(&b'{') {
            // `crate::{a, b::c}`: each member is a path of its own.
            let end = code[i..].find('}').map_or(code.len(), |e| i + e);
            for member in code[i + 1..end].split(',') {
                paths.push(format!("{path}{}", member.trim()));
            }
            i = end;
        } else {
            paths.push(path.to_owned());
        }
    }
    paths
}

fn violates(path: &str, forbidden: &str) -> bool {
    path == forbidden
        || path
            .strip_prefix(forbidden)
            .is_some_and(|rest| rest.starts_with("::"))
}

#[test]
fn every_module_imports_only_what_the_layer_table_allows() {
    let table = layer_table();
    let mut problems = Vec::new();
    for (module, path) in top_level_modules() {
        let Some(allowed) = table.get(&module) else {
            problems.push(format!(
                "src/{module} has no row in the layer table of ARCHITECTURE.md"
            ));
            continue;
        };
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("readable source");
            for used in used_paths(&source) {
                let Some(rest) = used.strip_prefix("crate::") else {
                    if NO_IO_LAYERS.contains(&module.as_str())
                        && let Some(bad) = NO_IO.iter().find(|f| violates(&used, f))
                    {
                        problems.push(format!(
                            "{}: uses {used} ({bad}: no IO here)",
                            file.display()
                        ));
                    }
                    continue;
                };
                let target = rest.split("::").next().unwrap_or(rest);
                let ok = target == module
                    || match allowed {
                        Allowed::Anything => true,
                        Allowed::Modules(modules) => modules.iter().any(|m| m == target),
                    };
                if !ok {
                    problems.push(format!(
                        "{}: uses {used}, but the layer table lets {module} import only {allowed:?}",
                        file.display()
                    ));
                }
            }
        }
    }
    for layer in table.keys() {
        if !top_level_modules().iter().any(|(m, _)| m == layer) {
            problems.push(format!(
                "the layer table names {layer}, which src/ does not have"
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
fn the_checker_sees_every_form_of_import() {
    let source = "use crate::{api::Route, store};\nuse std::fs::File; // crate::ops\nfn f() { crate::snapshot::load(); warp::any(); }";
    let paths = used_paths(source);
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
    assert!(violates("crate::api::Route", "crate::api"));
    assert!(!violates("crate::apis", "crate::api"));
}
