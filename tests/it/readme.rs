//! The README's and docs' examples that a shell cannot check: the first
//! workspace (examples/first-workspace.json) passes `check` with the line
//! the README shows, holds the hash of the README's key and serves with it;
//! every JSON block of README.md and docs/ parses, or is a skeleton with
//! elisions (`...`, `…`). .ci/readme.sh runs the README's shell blocks.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README's key of the first workspace.
const FIRST_KEY: &str = "cura_first_workspace_key";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_workspace_checks_as_the_readme_says_and_serves_with_its_key() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let path = root().join("examples/first-workspace.json");
    let text = std::fs::read_to_string(&path).expect("examples/first-workspace.json");
    let snap: Value = serde_json::from_str(&text).expect("the example is JSON");

    // The README's hash-key line shows the hash the example holds.
    let hash = key_hash(FIRST_KEY);
    assert_eq!(snap["api_keys"][0]["sha256"], hash.as_str());
    let shown = format!(
        "portfolio-replica hash-key {FIRST_KEY}     # {}...{}, the sha256 in the example",
        &hash[..8],
        &hash[hash.len() - 5..]
    );
    assert!(readme.contains(&shown), "README.md lacks {shown:?}");

    // `check` prints what the README's comment says.
    let said = "workspace ws-first, version first-1, 3 records, 0 warning(s)";
    assert!(
        readme.contains(&format!(
            "portfolio-replica check examples/first-workspace.json   # ok: ... {said}"
        )),
        "README.md does not show the check line"
    );
    let out = cli(&["check", path.to_str().expect("a UTF-8 path")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains(said), "{out:?}");

    // Dropped into a directory, it serves its task with the README's key.
    let dir = tempdir();
    write_bytes(dir.path(), "first.json", text.as_bytes());
    let server = TestServer::start_in(dir, |_| {}).await;
    let tasks = server.get("/tasks", Some(FIRST_KEY)).await;
    assert_eq!(tasks.status, 200, "{}", tasks.text());
    assert_eq!(tasks.ids(), vec![snap["tasks"][0]["id"].as_str().unwrap()]);
    assert_eq!(tasks.header("x-snapshot-version"), Some("first-1"));
}

/// The ```json blocks of a Markdown text, with the line each starts on.
fn json_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut open {
            None if line == "```json" => open = Some((i + 2, String::new())),
            Some(_) if line.starts_with("```") => blocks.extend(open.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn every_json_example_parses_or_is_an_elided_skeleton() {
    let mut pages: Vec<PathBuf> = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    pages.extend(
        docs.map(|e| e.expect("a docs/ entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    pages.sort();
    let mut failures = Vec::new();
    let mut parsed = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for (line, block) in json_blocks(&text) {
            let name = page
                .strip_prefix(root())
                .unwrap_or(Path::new("?"))
                .display();
            match serde_json::from_str::<Value>(&block) {
                Ok(_) => parsed += 1,
                Err(_) if block.contains("...") || block.contains('…') => {}
                Err(e) => failures.push(format!("{name}:{line}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(parsed >= 2, "only {parsed} JSON examples parsed");
}
