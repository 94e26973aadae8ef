//! `publish --refresh-signatures`: a signature expires (so that a replayed
//! old version cannot fool a replica for long), so something must sign
//! the versions that serve again before it does: this, from a cron job.
//! Each record whose current version's signature is missing, another
//! key's, not for the record's revision, or past half its validity is
//! written at the next revision with the version signed at it; all of
//! them are then announced in one write of the root. It also signs a fleet
//! published unsigned, once, before replicas start checking signatures.

use std::io::Write;
use std::time::SystemTime;

use super::error::PublishError;
use super::state::{Announced, FleetObjects};
use super::{Opening, Target, announce, each, fail, retried};
use crate::storage::location::StorageOptions;
use crate::tools::sign::Signer;
use portfolio_domain::store::time::utc_now;
use portfolio_wire::manifest::{WorkspaceRecord, record_path};

/// Attempts at one record that keeps changing (as `rollback`'s).
const ATTEMPTS: u32 = 30;

/// What became of one workspace.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Its signature is good for more than half its validity still.
    Fresh,
    /// Written at the next revision, signed; why it needed it.
    Resigned {
        record: WorkspaceRecord,
        why: String,
        conflicts: u32,
    },
}

/// `portfolio-replica publish --refresh-signatures --to URL --sign-key KEY
/// [--workspace ID]...`: re-signs what needs it (every workspace's record,
/// or those named), then announces the records written. Prints a line per
/// workspace re-signed or failed, and the counts. Returns whether none
/// failed.
pub fn refresh_signatures(
    to: &str,
    only: &[String],
    signer: &Signer,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    Target::run(to, options, Opening::Records, err, |target, fleet, err| {
        let records = match target.block_on(fleet.records(only)) {
            Ok(records) => records,
            Err(e) => return fail(err, e),
        };
        let mut failed = 0;
        for missing in only
            .iter()
            .filter(|w| !records.iter().any(|r| &r.workspace == *w))
        {
            failed += 1;
            let missing = PublishError::NoWorkspace {
                workspace: missing.clone(),
            };
            fail(err, missing);
        }
        let outcomes = target.block_on(refresh(fleet, &records, signer, SystemTime::now()));
        let (mut changes, mut fresh): (Vec<Announced>, usize) = (Vec::new(), 0);
        for (record, outcome) in records.iter().zip(outcomes) {
            match outcome {
                Ok(Outcome::Fresh) => fresh += 1,
                Ok(Outcome::Resigned {
                    record,
                    why,
                    conflicts,
                }) => {
                    let Some(current) = record.history.current_version() else {
                        continue;
                    };
                    let _ = writeln!(
                        out,
                        "re-signed: {} {} at revision {} ({why}), valid until {}{}",
                        record.workspace,
                        current.version,
                        record.revision,
                        signer.expiry(current).unwrap_or_else(|| "?".to_owned()),
                        retried(conflicts)
                    );
                    changes.push((record.workspace.clone(), record.revision, current.clone()));
                }
                Err(e) => {
                    failed += 1;
                    let _ = writeln!(err, "error: {}: {e}", record.workspace);
                }
            }
        }
        // Nothing written, nothing to announce (`announce` would say so in a
        // publish's words).
        let announced = changes.is_empty() || announce(target, &changes, out, err);
        let _ = writeln!(
            out,
            "signatures: {} re-signed, {fresh} still fresh (over half of {} left), {failed} failed",
            changes.len(),
            humanize(signer.valid_for())
        );
        announced && failed == 0
    })
}

/// Each of `records` re-signed if it needs it, at most a few at once; the
/// outcomes in the records' order.
pub(super) async fn refresh(
    fleet: &FleetObjects<'_>,
    records: &[WorkspaceRecord],
    signer: &Signer,
    now: SystemTime,
) -> Vec<Result<Outcome, PublishError>> {
    each(records, |record| refresh_one(fleet, record, signer, now)).await
}

/// Re-signs `record` at its next revision if [`Signer::stale`] says it
/// needs it; a record that another writer changed meanwhile is read again
/// and judged again (that writer may have signed it).
async fn refresh_one(
    fleet: &FleetObjects<'_>,
    record: &WorkspaceRecord,
    signer: &Signer,
    now: SystemTime,
) -> Result<Outcome, PublishError> {
    let mut record = record.clone();
    for conflicts in 0..ATTEMPTS {
        let Some(why) = signer.stale(&record, now) else {
            return Ok(Outcome::Fresh);
        };
        let mut signed = record.clone();
        signed.revision += 1;
        signed.updated_at = utc_now();
        signer.sign_current(&mut signed, now)?;
        if fleet.replace(&signed).await? {
            return Ok(Outcome::Resigned {
                record: signed,
                why,
                conflicts,
            });
        }
        record =
            fleet
                .record(&record.workspace)
                .await?
                .ok_or_else(|| PublishError::NoWorkspace {
                    workspace: record.workspace.clone(),
                })?;
    }
    Err(PublishError::KeepsChanging {
        key: record_path(fleet.objects.prefix, &record.workspace),
        attempts: ATTEMPTS,
    })
}

/// `valid_for` as people say it: `7d`, `12h`, `30m`, `45s`.
fn humanize(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
