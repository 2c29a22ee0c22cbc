//! Answers per storage tier (added in 1.3): what [`Index::check_tiers`]
//! returns beside each page's tier, and the recipe that turns it into a
//! router's weighted credit.
//!
//! [`Index::check_tiers`]: crate::Index::check_tiers

use crate::sys;

/// A page's tier when it is not fully present at any tier.
pub const TIER_ABSENT: u8 = sys::SCI_TIER_ABSENT as u8;
/// Most tiers an index's map may name.
pub const TIERS_MAX: usize = sys::SCI_TIERS_MAX as usize;

/// The per-tier answer of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierSummary {
    /// Tiers in the index's map ([`IndexOptions::medium_tiers`](crate::IndexOptions::medium_tiers)).
    pub n_tiers: usize,
    /// Whole pages (router blocks) in the request.
    pub n_pages: usize,
    /// `L[t]`: the longest usable prefix, in pages, counting only pages at
    /// tier `t` or faster. Never decreases with `t`; `L[n_tiers - 1]` is
    /// the plain prefix answer. Entries from `n_tiers` on are 0.
    pub prefix_pages: [usize; TIERS_MAX],
    /// How many pages have their best tier at `t`.
    pub pages_at: [usize; TIERS_MAX],
    /// The leading prompt tokens the engine will load counting only tier `t`
    /// or faster (added in 1.4; [`PageSummary::prefix_tokens`](crate::PageSummary::prefix_tokens)
    /// per tier). Entries from `n_tiers` on are 0.
    pub prefix_tokens: [usize; TIERS_MAX],
}

impl TierSummary {
    /// `L[t]` for every tier of the map, fastest first.
    pub fn prefixes(&self) -> &[usize] {
        &self.prefix_pages[..self.n_tiers.min(TIERS_MAX)]
    }

    /// [`prefix_tokens`](TierSummary::prefix_tokens) for every tier of the
    /// map, fastest first.
    pub fn token_prefixes(&self) -> &[usize] {
        &self.prefix_tokens[..self.n_tiers.min(TIERS_MAX)]
    }

    /// A router's credit for the pool's share of the prefix, each page
    /// counted once, at the fastest tier whose prefix holds it, and nothing
    /// past a hole:
    ///
    /// `credit = sum over t of weights[t] x (pages of L[t] not already in
    /// L[t-1] nor within device_overlap)`.
    ///
    /// Dynamo's router credits shared-cache blocks beyond the device overlap
    /// at one weight (0.5), and host and disk blocks at 0.75 and 0.25; given
    /// `weights` per tier of the pool's map (say `[0.75, 0.25]` for cpu and
    /// disk), this is that credit without its two flaws: a block is never
    /// credited both as host/disk and as shared (each counts at one tier),
    /// and ranges after a missing block, which a prefix reuse cannot load,
    /// count for nothing (`L[t]` is a prefix). `device_overlap`: pages the
    /// worker already holds on its device (not credited again). Tiers past
    /// `weights.len()` are credited at 0.
    pub fn weighted_credit(&self, device_overlap: usize, weights: &[f64]) -> f64 {
        let mut credit = 0.0;
        let mut counted = device_overlap;
        for (tier, &end) in self.prefixes().iter().enumerate() {
            if end > counted {
                credit += weights.get(tier).copied().unwrap_or(0.0) * (end - counted) as f64;
                counted = end;
            }
        }
        credit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(prefixes: &[usize]) -> TierSummary {
        let mut s = TierSummary { n_tiers: prefixes.len(), ..Default::default() };
        s.prefix_pages[..prefixes.len()].copy_from_slice(prefixes);
        s
    }

    #[test]
    fn each_page_is_credited_once_at_its_fastest_tier() {
        // 3 pages in memory, then 5 more on disk: 3 x 0.75 + 5 x 0.25.
        assert_eq!(summary(&[3, 8]).weighted_credit(0, &[0.75, 0.25]), 3.0 * 0.75 + 5.0 * 0.25);
        // The device holds the first 4 pages: only disk pages 5 to 8 are the pool's.
        assert_eq!(summary(&[3, 8]).weighted_credit(4, &[0.75, 0.25]), 4.0 * 0.25);
        // The device holds more than the pool: nothing.
        assert_eq!(summary(&[3, 8]).weighted_credit(9, &[0.75, 0.25]), 0.0);
        // No page in memory: all on disk.
        assert_eq!(summary(&[0, 2]).weighted_credit(0, &[0.75, 0.25]), 0.5);
        // Tiers with no weight count for nothing.
        assert_eq!(summary(&[1, 2, 6]).weighted_credit(0, &[1.0]), 1.0);
    }
}
