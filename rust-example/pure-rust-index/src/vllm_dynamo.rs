//! An emulation of Dynamo's vLLM check (Dynamo PR #14965,
//! `shared_cache/vllm_mooncake_store.rs`; docs/vllm-mooncake-store.md,
//! section 6), written the way that PR does it, as the baseline of the
//! library's vLLM query in `benches/vllm_vs_dynamo.rs`.
//!
//! Dynamo does not hash tokens with vLLM's chain. It learns, from the GPU
//! workers' `Stored` KV events it follows, edges
//! `(parent engine hash, router block hash) -> engine hash` (the engine
//! hash being the block digest's low 64 bits, as vLLM's events carry it);
//! from the Mooncake store's events, each object key's digest (`low64 ->
//! digest`; two digests sharing their low 64 bits are ambiguous and never
//! hit) and a per-object medium mask (cpu = 1, disk = 2) keyed by the key
//! string. Both learned maps are bounded at 262,144 entries and never
//! evict: once full they stop learning. A request's answer walks the
//! router's block hashes through the edges to engine hashes, maps each to
//! its digest, checks every key prefix's mask (keys built with `format!`),
//! and returns the longest candidate prefix that holds (the same rules as
//! the library: the last token never credited; full attention, the leading
//! run of present chunks; Mamba, the chunk ending exactly at the candidate;
//! candidates multiples of the lcm of the block sizes). A request whose
//! first block has no learned edge cannot be answered at all (`None`).
//!
//! The router's block hash: Dynamo's is XXH3-64 (seed 1337) of the block's
//! u32 token ids; no xxhash crate is packaged here, so this uses `ahash`
//! (AES-based when the CPU has AES-NI, a comparable cost per 64-byte block)
//! with fixed seeds over the same bytes.
//!
//! Also here, for the benchmark's setup only: vLLM's sha256 block chain
//! (pickle protocol 5 of `(parent, tokens, None)`), i.e. what the engine
//! computes and the Mooncake keys carry. Dynamo never computes it.

use std::hash::{BuildHasher, Hasher};

use dashmap::DashMap;
use sha2::{Digest, Sha256};

pub type BlockDigest = [u8; 32];

/// Dynamo's bounds on what it learns.
pub const MAX_EDGES: usize = 262_144;
pub const MAX_DIGESTS: usize = 262_144;

pub const MEDIUM_CPU: u8 = 1;
pub const MEDIUM_DISK: u8 = 2;

/// NONE_HASH for PYTHONHASHSEED "0", sha256 (docs/vllm-mooncake-store.md).
pub const NONE_HASH_SHA256_SEED0: &str =
    "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    FullAttention,
    Mamba,
}

#[derive(Clone, Debug)]
pub struct Group {
    pub kind: GroupKind,
    /// Tokens per chunk (a multiple of the hash block size).
    pub block_size: usize,
    pub key_prefixes: Vec<String>,
}

/// vLLM's pickle (protocol 5) of `(parent, tuple(tokens), None)`, as CPython
/// writes it for non-negative ids below 2^31 (docs/vllm-mooncake-store.md,
/// section 2).
pub fn pickle_block(parent: &BlockDigest, tokens: &[u32]) -> Vec<u8> {
    let mut body = Vec::with_capacity(48 + 5 * tokens.len());
    body.extend_from_slice(&[0x43, 0x20]);
    body.extend_from_slice(parent);
    body.push(0x94);
    match tokens.len() {
        1 | 2 | 3 => {}
        _ => body.push(0x28),
    }
    for &t in tokens {
        if t < 0x100 {
            body.extend_from_slice(&[0x4B, t as u8]);
        } else if t < 0x1_0000 {
            body.push(0x4D);
            body.extend_from_slice(&(t as u16).to_le_bytes());
        } else {
            assert!(t < 0x8000_0000, "ids >= 2^31 are not encoded here");
            body.push(0x4A);
            body.extend_from_slice(&(t as i32).to_le_bytes());
        }
    }
    body.push(match tokens.len() {
        1 => 0x85,
        2 => 0x86,
        3 => 0x87,
        _ => 0x74,
    });
    body.push(0x94);
    body.push(0x4E);
    body.push(0x87);
    body.push(0x94);
    body.push(0x2E);
    let mut out = Vec::with_capacity(11 + body.len());
    out.extend_from_slice(&[0x80, 0x05, 0x95]);
    // The frame holds everything after its header, STOP included.
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn parse_hex32(hex: &str) -> Option<BlockDigest> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Lowercase hex, by table (as the `hex` crate does): not the emulation's
/// bottleneck.
pub fn hex32(digest: &BlockDigest) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(64);
    for &b in digest {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 15) as usize]);
    }
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// vLLM's chain (sha256, no extras): one digest per whole block.
pub fn vllm_chain_sha256(none_hash: &BlockDigest, tokens: &[u32], block: usize) -> Vec<BlockDigest> {
    let mut parent = *none_hash;
    tokens
        .chunks_exact(block)
        .map(|units| {
            let d: BlockDigest = Sha256::digest(pickle_block(&parent, units)).into();
            parent = d;
            d
        })
        .collect()
}

/// vLLM's GPU KV event hash of a block: the digest's low 64 bits, bytes
/// 24..31 big-endian.
pub fn event_hash(digest: &BlockDigest) -> u64 {
    u64::from_be_bytes(digest[24..32].try_into().unwrap())
}

/// The router's per-block hash of the tokens (see the module's note).
#[derive(Clone)]
pub struct RouterHasher(ahash::RandomState);

impl Default for RouterHasher {
    fn default() -> Self {
        RouterHasher(ahash::RandomState::with_seeds(1337, 0x9E37_79B9, 0x7F4A_7C15, 42))
    }
}

impl RouterHasher {
    pub fn block_hash(&self, units: &[u32]) -> u64 {
        let mut h = self.0.build_hasher();
        for &t in units {
            h.write_u32(t);
        }
        h.finish()
    }
    pub fn block_hashes(&self, tokens: &[u32], block: usize) -> Vec<u64> {
        tokens
            .chunks_exact(block)
            .map(|units| self.block_hash(units))
            .collect()
    }
}

/// What the digest map holds for a low64: one digest, or ambiguous.
#[derive(Clone, Copy)]
enum Learned {
    One(BlockDigest),
    Ambiguous,
}

/// Dynamo's per-model vLLM state and check.
pub struct DynamoVllm {
    /// Router block size b (= the hash block size in these layouts).
    pub block_size: usize,
    pub groups: Vec<Group>,
    alignment: usize,
    router: RouterHasher,
    edges: DashMap<(u64, u64), u64>,
    digests: DashMap<u64, Learned>,
    masks: DashMap<String, u8>,
    /// Learning refused because a map was full.
    pub edges_dropped: usize,
    pub digests_dropped: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The parent of block 0 in the edge map.
const ROOT: u64 = 0;

impl DynamoVllm {
    pub fn new(block_size: usize, groups: Vec<Group>) -> DynamoVllm {
        let alignment = groups
            .iter()
            .fold(block_size, |a, g| a / gcd(a, g.block_size) * g.block_size);
        DynamoVllm {
            block_size,
            groups,
            alignment,
            router: RouterHasher::default(),
            edges: DashMap::new(),
            digests: DashMap::new(),
            masks: DashMap::new(),
            edges_dropped: 0,
            digests_dropped: 0,
        }
    }

    pub fn router(&self) -> &RouterHasher {
        &self.router
    }

    /// A followed GPU worker's `Stored` event for a request's blocks: the
    /// engine hashes, with the tokens of each block (hashed by the router).
    pub fn learn_gpu_stored(&mut self, tokens: &[u32], engine_hashes: &[u64]) {
        let mut parent = ROOT;
        for (units, &engine) in tokens.chunks_exact(self.block_size).zip(engine_hashes) {
            let edge = (parent, self.router.block_hash(units));
            if self.edges.len() >= MAX_EDGES && !self.edges.contains_key(&edge) {
                self.edges_dropped += 1;
            } else {
                self.edges.insert(edge, engine);
            }
            parent = engine;
        }
    }

    /// A Mooncake store event of a vLLM object key
    /// (`{prefix}@{chunk hash hex}`).
    pub fn apply_store_event(&mut self, key: &str, medium: u8, stored: bool) {
        let at = match key.rfind('@') {
            Some(at) => at,
            None => return,
        };
        let digest = match parse_hex32(&key[at + 1..]) {
            Some(d) => d,
            None => return,
        };
        if stored {
            let low = event_hash(&digest);
            let full = self.digests.len() >= MAX_DIGESTS;
            let mut entry = None;
            if let Some(mut existing) = self.digests.get_mut(&low) {
                if let Learned::One(d) = *existing {
                    if d != digest {
                        *existing = Learned::Ambiguous;
                    }
                }
                entry = Some(());
            }
            if entry.is_none() {
                if full {
                    self.digests_dropped += 1;
                } else {
                    self.digests.insert(low, Learned::One(digest));
                }
            }
            *self.masks.entry(key.to_string()).or_insert(0) |= medium;
        } else {
            let empty = match self.masks.get_mut(key) {
                Some(mut mask) => {
                    *mask &= !medium;
                    *mask == 0
                }
                None => false,
            };
            if empty {
                self.masks.remove(key);
            }
        }
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
    pub fn digest_count(&self) -> usize {
        self.digests.len()
    }

    fn chunk_present(&self, group: &Group, digest: &BlockDigest) -> bool {
        let hex = hex32(digest);
        group.key_prefixes.iter().all(|prefix| {
            self.masks
                .get(&format!("{}@{}", prefix, hex))
                .map_or(false, |m| *m != 0)
        })
    }

    /// Dynamo's answer in router blocks, or `None` when it cannot answer at
    /// all (no learned edge for the request's first block).
    pub fn check_prefix(&self, tokens: &[u32]) -> Option<usize> {
        let b = self.block_size;
        let n = tokens.len();
        let credited = if n == 0 { 0 } else { (n - 1) / b };
        // Router block hashes -> engine hashes -> digests, as far as learned.
        let mut digests: Vec<BlockDigest> = Vec::with_capacity(credited);
        let mut parent = ROOT;
        for (i, units) in tokens.chunks_exact(b).take(credited).enumerate() {
            let edge = (parent, self.router.block_hash(units));
            let engine = match self.edges.get(&edge) {
                Some(e) => *e,
                None if i == 0 => return None,
                None => break,
            };
            match self.digests.get(&engine).map(|d| *d) {
                Some(Learned::One(d)) => digests.push(d),
                _ => break,
            }
            parent = engine;
        }
        // Full attention: the leading run of present chunks.
        let mut limit = digests.len() * b;
        for group in self.groups.iter().filter(|g| g.kind == GroupKind::FullAttention) {
            let per = group.block_size / b;
            let mut chunk = 0;
            while (chunk + 1) * per <= digests.len() && (chunk + 1) * group.block_size <= limit {
                if !self.chunk_present(group, &digests[(chunk + 1) * per - 1]) {
                    break;
                }
                chunk += 1;
            }
            limit = limit.min(chunk * group.block_size);
        }
        // Candidates, longest first: Mamba groups need the chunk ending there.
        let mut candidate = limit / self.alignment * self.alignment;
        while candidate > 0 {
            let holds = self
                .groups
                .iter()
                .filter(|g| g.kind == GroupKind::Mamba)
                .all(|g| candidate % g.block_size == 0 && self.chunk_present(g, &digests[candidate / b - 1]));
            if holds {
                return Some(candidate / b);
            }
            candidate -= self.alignment;
        }
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_h0() {
        // docs/vllm-mooncake-store.md, section 4: tokens 0..63, block 16.
        let none = parse_hex32(NONE_HASH_SHA256_SEED0).unwrap();
        let tokens: Vec<u32> = (0..64).collect();
        let chain = vllm_chain_sha256(&none, &tokens, 16);
        assert_eq!(
            hex32(&chain[0]),
            "6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6"
        );
        assert_eq!(
            hex32(&chain[3]),
            "71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4"
        );
        assert_eq!(event_hash(&chain[0]), 7982712666671721126);
    }

    #[test]
    fn learned_prompt_answers_unlearned_does_not() {
        let none = parse_hex32(NONE_HASH_SHA256_SEED0).unwrap();
        let prefixes = vec!["p@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0".to_string()];
        let mut d = DynamoVllm::new(
            16,
            vec![Group {
                kind: GroupKind::FullAttention,
                block_size: 16,
                key_prefixes: prefixes.clone(),
            }],
        );
        let a: Vec<u32> = (0..64).collect();
        let b: Vec<u32> = (100..164).collect();
        for t in [&a, &b] {
            for dg in vllm_chain_sha256(&none, t, 16) {
                d.apply_store_event(&format!("{}@{}", prefixes[0], hex32(&dg)), MEDIUM_CPU, true);
            }
        }
        let ea: Vec<u64> = vllm_chain_sha256(&none, &a, 16).iter().map(event_hash).collect();
        d.learn_gpu_stored(&a, &ea);
        assert_eq!(d.check_prefix(&a), Some(3));
        assert_eq!(d.check_prefix(&b), None);
    }
}
