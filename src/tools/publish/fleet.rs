//! `versions --replica ADDRESS...`: which version each replica serves, next
//! to what the manifest says should serve. It asks each replica's admin
//! listener for `/snapshots` (plain HTTP on loopback or a private network,
//! as the admin listener is meant to be reached), reads it as the
//! [`SnapshotsStatus`] the replica wrote, and marks the replicas that are
//! behind, stale, or failing to read storage.

use std::collections::HashMap;
use std::time::Duration;

use super::Workspaces;
use crate::tools::http_client::{self, HttpUrl, ReadMode, Unreachable, UrlError};
use portfolio_wire::status::{FileStatus, SnapshotsStatus};

/// How long one replica may take to answer, from connecting to the last
/// byte of `/snapshots`.
const TIMEOUT: Duration = Duration::from_secs(3);

/// A report line per replica and workspace, and whether every replica
/// could be read. With one workspace named (`only`), a replica is asked for
/// that workspace alone (`/snapshots?workspace=`), not the whole fleet's.
pub fn report(workspaces: &Workspaces, only: &[String], replicas: &[HttpUrl]) -> (String, bool) {
    let mut text = String::from("\nreplicas:\n");
    let mut all_read = true;
    let query = match only {
        [one] => format!("snapshots?workspace={}", encode(one)),
        _ => "snapshots".to_owned(),
    };
    for replica in replicas {
        match snapshots(replica, &query) {
            Ok(status) => text.push_str(&describe(workspaces, replica, &status)),
            Err(e) => {
                all_read = false;
                text.push_str(&format!("  {replica}  {e}\n"));
            }
        }
    }
    (text, all_read)
}

/// What `/snapshots` of one replica says, against the manifest.
fn describe(workspaces: &Workspaces, replica: &HttpUrl, status: &SnapshotsStatus) -> String {
    let mut text = String::new();
    if let Some(source) = &status.source
        && let Some(error) = &source.error
    {
        text.push_str(&format!(
            "  {replica}  cannot poll storage ({}): {error}\n",
            source.error_kind.as_deref().unwrap_or("?")
        ));
    }
    // One pass over the files, not one per workspace of the manifest.
    let by_workspace: HashMap<&str, &FileStatus> = status
        .files
        .iter()
        .rev()
        .filter_map(|f| Some((f.workspace.as_deref()?, f)))
        .collect();
    for (name, workspace) in workspaces {
        let current = workspace
            .current_version()
            .map_or("?", |v| v.version.as_str());
        let Some(entry) = by_workspace.get(name.as_str()) else {
            text.push_str(&format!(
                "  {replica}  {name}  NOT SERVED (current is {current})\n"
            ));
            continue;
        };
        let serving = entry.serving_version.as_deref().unwrap_or("nothing");
        let state = if serving == current {
            "current".to_owned()
        } else {
            format!("BEHIND: current is {current}")
        };
        let stale = entry
            .stale_seconds
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.0}s"));
        // The workspace's own revision: the manifest's rises with every
        // workspace's publishes, so it does not say whether this one is behind.
        let revision = entry
            .source
            .as_ref()
            .and_then(|s| s.workspace_revision)
            .map_or_else(|| "-".to_owned(), |r| r.to_string());
        let problem = entry
            .source_error
            .as_ref()
            .or(entry.error.as_ref())
            .map(|e| format!("  problem: {e}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "  {replica}  {name}  {serving} ({state})  workspace revision {revision}  stale {stale}{problem}\n"
        ));
    }
    text
}

/// Why a replica's `/snapshots` could not be read: the report's line for
/// it, led by a word in capitals an operator can grep for.
#[derive(Debug, thiserror::Error)]
enum ReplicaProblem {
    #[error("{0}")]
    Address(#[from] UrlError),
    #[error("UNREACHABLE: {0}")]
    Unreachable(#[from] Unreachable),
    // The API listener wants a key for every path; the admin one never does.
    #[error(
        "WRONG ADDRESS: the replica answered 401: is this the admin address \
         (--admin-listen), not the API port?"
    )]
    WrongAddress,
    #[error("UNREADABLE: /snapshots answered {0}, not 200")]
    NotOk(String),
    #[error("UNREADABLE: /snapshots answered 200 but not its JSON: {0}")]
    NotJson(#[from] serde_json::Error),
}

/// `GET /snapshots` from a replica's admin listener, or why not: no
/// connection, or an answer that is not a replica's status.
fn snapshots(replica: &HttpUrl, query: &str) -> Result<SnapshotsStatus, ReplicaProblem> {
    let url = replica.join(query)?;
    let answer = http_client::get(&url, TIMEOUT, ReadMode::Body)?;
    match answer.status.as_u16() {
        200 => Ok(serde_json::from_slice(&answer.body)?),
        401 => Err(ReplicaProblem::WrongAddress),
        _ => Err(ReplicaProblem::NotOk(answer.status_line)),
    }
}

/// `text` as a query value.
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::assert_holds;
    use portfolio_wire::manifest::{History, Version};

    fn status(body: Value) -> SnapshotsStatus {
        serde_json::from_value(body).expect("a /snapshots body")
    }

    #[test]
    fn marks_replicas_behind_the_manifest() {
        let mut history: Option<History> = None;
        for (n, name) in [(1u8, "v1"), (2, "v2")] {
            let version = Version {
                file: "acme.json".to_owned(),
                ..Version::for_tests(n, "ws-acme", name)
            };
            match &mut history {
                Some(h) => assert!(h.publish(version, 10)),
                None => history = Some(History::first(version)),
            }
        }
        let manifest: Workspaces = [("ws-acme".to_owned(), history.unwrap())].into();
        let source = json!({"key": "objects/ws-acme/x.json.gz", "etag": null, "sha256": "01",
            "size": 1, "fetched_at": "2026-01-01T00:00:00Z", "from_cache": false});
        let file = |serving: &str, revision: u64, stale: f64, error: Value| {
            let mut source = source.clone();
            source["manifest_revision"] = json!(revision + 10);
            source["workspace_revision"] = json!(revision);
            json!({"file": "ws-acme", "workspace": "ws-acme", "serving_version": serving,
                "warnings": [], "stale_seconds": stale, "source": source,
                "source_error": error, "error": null})
        };
        let r1: HttpUrl = "r1:9090".parse().unwrap();
        let behind = status(json!({"files": [file("v1", 1, 42.0, json!("throttled"))],
            "source": {"url": "s3://b/p/", "mode": "manifest", "consecutive_failures": 3,
                "error": "slow down", "error_kind": "throttling", "serving_from_cache": false}}));
        let text = describe(&manifest, &r1, &behind);
        assert!(text.contains("v1 (BEHIND: current is v2)"), "{text}");
        assert_holds(&text, &["stale 42s", "problem: throttled"]);
        assert!(
            text.contains("r1:9090  cannot poll storage (throttling): slow down"),
            "{text}"
        );
        let r2: HttpUrl = "http://r2:9090".parse().unwrap();
        let current = status(json!({"files": [file("v2", 2, 0.4, Value::Null)]}));
        let text = describe(&manifest, &r2, &current);
        assert_eq!(
            text,
            "  http://r2:9090  ws-acme  v2 (current)  workspace revision 2  stale 0s\n"
        );
        let text = describe(&manifest, &r1, &status(json!({"files": []})));
        assert!(text.contains("NOT SERVED"), "{text}");
    }
}
