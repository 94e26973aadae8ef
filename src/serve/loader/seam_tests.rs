//! Under `--trust-key`, what loads is the file the scan opened, hashed as
//! the load reads it: a symlink flipped to a forged file with the same
//! header before the load reads it, and flipped back before the load is
//! judged, never serves the forged records. The flips happen at the
//! load's seams (`load::seam`), exactly there, every time.

use std::os::unix::fs::symlink;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::fetch;
use super::files::Files;
use super::limit::{Ledger, MemoryLimit};
use super::load::seam::{self, Step};
use super::load::{self, EntryRead, Loading};
use crate::metrics::Metrics;
use crate::storage::signatures::{Named, Statement, Trust, TrustedKeys};
use crate::storage::{Directory, StorageOrigin};
use portfolio_wire::signed::SecretKey;

const COMPANY: &str = "00000000-0000-4000-8000-100000000000";

/// A snapshot of `ws-acme` at version `v1` whose one company is `name`.
fn snapshot(name: &str) -> Vec<u8> {
    let key = format!("{:x}", Sha256::digest("cura_acme"));
    serde_json::to_vec(&json!({
        "format_version": 1,
        "version": "v1",
        "workspace": {"id": "ws-acme"},
        "api_keys": [{"sha256": key, "label": "test"}],
        "companies": [{"id": COMPANY, "attributes": {"name": name}}],
    }))
    .unwrap()
}

/// The signature of `bytes` as `ws-acme` at `v1`.
fn signature(bytes: &[u8], key: &SecretKey) -> Vec<u8> {
    let sha256 = format!("{:x}", Sha256::digest(bytes));
    let keys = [format!("{:x}", Sha256::digest("cura_acme"))];
    let named = Named {
        workspace: "ws-acme",
        version: "v1",
        sha256: &sha256,
        key_hashes: None,
        revision: None,
    };
    let day = Duration::from_secs(86_400);
    Statement::new(&named, &keys, 1, SystemTime::now(), day)
        .sign(key)
        .to_json()
}

/// What one scan's fetch and load of `acme.json` give, with `hook` run at
/// each of the load's seams.
fn fetch_then_load(origin: &StorageOrigin, hook: impl Fn(Step) + 'static) -> EntryRead {
    let listing = origin.list().expect("listed");
    let entries: Vec<_> = listing
        .entries
        .iter()
        .map(|(name, fp)| (name.clone(), fp.as_ref().expect("readable").clone()))
        .collect();
    let files = Mutex::new(Files::default());
    let metrics = Metrics::new(&[]);
    let ledger = Ledger::default();
    let loading = Loading {
        origin,
        metrics: &metrics,
        memory: MemoryLimit::none(),
        ledger: &ledger,
        precompress: false,
    };
    let fetched = fetch::fetch_in_order(origin, &files, entries, &listing.signed);
    seam::HOOK.set(Some(Box::new(hook)));
    let mut reads: Vec<EntryRead> =
        std::thread::scope(|scope| load::load_on_cores(scope, fetched, &loading).collect());
    seam::HOOK.set(None);
    assert_eq!(reads.len(), 1);
    reads.pop().unwrap()
}

#[test]
fn a_symlink_flipped_between_the_fetch_and_the_load_never_serves_the_forged_file() {
    let dir = tempfile::tempdir().unwrap();
    let at = |p: &str| dir.path().join(p);
    let key = SecretKey::from_seed([7; 32]);
    let (signed, forged) = (snapshot("Signed"), snapshot("Forged"));
    std::fs::write(at("signed.data"), &signed).unwrap();
    std::fs::write(at("forged.data"), &forged).unwrap();
    std::fs::write(at("acme.json.sig"), signature(&signed, &key)).unwrap();
    symlink("signed.data", at("acme.json")).unwrap();
    let mut keys = TrustedKeys::default();
    keys.add(key.public());
    let trust = Arc::new(Trust::new(keys, None).unwrap());
    let directory = Directory::open(dir.path()).unwrap().verifying(true);
    let origin = StorageOrigin::new(directory).trusting(trust);
    let fingerprint_of = |bytes: &[u8]| {
        portfolio_domain::snapshot::load("x", bytes)
            .unwrap()
            .dataset
            .fingerprint
    };
    let (signed_fp, forged_fp) = (fingerprint_of(&signed), fingerprint_of(&forged));
    assert_ne!(signed_fp, forged_fp);
    // Old enough not to be left to settle.
    std::thread::sleep(Duration::from_millis(200));

    let root = dir.path().to_owned();
    let point = move |to: &str| {
        symlink(to, root.join("acme.link")).unwrap();
        std::fs::rename(root.join("acme.link"), root.join("acme.json")).unwrap();
    };
    let flip = move |step: Step| match step {
        Step::Load => point("forged.data"),
        Step::Judge => point("signed.data"),
    };
    match fetch_then_load(&origin, flip) {
        // Loaded from what was opened: the signed records.
        EntryRead::Done(read) => {
            let loaded = read.result.as_ref().expect("the signed file loads");
            assert_eq!(
                loaded.dataset.fingerprint, signed_fp,
                "the forged records loaded"
            );
        }
        EntryRead::Settling(name) => panic!("{name} settling"),
        EntryRead::Failed(name, error) => panic!("{name}: {error}"),
    }
    // The forged file under the signed file's signature: refused for its
    // bytes.
    symlink("forged.data", at("acme.link")).unwrap();
    std::fs::rename(at("acme.link"), at("acme.json")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    match fetch_then_load(&origin, |_| {}) {
        EntryRead::Done(read) => {
            let error = read.result.err().expect("the forged file is refused");
            assert!(error.to_string().contains("mismatch"), "{error}");
        }
        EntryRead::Settling(name) => panic!("{name} settling"),
        EntryRead::Failed(name, error) => panic!("{name}: {error}"),
    }
}
