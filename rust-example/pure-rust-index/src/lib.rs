//! The index a Rust router would write for itself, the straightforward way:
//! `DashSet<String>` of present keys, `DashMap` of groups, keys and group ids
//! built with `format!`, page hashes with `sha2` and `format!("{:x}")`.
//!
//! It follows `docs/index-semantics.md` and `docs/sglang-hicache.md`
//! (sequence cursor, tenant scoping, verified groups, per-page results), so it
//! serves twice: as the executable spec the FFI wrapper's tests compare the C
//! library against, and as the baseline of the FFI-vs-pure-Rust benchmark.
//! It has no capacity bound and no counters: nothing the comparison needs.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use dashmap::{DashMap, DashSet};

pub mod vllm_dynamo;
use sha2::{Digest, Sha256};

/// Which pages of a request a pool covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitPolicy {
    AllPages,
    /// Page `i` of `n` only when `i >= n - t` (saturating at 0).
    TrailingPages(u32),
}

/// An advertised object pool: keys `<logical><suffix>` on the pages it covers.
#[derive(Clone, Debug)]
pub struct Pool {
    pub suffixes: Vec<String>,
    pub hit_policy: HitPolicy,
}

impl Pool {
    fn covers(&self, page: usize, n_pages: usize) -> bool {
        match self.hit_policy {
            HitPolicy::AllPages => true,
            HitPolicy::TrailingPages(t) => page >= n_pages.saturating_sub(t as usize),
        }
    }
}

/// An SGLang HiCache layout, field for field as the workers publish it.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub page_size: u32,
    pub tp_size: u32,
    pub pp_size: u32,
    pub tp_lcm_size: u32,
    pub is_mla_model: bool,
    pub is_eagle: bool,
    pub should_split_heads: bool,
    pub extra_backend_tag: String,
    pub key_prefix: String,
    pub tenant_id: String,
    pub pools: Vec<Pool>,
}

impl Layout {
    pub fn tenant(&self) -> &str {
        tenant_or_default(&self.tenant_id)
    }

    /// `sglang-hicache:[<tag>_]<page hash>`.
    pub fn group_id(&self, page_hash: &str) -> String {
        if self.extra_backend_tag.is_empty() {
            format!("sglang-hicache:{}", page_hash)
        } else {
            format!("sglang-hicache:{}_{}", self.extra_backend_tag, page_hash)
        }
    }

    /// The physical object keys page `page` of an `n_pages`-page request needs.
    pub fn keys_for(&self, page_hash: &str, page: usize, n_pages: usize) -> Vec<String> {
        let tag = &self.extra_backend_tag;
        let mut keys = Vec::new();
        if !self.pools.is_empty() {
            let prefix = if self.key_prefix.is_empty() {
                tag
            } else {
                &self.key_prefix
            };
            let logical = if prefix.is_empty() {
                page_hash.to_string()
            } else {
                format!("{}_{}", prefix, page_hash)
            };
            for pool in self.pools.iter().filter(|p| p.covers(page, n_pages)) {
                for suffix in &pool.suffixes {
                    keys.push(format!("{}{}", logical, suffix));
                }
            }
            return keys;
        }
        let logical = if tag.is_empty() {
            page_hash.to_string()
        } else {
            format!("{}_{}", tag, page_hash)
        };
        let pp = self.pp_size.max(1);
        if self.is_mla_model {
            if pp > 1 {
                for p in 0..pp {
                    keys.push(format!("{}_{}_k", logical, p));
                }
            } else {
                keys.push(format!("{}__k", logical));
            }
            return keys;
        }
        let ranks = if self.should_split_heads {
            let lcm = if self.tp_lcm_size > 0 {
                self.tp_lcm_size
            } else {
                self.tp_size
            };
            lcm.max(self.tp_size).max(1)
        } else {
            self.tp_size.max(1)
        };
        for p in 0..pp {
            for rank in 0..ranks {
                let suffix = if pp > 1 {
                    format!("{}_{}", rank, p)
                } else {
                    rank.to_string()
                };
                keys.push(format!("{}_{}_k", logical, suffix));
                keys.push(format!("{}_{}_v", logical, suffix));
            }
        }
        keys
    }

    /// Identifies the key set a page needs (independent of its hash): a
    /// verification made under one key set must not answer for another.
    fn key_set_id(&self, page: usize, n_pages: usize) -> u64 {
        // Everything keys_for reads besides the hash: the fields that shape
        // the keys, and which pools cover this page.
        let mut hasher = DefaultHasher::new();
        self.tenant().hash(&mut hasher);
        (&self.extra_backend_tag, &self.key_prefix).hash(&mut hasher);
        (
            self.tp_size,
            self.pp_size,
            self.tp_lcm_size,
            self.is_mla_model,
            self.should_split_heads,
        )
            .hash(&mut hasher);
        for pool in self.pools.iter().filter(|p| p.covers(page, n_pages)) {
            pool.suffixes.hash(&mut hasher);
        }
        hasher.finish()
    }
}

/// Every whole page's hash, as 64 lowercase hex characters:
/// `digest_i = SHA-256(digest_{i-1} || page i's tokens, 4 bytes LE each)`,
/// hashing token bigrams (8 bytes: first, second) when `eagle`.
pub fn page_hashes(tokens: &[u32], page_size: u32, eagle: bool) -> Vec<String> {
    if page_size == 0 {
        return Vec::new();
    }
    let page_size = page_size as usize;
    let units = if eagle {
        tokens.len().saturating_sub(1)
    } else {
        tokens.len()
    };
    let mut hashes = Vec::with_capacity(units / page_size);
    let mut previous: Option<[u8; 32]> = None;
    for page in 0..units / page_size {
        let mut hasher = Sha256::new();
        if let Some(digest) = &previous {
            hasher.update(digest);
        }
        for unit in page * page_size..(page + 1) * page_size {
            hasher.update(tokens[unit].to_le_bytes());
            if eagle {
                hasher.update(tokens[unit + 1].to_le_bytes());
            }
        }
        let digest = hasher.finalize();
        hashes.push(format!("{:x}", digest));
        previous = Some(digest.into());
    }
    hashes
}

fn tenant_or_default(tenant: &str) -> &str {
    if tenant.is_empty() {
        "default"
    } else {
        tenant
    }
}

fn scoped(tenant: &str, name: &str) -> String {
    format!("{}\u{0}{}", tenant_or_default(tenant), name)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Stored,
    Removed,
    AllCleared,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub object_key: String,
    pub group_id: String,  // empty = none
    pub tenant_id: String, // empty = "default"
}

impl Event {
    pub fn stored(key: &str, group: &str) -> Event {
        Event {
            kind: EventKind::Stored,
            object_key: key.into(),
            group_id: group.into(),
            tenant_id: String::new(),
        }
    }
    pub fn removed(key: &str, group: &str) -> Event {
        Event {
            kind: EventKind::Removed,
            object_key: key.into(),
            group_id: group.into(),
            tenant_id: String::new(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct GroupState {
    generation: u64,
    verified_for: Option<u64>,
}

/// Present keys and groups under the sequence rules of docs/index-semantics.md.
/// Queries may run on any number of threads; batches apply one at a time.
#[derive(Default)]
pub struct Index {
    keys: DashSet<String>,
    groups: DashMap<String, GroupState>,
    cursor: Mutex<Option<u64>>,
}

impl Index {
    pub fn new() -> Index {
        Index::default()
    }

    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Applies one batch: a duplicate sequence is ignored, a gap or restart
    /// clears first, the first batch after a clear is accepted at any sequence.
    pub fn apply(&self, sequence: u64, events: &[Event]) {
        let mut cursor = self.cursor.lock().unwrap();
        match *cursor {
            Some(last) if last == sequence => return,
            Some(last) if last.wrapping_add(1) != sequence => {
                self.keys.clear();
                self.groups.clear();
            }
            _ => {}
        }
        for event in events {
            let tenant = &event.tenant_id;
            match event.kind {
                EventKind::AllCleared => {
                    self.keys.clear();
                    self.groups.clear();
                }
                _ if event.object_key.is_empty() => {}
                EventKind::Stored => {
                    self.keys.insert(scoped(tenant, &event.object_key));
                    if !event.group_id.is_empty() {
                        self.groups.insert(
                            scoped(tenant, &event.group_id),
                            GroupState {
                                generation: sequence,
                                verified_for: None,
                            },
                        );
                    }
                }
                EventKind::Removed => {
                    self.keys.remove(&scoped(tenant, &event.object_key));
                    if event.group_id.is_empty() {
                        self.groups
                            .iter_mut()
                            .for_each(|mut g| g.verified_for = None);
                    } else {
                        self.groups.remove(&scoped(tenant, &event.group_id));
                    }
                }
            }
        }
        *cursor = Some(sequence);
    }

    pub fn contains(&self, tenant: &str, object_key: &str) -> bool {
        self.keys.contains(&scoped(tenant, object_key))
    }

    /// For each whole page of `tokens`: is every key it needs present?
    pub fn check_pages(&self, layout: &Layout, tokens: &[u32], block_size: u32) -> Vec<bool> {
        let hashes = page_hashes(tokens, layout.page_size, layout.is_eagle);
        let n_pages = hashes.len();
        if block_size != layout.page_size {
            return vec![false; n_pages];
        }
        let tenant = layout.tenant();
        hashes
            .iter()
            .enumerate()
            .map(|(page, hash)| {
                let group = scoped(tenant, &layout.group_id(hash));
                let key_set = layout.key_set_id(page, n_pages);
                let seen = self.groups.get(&group).map(|g| *g);
                if let Some(state) = seen {
                    if state.verified_for == Some(key_set) {
                        return true;
                    }
                }
                let keys = layout.keys_for(hash, page, n_pages);
                let hit =
                    !keys.is_empty() && keys.iter().all(|k| self.keys.contains(&scoped(tenant, k)));
                if let (true, Some(state)) = (hit, seen) {
                    if let Some(mut current) = self.groups.get_mut(&group) {
                        // A stored event that arrived meanwhile invalidated the check.
                        if current.generation == state.generation {
                            current.verified_for = Some(key_set);
                        }
                    }
                }
                hit
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_hashes_match_the_spec_check_value() {
        let tokens: Vec<u32> = (1..=10).collect();
        assert_eq!(
            page_hashes(&tokens, 4, false),
            vec![
                "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72",
                "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6",
            ]
        );
    }

    #[test]
    fn tp2_pp2_keys_follow_the_spec_example() {
        let layout = Layout {
            page_size: 4,
            tp_size: 2,
            pp_size: 2,
            ..Layout::default()
        };
        assert_eq!(
            layout.keys_for("h", 0, 1),
            [
                "h_0_0_k", "h_0_0_v", "h_1_0_k", "h_1_0_v", "h_0_1_k", "h_0_1_v", "h_1_1_k",
                "h_1_1_v"
            ]
        );
    }

    #[test]
    fn trailing_pool_covers_only_the_last_pages() {
        let layout = Layout {
            page_size: 4,
            key_prefix: "m".into(),
            pools: vec![
                Pool {
                    suffixes: vec!["__kv".into()],
                    hit_policy: HitPolicy::AllPages,
                },
                Pool {
                    suffixes: vec!["__swa".into()],
                    hit_policy: HitPolicy::TrailingPages(2),
                },
            ],
            ..Layout::default()
        };
        assert_eq!(layout.keys_for("h", 0, 3), ["m_h__kv"]);
        assert_eq!(layout.keys_for("h", 1, 3), ["m_h__kv", "m_h__swa"]);
    }

    #[test]
    fn gap_clears_and_duplicate_is_ignored() {
        let index = Index::new();
        index.apply(5, &[Event::stored("a", "")]);
        index.apply(5, &[Event::removed("a", "")]);
        assert!(index.contains("", "a"));
        index.apply(7, &[Event::stored("b", "")]);
        assert!(!index.contains("", "a"));
        assert!(index.contains("default", "b"));
    }
}
