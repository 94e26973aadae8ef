//! Deterministic randomness: splitmix64 to derive seeds, xoshiro256** to
//! draw, and the record ids drawn from it.
//!
//! Nothing here uses floating point or platform-dependent sizes, so a seed
//! gives the same stream on every machine.

/// Advances a splitmix64 state and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Derives the seed of one independent random stream from the user's seed and two labels.
pub(super) fn stream_seed(seed: u64, workspace: &str, purpose: &str) -> u64 {
    // FNV-1a over the labels keeps the streams of different workspaces apart.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in workspace.bytes().chain([0]).chain(purpose.bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut state = seed ^ hash;
    splitmix64(&mut state)
}

/// A xoshiro256** generator: small, fast and identical on every platform.
pub(super) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Seeds the generator by expanding `seed` with splitmix64.
    pub(super) fn new(seed: u64) -> Self {
        let mut state = seed;
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        Self { s }
    }

    /// Returns the next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Returns a value in `0..n` (`n` must be positive).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Returns a value in the inclusive range `lo..=hi`.
    pub(super) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Returns a value in the inclusive range given as a pair.
    pub(super) fn in_range(&mut self, range: (u64, u64)) -> u64 {
        self.between(range.0, range.1)
    }

    /// Returns a signed value in the inclusive range `lo..=hi`.
    pub(super) fn between_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// Returns an index into a collection of `len` elements.
    pub(super) fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Returns a random element of a non-empty slice.
    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Returns a random string of a non-empty word list.
    pub(super) fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.index(words.len())]
    }

    /// Returns true with probability `percent` / 100.
    pub(super) fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Returns true with probability `per_mille` / 1000.
    pub(super) fn per_mille(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Returns an element chosen by integer weights.
    pub(super) fn weighted<T: Copy>(&mut self, items: &[(T, u64)]) -> T {
        let total: u64 = items.iter().map(|(_, weight)| weight).sum();
        let mut roll = self.below(total);
        for &(item, weight) in items {
            if roll < weight {
                return item;
            }
            roll -= weight;
        }
        items[items.len() - 1].0
    }

    /// Returns a random version-4 UUID (variant digit 8, 9, a or b) as the
    /// number `store::id` reads and writes ids as: the first draw is the
    /// high half, the second the low half.
    pub(super) fn uuid(&mut self) -> u128 {
        /// Clears the version digit and the top two bits of the variant digit.
        const KEEP: u128 = 0xffff_ffff_ffff_0fff_3fff_ffff_ffff_ffff;
        /// Version 4, variant 10xx.
        const SET: u128 = 0x0000_0000_0000_4000_8000_0000_0000_0000;
        let high = u128::from(self.next_u64());
        let low = u128::from(self.next_u64());
        ((high << 64 | low) & KEEP) | SET
    }

    /// Shuffles a slice in place (Fisher-Yates).
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }
}
