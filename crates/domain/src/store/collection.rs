//! The one list of record collections.
//!
//! Everything that names the eight collections (the snapshot's keys, the
//! builder's parts, record counts, metrics labels, dangling-reference
//! warnings) derives from the `collections!` invocation below or matches
//! exhaustively on [`Collection`], so a new collection is one line here and
//! then whatever the compiler points at.

use std::ops::{Index, IndexMut};

macro_rules! collections {
    ($($variant:ident => $name:ident),* $(,)?) => {
        /// A kind of record a workspace holds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Collection {
            $($variant),*
        }

        impl Collection {
            /// Every collection, in the order a snapshot lists them.
            pub const ALL: [Collection; [$(stringify!($variant)),*].len()] =
                [$(Collection::$variant),*];

            /// How many collections there are.
            pub const COUNT: usize = Collection::ALL.len();

            /// The collection's key in a snapshot file, and its label in metrics.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Collection::$variant => stringify!($name)),*
                }
            }
        }

        /// How many records of each collection a dataset holds.
        /// Read back from `/snapshots` by `versions --replica`: a count a
        /// replica does not send (an older build) is 0.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct RecordCounts {
            $(pub $name: usize),*
        }

        impl Index<Collection> for RecordCounts {
            type Output = usize;
            fn index(&self, collection: Collection) -> &usize {
                match collection {
                    $(Collection::$variant => &self.$name),*
                }
            }
        }

        impl IndexMut<Collection> for RecordCounts {
            fn index_mut(&mut self, collection: Collection) -> &mut usize {
                match collection {
                    $(Collection::$variant => &mut self.$name),*
                }
            }
        }
    };
}

collections! {
    Companies => companies,
    Tasks => tasks,
    Roles => roles,
    Feed => feed,
    Notes => notes,
    Metrics => metrics,
    Meetings => meetings,
    MeetingNotes => meeting_notes,
}

impl Collection {
    /// The collection whose records this one's records point at: every
    /// record belongs to a company, and a meeting note to a meeting.
    pub const fn parent(self) -> Option<Collection> {
        match self {
            Collection::Companies => None,
            Collection::Tasks
            | Collection::Roles
            | Collection::Feed
            | Collection::Notes
            | Collection::Metrics
            | Collection::Meetings => Some(Collection::Companies),
            Collection::MeetingNotes => Some(Collection::Meetings),
        }
    }

    /// What one record of the collection is called, in messages.
    pub const fn record_name(self) -> &'static str {
        match self {
            Collection::Companies => "company",
            Collection::Tasks => "task",
            Collection::Roles => "role",
            Collection::Feed => "feed entry",
            Collection::Notes => "note",
            Collection::Metrics => "metric value",
            Collection::Meetings => "meeting",
            Collection::MeetingNotes => "meeting note",
        }
    }

    /// The collection a snapshot key names, if it names one.
    pub fn from_name(name: &str) -> Option<Collection> {
        Collection::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The collection's position in [`Collection::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl RecordCounts {
    /// Each collection with its count, in [`Collection::ALL`] order.
    pub fn by_collection(&self) -> [(Collection, usize); Collection::COUNT] {
        Collection::ALL.map(|c| (c, self[c]))
    }

    pub fn total(&self) -> usize {
        Collection::ALL.iter().map(|&c| self[c]).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_collection_once_in_declaration_order() {
        for (i, c) in Collection::ALL.into_iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Collection::from_name(c.name()), Some(c));
        }
        assert_eq!(Collection::from_name("workspace"), None);
    }

    #[test]
    fn counts_serialize_by_collection_name_in_order() {
        let mut counts = RecordCounts::default();
        for (i, c) in Collection::ALL.into_iter().enumerate() {
            counts[c] = i;
        }
        let json = serde_json::to_string(&counts).unwrap();
        let names: Vec<String> = Collection::ALL
            .iter()
            .enumerate()
            .map(|(i, c)| format!("\"{}\":{i}", c.name()))
            .collect();
        assert_eq!(json, format!("{{{}}}", names.join(",")));
        assert_eq!(counts.total(), (0..Collection::COUNT).sum::<usize>());
    }
}
