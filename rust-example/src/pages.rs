//! What the router consumes from a page query, and the caller-owned scratch
//! it is built in (so a steady-state query allocates nothing).

use std::ops::Range;

/// Buffers reused across [`Index::check_pages`](crate::Index::check_pages)
/// calls: the per-page hit flags the C call fills and the ranges derived from
/// them. Keep one per querying thread; once it has grown to the longest
/// request, queries stop allocating.
#[derive(Debug, Default)]
pub struct PageScratch {
    hits: Vec<u8>,
    ranges: Vec<Range<usize>>,
}

impl PageScratch {
    pub fn new() -> PageScratch {
        PageScratch::default()
    }

    /// Pre-sized for requests of up to `pages` whole pages.
    pub fn with_capacity(pages: usize) -> PageScratch {
        PageScratch {
            hits: Vec::with_capacity(pages),
            ranges: Vec::with_capacity(pages / 2 + 1),
        }
    }

    /// A hits buffer of exactly `cap` bytes for the C call to fill.
    pub(crate) fn hits_buffer(&mut self, cap: usize) -> &mut [u8] {
        // Reuses the capacity; zeroing is cheap next to the query and keeps
        // stale flags of a previous query from ever being read.
        self.hits.clear();
        self.hits.resize(cap, 0);
        &mut self.hits
    }

    /// Derives the ranges from the first `n_pages` flags the C call wrote.
    pub(crate) fn finish(&mut self, n_pages: usize, summary: PageSummary) -> PageHits<'_> {
        let n_pages = n_pages.min(self.hits.len());
        self.hits.truncate(n_pages);
        self.ranges.clear();
        let mut start = None;
        for (page, &hit) in self.hits.iter().enumerate() {
            match (hit != 0, start) {
                (true, None) => start = Some(page),
                (false, Some(first)) => {
                    self.ranges.push(first..page);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(first) = start {
            self.ranges.push(first..n_pages);
        }
        PageHits {
            summary,
            hits: &self.hits,
            ranges: &self.ranges,
        }
    }
}

/// The counts the C call reports for one query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSummary {
    /// Whole pages in the request.
    pub n_pages: usize,
    /// Pages fully present.
    pub total_hits: usize,
    /// Length of the leading run of hit pages.
    pub prefix_hits: usize,
    /// SGLang: hits answered by one page entry each (every hit since 1.4);
    /// vLLM: 0.
    pub fast_path: usize,
    /// The leading prompt tokens the engine will load from the pool (added
    /// in 1.4): SGLang `prefix_hits` x page size, at most the whole pages
    /// before the prompt's last token; vLLM whole chunks, past
    /// the last whole router block where the layout loads them, never the
    /// prompt's last token. At least `prefix_hits` x block size.
    pub prefix_tokens: usize,
}

/// The prefix answer in pages and in tokens
/// ([`Index::check_prefix_tokens`](crate::Index::check_prefix_tokens), added in 1.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixCredit {
    /// The usable prefix in pages (vLLM: router blocks), as
    /// [`Index::check_prefix`](crate::Index::check_prefix).
    pub pages: usize,
    /// The leading prompt tokens the engine will load (as
    /// [`PageSummary::prefix_tokens`]).
    pub tokens: usize,
}

/// The answer to one page query, borrowed from the caller's [`PageScratch`].
/// Every page is reported, not only a leading prefix: hits after a missing
/// page are real and the router scores them.
#[derive(Clone, Copy, Debug)]
pub struct PageHits<'s> {
    summary: PageSummary,
    hits: &'s [u8],
    ranges: &'s [Range<usize>],
}

impl<'s> PageHits<'s> {
    pub fn summary(&self) -> PageSummary {
        self.summary
    }
    pub fn n_pages(&self) -> usize {
        self.summary.n_pages
    }
    pub fn total_hits(&self) -> usize {
        self.summary.total_hits
    }
    pub fn prefix_hits(&self) -> usize {
        self.summary.prefix_hits
    }
    pub fn fast_path(&self) -> usize {
        self.summary.fast_path
    }
    /// The leading prompt tokens the engine will load (added in 1.4; see
    /// [`PageSummary::prefix_tokens`]).
    pub fn prefix_tokens(&self) -> usize {
        self.summary.prefix_tokens
    }
    /// Maximal runs of consecutive hit pages, in page order.
    pub fn ranges(&self) -> &'s [Range<usize>] {
        self.ranges
    }
    /// One flag per whole page: 1 = every object of the page is present.
    pub fn flags(&self) -> &'s [u8] {
        self.hits
    }
    pub fn is_hit(&self, page: usize) -> bool {
        self.hits.get(page).map_or(false, |&h| h != 0)
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // `&[0..n]`: a slice holding one range
mod tests {
    use super::*;

    fn ranges_of(flags: &[u8]) -> Vec<Range<usize>> {
        let mut scratch = PageScratch::new();
        scratch
            .hits_buffer(flags.len() + 3)
            .iter_mut()
            .zip(flags)
            .for_each(|(out, &f)| *out = f);
        scratch
            .finish(flags.len(), PageSummary::default())
            .ranges()
            .to_vec()
    }

    #[test]
    fn ranges_are_the_maximal_runs_of_hits() {
        assert_eq!(ranges_of(&[]), Vec::<Range<usize>>::new());
        assert_eq!(ranges_of(&[0, 0]), Vec::<Range<usize>>::new());
        assert_eq!(ranges_of(&[1, 1, 1]), vec![0..3]);
        assert_eq!(ranges_of(&[1, 0, 1, 1, 0, 0, 1]), vec![0..1, 2..4, 6..7]);
        assert_eq!(ranges_of(&[0, 1, 1]), vec![1..3]);
    }

    #[test]
    fn flags_beyond_the_page_count_are_not_reported() {
        let mut scratch = PageScratch::new();
        scratch.hits_buffer(4).copy_from_slice(&[1, 1, 1, 1]);
        let hits = scratch.finish(2, PageSummary::default());
        assert_eq!(hits.flags(), &[1, 1]);
        assert_eq!(hits.ranges(), &[0..2]);
        assert!(!hits.is_hit(2));
    }
}
