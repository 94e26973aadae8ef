//! Which snapshot may serve a workspace and a key when several claim the
//! same: the one rule, used alike by the server's scan, `check`, `publish`
//! and `rollback`, so that they never disagree.
//!
//! A workspace is served by one snapshot, and an API key opens one
//! workspace. Among claims to the same workspace or key, the *older*
//! content wins (the time it was written: a file's modification time, an
//! object's last modification, a manifest version's `published_at`), and
//! between contents of the same age the first name. The rule looks at the
//! contents alone, never at what a process happened to load first, so every
//! replica, however it got there, and every restart agree on which
//! workspace a key reads, as long as they see the same times. With an
//! object store they do; in a directory the time is each replica's own
//! copy's, so replicas agree only if their copies keep the source's
//! modification times (`rsync -a`, `cp -p`), and otherwise may decide a
//! conflict differently (docs/reload.md#conflicts).

use rustc_hash::FxHashMap;
use std::fmt;
use std::time::SystemTime;

use super::key::KeyHash;

/// One snapshot's claim: the workspace it serves and the keys that open it.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// What messages call it: a file name, a path, or a workspace's entry.
    pub name: &'a str,
    /// When its content was written; `UNIX_EPOCH` when not known.
    pub written: SystemTime,
    pub workspace: &'a str,
    pub keys: &'a [KeyHash],
}

/// Why a claim lost, naming the claim that holds what it asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// Another snapshot serves its workspace.
    Workspace {
        name: String,
        workspace: String,
        holder: String,
    },
    /// One of its keys already opens another snapshot's workspace.
    Key {
        name: String,
        workspace: String,
        holder: String,
    },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Workspace {
                name,
                workspace,
                holder,
            } => write!(
                f,
                "workspace {workspace:?} is already named by {holder}; {name} names it too and is rejected"
            ),
            Conflict::Key {
                name,
                workspace,
                holder,
            } => write!(
                f,
                "an api_keys entry of {name} is already a key of workspace {workspace:?} in {holder}; \
                 one key must not open two workspaces, so {name} is rejected"
            ),
        }
    }
}

/// The workspaces and keys held so far, and by whom.
/// FxHash: a scan decides every claim of the fleet for each batch it
/// settles, and the keys are SHA-256 digests and the operator's ids.
#[derive(Debug, Default)]
pub struct Holders<'a> {
    workspaces: FxHashMap<&'a str, &'a str>,
    keys: FxHashMap<KeyHash, (&'a str, &'a str)>,
}

impl<'a> Holders<'a> {
    /// Takes what `claim` asks for, unless something of it is held already:
    /// then nothing is taken and the conflict says by whom.
    pub fn take(&mut self, claim: &Claim<'a>) -> Result<(), Conflict> {
        self.check(claim)?;
        self.workspaces.insert(claim.workspace, claim.name);
        for key in claim.keys {
            self.keys.insert(*key, (claim.workspace, claim.name));
        }
        Ok(())
    }

    /// Whether `claim` could be taken, without taking it.
    pub fn check(&self, claim: &Claim<'a>) -> Result<(), Conflict> {
        if let Some(holder) = self.workspaces.get(claim.workspace) {
            return Err(Conflict::Workspace {
                name: claim.name.to_owned(),
                workspace: claim.workspace.to_owned(),
                holder: (*holder).to_owned(),
            });
        }
        match claim.keys.iter().find_map(|key| self.keys.get(key)) {
            Some((workspace, holder)) => Err(Conflict::Key {
                name: claim.name.to_owned(),
                workspace: (*workspace).to_owned(),
                holder: (*holder).to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// The order in which claims are decided: older content first, then name.
pub fn precedence(claims: &[Claim<'_>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by(|&a, &b| {
        (claims[a].written, claims[a].name).cmp(&(claims[b].written, claims[b].name))
    });
    order
}

/// Decides every claim at once: for each, `Ok` if it serves, or the
/// conflict that rejects it. `held` has what is taken before any of these
/// (the second round for previous versions, or what a manifest serves), and
/// ends up with what the winners took.
pub fn resolve<'a>(claims: &[Claim<'a>], held: &mut Holders<'a>) -> Vec<Result<(), Conflict>> {
    let mut verdicts = vec![Ok(()); claims.len()];
    for i in precedence(claims) {
        verdicts[i] = held.take(&claims[i]);
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn claim<'a>(name: &'a str, secs: u64, workspace: &'a str, keys: &'a [KeyHash]) -> Claim<'a> {
        Claim {
            name,
            written: at(secs),
            workspace,
            keys,
        }
    }

    fn winners(claims: &[Claim<'_>]) -> Vec<String> {
        let verdicts = resolve(claims, &mut Holders::default());
        claims
            .iter()
            .zip(verdicts)
            .filter(|(_, v)| v.is_ok())
            .map(|(c, _)| c.name.to_owned())
            .collect()
    }

    #[test]
    fn the_older_content_wins_whatever_the_order_given() {
        let k = [[1; 32]];
        let a = claim("a.json", 20, "ws-a", &k);
        let b = claim("b.json", 10, "ws-b", &k);
        assert_eq!(winners(&[a, b]), ["b.json"]);
        assert_eq!(winners(&[b, a]), ["b.json"]);
    }

    #[test]
    fn contents_of_the_same_age_go_by_name() {
        let a = claim("a.json", 10, "ws", &[]);
        let b = claim("b.json", 10, "ws", &[]);
        assert_eq!(winners(&[b, a]), ["a.json"]);
    }

    #[test]
    fn a_loser_takes_nothing_so_a_later_claim_on_what_it_asked_for_may_win() {
        let (k1, k2) = ([[1; 32]], [[1; 32], [2; 32]]);
        let k3 = [[2; 32]];
        // b loses k1 to a; c then wants k2's second key, which b never took.
        let claims = [
            claim("a", 1, "ws-a", &k1),
            claim("b", 2, "ws-b", &k2),
            claim("c", 3, "ws-c", &k3),
        ];
        assert_eq!(winners(&claims), ["a", "c"]);
    }

    #[test]
    fn conflicts_name_both_snapshots_and_what_they_share() {
        let k = [[7; 32]];
        let claims = [claim("a", 1, "ws-a", &k), claim("b", 2, "ws-b", &k)];
        let verdicts = resolve(&claims, &mut Holders::default());
        let message = verdicts[1].clone().unwrap_err().to_string();
        assert_eq!(
            message,
            "an api_keys entry of b is already a key of workspace \"ws-a\" in a; \
             one key must not open two workspaces, so b is rejected"
        );
        let claims = [claim("a", 1, "ws", &[]), claim("b", 2, "ws", &[])];
        let message = resolve(&claims, &mut Holders::default())[1]
            .clone()
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "workspace \"ws\" is already named by a; b names it too and is rejected"
        );
    }

    #[test]
    fn what_is_held_already_wins_over_every_claim() {
        let k = [[3; 32]];
        let mut held = Holders::default();
        held.take(&claim("manifest", 99, "ws-a", &k)).unwrap();
        let claims = [claim("new", 1, "ws-b", &k)];
        assert!(resolve(&claims, &mut held)[0].is_err());
        assert!(held.check(&claim("other", 0, "ws-c", &[[4; 32]])).is_ok());
    }
}
