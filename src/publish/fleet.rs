//! `versions --replica HOST:PORT...`: which version each replica serves,
//! next to what the manifest says should serve. It asks each replica's admin
//! listener for `/snapshots` (plain HTTP/1.0 on loopback or a private
//! network, as the admin listener is meant to be reached) and marks the
//! replicas that are behind, stale, or failing to read storage.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

use crate::storage::manifest::Manifest;

/// How long one replica may take to answer.
const TIMEOUT: Duration = Duration::from_secs(3);

/// A report line per replica and workspace.
pub fn report(manifest: &Manifest, replicas: &[String]) -> String {
    let mut text = String::from("\nreplicas:\n");
    for replica in replicas {
        match snapshots(replica) {
            Ok(body) => text.push_str(&describe(manifest, replica, &body)),
            Err(e) => text.push_str(&format!("  {replica}  UNREACHABLE: {e}\n")),
        }
    }
    text
}

/// What `/snapshots` of one replica says, against the manifest.
fn describe(manifest: &Manifest, replica: &str, body: &Value) -> String {
    let mut text = String::new();
    let source = &body["source"];
    if let Some(error) = source["error"].as_str() {
        text.push_str(&format!(
            "  {replica}  cannot poll storage ({}): {error}\n",
            source["error_kind"].as_str().unwrap_or("?")
        ));
    }
    for (name, workspace) in &manifest.workspaces {
        let current = workspace
            .current_version()
            .map_or("?", |v| v.version.as_str());
        let entry = body["files"]
            .as_array()
            .and_then(|files| files.iter().find(|f| f["workspace"] == name.as_str()));
        let Some(entry) = entry else {
            text.push_str(&format!(
                "  {replica}  {name}  NOT SERVED (current is {current})\n"
            ));
            continue;
        };
        let serving = entry["serving_version"].as_str().unwrap_or("nothing");
        let state = if serving == current {
            "current".to_owned()
        } else {
            format!("BEHIND: current is {current}")
        };
        let stale = entry["stale_seconds"]
            .as_f64()
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.0}s"));
        let revision = entry["source"]["manifest_revision"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), |r| r.to_string());
        let problem = entry["source_error"]
            .as_str()
            .or(entry["error"].as_str())
            .map(|e| format!("  problem: {e}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "  {replica}  {name}  {serving} ({state})  revision {revision}  stale {stale}{problem}\n"
        ));
    }
    text
}

/// `GET /snapshots` from a replica's admin listener.
fn snapshots(replica: &str) -> Result<Value, String> {
    let addr = replica
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut conn = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    // HTTP/1.0: the answer ends with the connection, never chunked.
    write!(conn, "GET /snapshots HTTP/1.0\r\nHost: {replica}\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("not an HTTP answer")?;
    let status = String::from_utf8_lossy(&answer[..split]);
    if !status.starts_with("HTTP/1.1 200") && !status.starts_with("HTTP/1.0 200") {
        return Err(status.lines().next().unwrap_or("").to_owned());
    }
    serde_json::from_slice(&answer[split + 4..]).map_err(|e| format!("not /snapshots JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::manifest::Version;

    #[test]
    fn marks_replicas_behind_the_manifest() {
        let mut manifest = Manifest::empty();
        for (n, name) in [(1u8, "v1"), (2, "v2")] {
            let sha256 = format!("{n:02x}").repeat(32);
            manifest.publish(
                "ws-acme",
                Version {
                    key: format!("objects/ws-acme/{sha256}.json.gz"),
                    sha256,
                    size: 1,
                    version: name.to_owned(),
                    published_at: String::new(),
                    file: "acme.json".to_owned(),
                    records: 1,
                },
                10,
            );
        }
        let behind = json!({"files": [{"workspace": "ws-acme", "serving_version": "v1",
            "stale_seconds": 42.0, "source": {"manifest_revision": 1},
            "source_error": "throttled", "error": null}],
            "source": {"error": null}});
        let text = describe(&manifest, "r1:9090", &behind);
        assert!(text.contains("v1 (BEHIND: current is v2)"), "{text}");
        assert!(
            text.contains("stale 42s") && text.contains("problem: throttled"),
            "{text}"
        );
        let current = json!({"files": [{"workspace": "ws-acme", "serving_version": "v2",
            "stale_seconds": 0.4, "source": {"manifest_revision": 2}}], "source": {}});
        let text = describe(&manifest, "r2:9090", &current);
        assert!(
            text.contains("v2 (current)  revision 2  stale 0s"),
            "{text}"
        );
        let text = describe(&manifest, "r3:9090", &json!({"files": []}));
        assert!(text.contains("NOT SERVED"), "{text}");
    }
}
