//! The shape of the Dynamo KV router's shared-cache check, so a Dynamo
//! engineer can drop the library in where the router asks which blocks of a
//! request are in the shared pool.
//!
//! One [`SharedCacheIndex`] per router: the [`Index`] the subscriber feeds,
//! and the [`Layout`] of every model it routes (SGLang's or vLLM's), each
//! registered under its cache namespace (one layout per model; `None`
//! registers the default). [`SharedCacheIndex::check_blocks`] answers with
//! the sorted, half-open ranges of hit blocks and their count: for SGLang
//! every block reported (a hit after a missing block is real: the router
//! scores it); for vLLM Dynamo's single range `0..L`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use crate::{Error, Index, Layout, LayoutFamily, PageScratch, RequestExtras, Result, Status, TierSummary};

/// Which blocks of a request are fully present in the shared pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedCacheHits {
    /// Sorted, disjoint, half-open ranges of hit blocks.
    pub ranges: Vec<Range<u32>>,
    /// Blocks hit, the total length of `ranges`.
    pub total_hits: u32,
    /// The leading prompt tokens the engine will load from the pool (added
    /// in 1.4), never the prompt's last token: SGLang the leading run of hit
    /// blocks x block size, at most the whole blocks before the last token; vLLM
    /// whole chunks, which can pass the last whole block of `0..L` (a
    /// router block of many chunks), never the prompt's last token.
    pub prefix_tokens: usize,
}

/// Which blocks of a request are in the shared pool, per storage tier
/// (added in 1.3): `per_tier[t]` holds the blocks fully present at tier `t`
/// or faster, as [`SharedCacheHits`] (for vLLM, Dynamo's `0..L[t]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedCacheTiers {
    pub per_tier: Vec<SharedCacheHits>,
    /// `L[t]` and the pages per tier; its
    /// [`weighted_credit`](TierSummary::weighted_credit) is the router's
    /// credit per tier.
    pub summary: TierSummary,
}

/// An [`Index`] with the layouts of the models it answers for.
#[derive(Debug)]
pub struct SharedCacheIndex {
    index: Arc<Index>,
    default_layout: Option<Layout>,
    layouts: HashMap<String, Layout>,
}

thread_local! {
    // The per-block flags of the C call, reused: a query allocates only the
    // ranges it returns.
    static SCRATCH: RefCell<PageScratch> = RefCell::new(PageScratch::new());
    // The per-block tiers of the C call, reused likewise.
    static TIERS: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

/// Dynamo's answer for vLLM: the single range `0..blocks` (none when 0).
fn prefix_range(blocks: u32, prefix_tokens: usize) -> SharedCacheHits {
    SharedCacheHits {
        ranges: if blocks == 0 { Vec::new() } else { vec![0..blocks] },
        total_hits: blocks,
        prefix_tokens,
    }
}

impl SharedCacheIndex {
    /// Answers from `index` (shared with its subscriber); no layout yet.
    pub fn new(index: Arc<Index>) -> SharedCacheIndex {
        SharedCacheIndex {
            index,
            default_layout: None,
            layouts: HashMap::new(),
        }
    }

    /// Registers the layout of the model behind `cache_namespace` (`None`:
    /// the default, used by queries without a namespace), replacing any
    /// layout registered under it before. Either family: a vLLM layout
    /// (from [`Layout::from_json`] on the descriptor its workers publish)
    /// answers with Dynamo's rules.
    pub fn register_layout(&mut self, cache_namespace: Option<&str>, layout: Layout) {
        match cache_namespace {
            None => self.default_layout = Some(layout),
            Some(namespace) => {
                self.layouts.insert(namespace.to_owned(), layout);
            }
        }
    }

    /// The index queries are answered from.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// Which blocks of `tokens` (blocks of `block_size` tokens) are fully
    /// present under the layout of `cache_namespace` (`None`: the default).
    /// A block size other than the layout's [`block_size`](Layout::block_size)
    /// answers no hit (the blocks do not line up with the engine's). A
    /// namespace with no registered layout is an error
    /// (`Status::InvalidArgument`, naming it): a misconfiguration, not a miss
    /// to be silently scored.
    ///
    /// On an SGLang layout every hit page is reported, as ranges. On a vLLM
    /// layout the answer is Dynamo's (`SharedCacheHits` of its
    /// `vllm_mooncake_store` check): the single range `0..L`, `L` being
    /// [`Index::check_prefix`]'s count of blocks (the longest prefix every
    /// KV-cache group holds, a multiple of the layout's alignment, never
    /// crediting the last token), and no range when `L` is 0. Blocks present
    /// after a missing one are not reported: vLLM loads only a prefix.
    pub fn check_blocks(
        &self,
        tokens: &[u32],
        block_size: u32,
        cache_namespace: Option<&str>,
    ) -> Result<SharedCacheHits> {
        self.blocks(tokens, block_size, cache_namespace, None)
    }

    /// [`check_blocks`](SharedCacheIndex::check_blocks) for a request with
    /// vLLM extra keys (LoRA name, cache salt). On an SGLang layout a
    /// request with any extras hits nothing.
    pub fn check_blocks_with_extras(
        &self,
        tokens: &[u32],
        block_size: u32,
        extras: &RequestExtras<'_>,
        cache_namespace: Option<&str>,
    ) -> Result<SharedCacheHits> {
        self.blocks(tokens, block_size, cache_namespace, Some(extras))
    }

    fn blocks(
        &self,
        tokens: &[u32],
        block_size: u32,
        cache_namespace: Option<&str>,
        extras: Option<&RequestExtras<'_>>,
    ) -> Result<SharedCacheHits> {
        let layout = self.layout(cache_namespace)?;
        if layout.family() == LayoutFamily::Vllm {
            let credit = self.index.check_prefix_tokens(layout, tokens, block_size, extras)?;
            return Ok(prefix_range(credit.pages as u32, credit.tokens));
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let hits = match extras {
                None => self.index.check_pages(layout, tokens, block_size, &mut scratch)?,
                Some(extras) => self.index.check_pages_with_extras(
                    layout,
                    tokens,
                    block_size,
                    extras,
                    &mut scratch,
                )?,
            };
            // Block counts fit in u32: a request of 2^32 blocks is not a prompt.
            let ranges: Vec<Range<u32>> = hits
                .ranges()
                .iter()
                .map(|r| r.start as u32..r.end as u32)
                .collect();
            Ok(SharedCacheHits {
                ranges,
                total_hits: hits.summary().total_hits as u32,
                prefix_tokens: hits.summary().prefix_tokens,
            })
        })
    }

    /// [`check_blocks`](SharedCacheIndex::check_blocks) per storage tier, in
    /// one call ([`Index::check_tiers`]): for each tier `t` of the index's
    /// map, the blocks fully present at tier `t` or faster (SGLang: every
    /// such block, as ranges; vLLM: Dynamo's `0..L[t]`). `extras`: a vLLM
    /// request's LoRA name and cache salt.
    pub fn check_tiers(
        &self,
        tokens: &[u32],
        block_size: u32,
        extras: Option<&RequestExtras<'_>>,
        cache_namespace: Option<&str>,
    ) -> Result<SharedCacheTiers> {
        let layout = self.layout(cache_namespace)?;
        TIERS.with(|tiers| {
            let mut tiers = tiers.borrow_mut();
            let summary = self.index.check_tiers(layout, tokens, block_size, extras, &mut tiers)?;
            let per_tier = (0..summary.n_tiers)
                .map(|t| {
                    if layout.family() == LayoutFamily::Vllm {
                        return prefix_range(summary.prefix_pages[t] as u32, summary.prefix_tokens[t]);
                    }
                    // Block counts fit in u32 (as check_blocks).
                    let mut hits = SharedCacheHits {
                        prefix_tokens: summary.prefix_tokens[t],
                        ..SharedCacheHits::default()
                    };
                    for (block, &tier) in tiers.iter().enumerate() {
                        if tier as usize > t {
                            continue; // slower, or absent (TIER_ABSENT)
                        }
                        let block = block as u32;
                        match hits.ranges.last_mut() {
                            Some(range) if range.end == block => range.end += 1,
                            _ => hits.ranges.push(block..block + 1),
                        }
                        hits.total_hits += 1;
                    }
                    hits
                })
                .collect();
            Ok(SharedCacheTiers { per_tier, summary })
        })
    }

    /// How many leading blocks of `tokens` are fully present (the only ones
    /// SGLang loads): stops at the first missing block. On a vLLM
    /// layout, Dynamo's answer (the `L` of [`check_blocks`](SharedCacheIndex::check_blocks)).
    pub fn check_prefix_blocks(
        &self,
        tokens: &[u32],
        block_size: u32,
        cache_namespace: Option<&str>,
    ) -> Result<u32> {
        let layout = self.layout(cache_namespace)?;
        Ok(self.index.check_prefix(layout, tokens, block_size)? as u32)
    }

    fn layout(&self, cache_namespace: Option<&str>) -> Result<&Layout> {
        match cache_namespace {
            None => self.default_layout.as_ref().ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    "check_blocks: no default layout registered",
                )
            }),
            Some(namespace) => self.layouts.get(namespace).ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    format!("check_blocks: no layout registered for cache namespace {namespace:?}"),
                )
            }),
        }
    }
}
