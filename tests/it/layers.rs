//! The layering that ARCHITECTURE.md promises, checked on the source: the
//! store is the foundation and imports nothing above it; the snapshot
//! format sits on the store; the API and the admin listener do not reach
//! into each other or into the file format.

use std::path::{Path, PathBuf};

/// `(layer, what it must not use)`: a layer is a file or a folder of
/// `src/`; a forbidden name is a crate module (`crate::<name>`) or an
/// external path (`std::fs`, `warp`).
const RULES: &[(&str, &[&str])] = &[
    (
        "store",
        &[
            "crate::snapshot",
            "crate::loader",
            "crate::reload",
            "crate::api",
            "crate::ops",
            "crate::metrics",
            "crate::reply",
            "crate::server",
            "crate::commands",
            "crate::config",
            "crate::generate",
            "std::fs",
            "std::net",
            "tokio",
            "warp",
            "hyper",
        ],
    ),
    (
        "snapshot",
        &[
            "crate::loader",
            "crate::reload",
            "crate::api",
            "crate::ops",
            "crate::metrics",
            "crate::reply",
            "crate::server",
            "crate::commands",
            "crate::config",
            "crate::generate",
            "std::fs",
            "std::net",
            "tokio",
            "warp",
            "hyper",
        ],
    ),
    (
        "metrics.rs",
        &[
            "crate::snapshot",
            "crate::loader",
            "crate::api",
            "crate::ops",
        ],
    ),
    (
        "loader",
        &[
            "crate::api",
            "crate::ops",
            "crate::reload",
            "crate::server",
            "crate::publish",
        ],
    ),
    // The publisher writes what the loader reads: it may use the loader's
    // manifest and storage client, never the serving side.
    (
        "publish",
        &["crate::api", "crate::ops", "crate::reload", "crate::server"],
    ),
    (
        "api",
        &[
            "crate::snapshot",
            "crate::loader",
            "crate::reload",
            "crate::ops",
            "crate::commands",
            "crate::config",
            "crate::generate",
        ],
    ),
    ("ops", &["crate::api", "crate::snapshot", "crate::store"]),
    ("config.rs", &["crate::generate"]),
];

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
fn no_layer_imports_from_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for (layer, forbidden) in RULES {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no source for layer {layer}");
        for file in files {
            let source = std::fs::read_to_string(&file).expect("readable source");
            for path in used_paths(&source) {
                if let Some(bad) = forbidden.iter().find(|f| violates(&path, f)) {
                    problems.push(format!("{}: uses {path} ({bad})", file.display()));
                }
            }
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
