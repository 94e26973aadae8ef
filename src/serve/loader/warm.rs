//! Step 6 of a scan, warm up: each dataset about to be published (it won
//! its conflicts) starts warming on the warm-up threads
//! (`serve::build::warming`) before the publish shares it, and each older
//! version that serves again has the fragments made again that a load let
//! go. Under a budget the scan's hollowing (`hollow.rs`) starts warming
//! what stays resident instead.

use std::sync::Arc;

use super::files::{FileEntry, Files};
use crate::serve::build::warming::{Repacks, remake_fragments, start};
use portfolio_domain::store::Dataset;

/// Warms what a settle is about to publish: the dataset of each file
/// `loaded` (it won its conflicts) starts warming ([`start`]) before the
/// publish shares it, and each older version `restored` (it serves again
/// because the newer content lost) has the fragments made again that the
/// load let go ([`remake_fragments`]). A dataset that lost is not warmed: it never
/// serves. Returns the repacks of small changes, to run once published.
pub fn start_warming<'a>(
    files: &mut Files,
    loaded: impl IntoIterator<Item = &'a str>,
    restored: &[Arc<Dataset>],
    precompress: bool,
) -> Repacks {
    let mut repacks = Repacks::default();
    for name in loaded {
        let Some(dataset) = files.get_mut(name).and_then(FileEntry::dataset_mut) else {
            continue;
        };
        // Settling wrapped it and nothing has shared it yet: it is the
        // catalog that will.
        match Arc::get_mut(dataset) {
            Some(dataset) => repacks.add(start(dataset, precompress)),
            None => tracing::warn!(
                file = %name,
                "cannot warm a dataset already shared; gzip answers are compressed per request"
            ),
        }
    }
    for dataset in restored {
        remake_fragments(dataset);
    }
    repacks
}
