//! The shape of the Dynamo KV router's shared-cache check, so a Dynamo
//! engineer can drop the library in where the router asks which blocks of a
//! request are in the shared pool.
//!
//! One [`SharedCacheIndex`] per router: the [`Index`] the subscriber feeds,
//! and the SGLang [`Layout`] of every model it routes, each registered under
//! its cache namespace (one layout per model; `None` registers the default).
//! [`SharedCacheIndex::check_blocks`] answers with the sorted, half-open
//! ranges of hit blocks and their count, every block reported (a hit after a
//! missing block is real: the router scores it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use crate::{Error, Index, Layout, PageScratch, Result, Status};

/// Which blocks of a request are fully present in the shared pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedCacheHits {
    /// Sorted, disjoint, half-open ranges of hit blocks.
    pub ranges: Vec<Range<u32>>,
    /// Blocks hit, the total length of `ranges`.
    pub total_hits: u32,
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
    /// layout registered under it before.
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
    /// A block size other than the layout's page size answers no hit (the
    /// blocks do not line up with SGLang's pages). A namespace with no
    /// registered layout is an error (`Status::InvalidArgument`, naming it):
    /// a misconfiguration, not a miss to be silently scored.
    pub fn check_blocks(
        &self,
        tokens: &[u32],
        block_size: u32,
        cache_namespace: Option<&str>,
    ) -> Result<SharedCacheHits> {
        let layout = self.layout(cache_namespace)?;
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let hits = self.index.check_pages(layout, tokens, block_size, &mut scratch)?;
            // Block counts fit in u32: a request of 2^32 blocks is not a prompt.
            let ranges: Vec<Range<u32>> = hits
                .ranges()
                .iter()
                .map(|r| r.start as u32..r.end as u32)
                .collect();
            Ok(SharedCacheHits {
                ranges,
                total_hits: hits.summary().total_hits as u32,
            })
        })
    }

    /// How many leading blocks of `tokens` are fully present (the only ones
    /// SGLang loads): stops hashing at the first missing block.
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
