//! The thin wrapper over `sys`: the owned handles (`Index`, `Layout`,
//! `Subscriber`) and every call into the C library. With the -sys crate, this is
//! the only module allowed `unsafe`; everything it does is argued here.
//!
//! The C contract (include/shared_cache_index.h, "Conventions") this relies on:
//!   C1. Every function may be called concurrently from any number of threads,
//!       except *_free and *_stop, which must not race with other uses of the
//!       same handle.
//!   C2. The library never keeps a caller's pointer after a call returns.
//!   C3. Strings are (ptr, len); ptr may be NULL only when len is 0.
//!   C4. On failure, sci_last_error() describes the failure on the calling
//!       thread; the string stays valid until the next failing call there.
//!   C5. Structs start with struct_size; the library reads/writes that many bytes.
//!   C6. An index must outlive every subscriber feeding it; one subscriber
//!       per index (a second start is refused). A subscriber stopped from a
//!       log callback on its own thread does not wait for that thread: the
//!       library keeps the index alive for it until it exits, so the index
//!       may be freed right after the stop, in the callback too.
//!   C7. No exception or abort crosses the boundary.
//!   C8. A log callback may call any function (stop, set the callback: that
//!       takes effect after it returns), but must not free a handle the call
//!       that logged is using, except a subscriber's own (C6).

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::error::{Error, Result, Status};
use crate::layout_builder::{HitPolicy, LayoutBuilder};
use crate::options::{IndexOptions, LogLevel, Stats, SubscriberOptions};
use crate::pages::{PageHits, PageScratch, PageSummary, PrefixCredit};
use crate::request_extras::RequestExtras;
use crate::tiers::{TierSummary, TIER_ABSENT};
use crate::sys;

/// `Ok` for SCI_OK, else the status with the library's message (C4: read on
/// this thread, right after the failing call, before anything else can fail).
fn check(status: sys::sci_status) -> Result<()> {
    match Status::from_raw(status) {
        None => Ok(()),
        Some(failure) => Err(Error::new(failure, last_error_message())),
    }
}

fn last_error_message() -> String {
    // SAFETY: sci_last_error never returns NULL and its string lives until the
    // next failing call on this thread (C4); it is copied out at once.
    unsafe { CStr::from_ptr(sys::sci_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Borrows `bytes` as an sci_str. The pointer of an empty slice is dangling
/// but non-NULL with len 0, which C3 allows (the library reads `len` bytes).
fn sci_str(bytes: &[u8]) -> sys::sci_str {
    sys::sci_str {
        ptr: bytes.as_ptr().cast::<c_char>(),
        len: bytes.len(),
    }
}

/// An optional string as the library reads one: NULL for `None`, so that
/// `Some("")` stays the empty string (C3).
fn sci_opt_str(text: Option<&str>) -> sys::sci_str {
    match text {
        None => sys::sci_str {
            ptr: ptr::null(),
            len: 0,
        },
        Some(text) => sci_str(text.as_bytes()),
    }
}

fn struct_size<T>() -> u32 {
    std::mem::size_of::<T>() as u32
}

/// `SCI_ABI_VERSION` of the loaded library; equals [`ABI_VERSION`] unless the
/// library and these bindings come from different major versions.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::sci_abi_version() }
}

/// The ABI version these bindings were generated for.
pub const ABI_VERSION: u32 = sys::SCI_ABI_VERSION as u32;

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: sci_version returns a NUL-terminated string in static storage.
    let version = unsafe { CStr::from_ptr(sys::sci_version()) };
    version.to_str().unwrap_or("?")
}

// ---------------------------------------------------------------------------
// Events

/// What an event says happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Stored,
    Removed,
    AllCleared,
    /// Every object of the event's tenant is gone (added in 1.2).
    TenantCleared,
}

/// One object event of a batch, borrowing its strings.
///
/// Laid out exactly as `sci_event` (`repr(transparent)`), so a slice of
/// events is handed to the library as is: applying a batch copies nothing.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Event<'a> {
    raw: sys::sci_event,
    _borrows: PhantomData<&'a [u8]>,
}

// SAFETY: an Event is four borrowed byte slices and an integer; the raw
// pointers in it are only read, exactly as `&'a [u8]` (which is Send + Sync).
unsafe impl Send for Event<'_> {}
// SAFETY: as above.
unsafe impl Sync for Event<'_> {}

impl<'a> Event<'a> {
    fn new(kind: sys::sci_event_kind, object_key: &'a [u8]) -> Event<'a> {
        Event {
            raw: sys::sci_event {
                kind,
                object_key: sci_str(object_key),
                group_id: sci_str(&[]),
                tenant_id: sci_str(&[]),
                medium: sci_str(&[]),
            },
            _borrows: PhantomData,
        }
    }

    /// `object_key` is now stored.
    pub fn stored<K: AsRef<[u8]> + ?Sized>(object_key: &'a K) -> Event<'a> {
        Event::new(sys::SCI_EVENT_STORED, object_key.as_ref())
    }

    /// `object_key` is gone, on whatever medium.
    pub fn removed<K: AsRef<[u8]> + ?Sized>(object_key: &'a K) -> Event<'a> {
        Event::new(sys::SCI_EVENT_REMOVED, object_key.as_ref())
    }

    /// Every object is gone.
    pub fn all_cleared() -> Event<'a> {
        Event::new(sys::SCI_EVENT_ALL_CLEARED, &[])
    }

    /// Every object of `tenant_id` is gone; other tenants stay (added in 1.2).
    pub fn tenant_cleared<T: AsRef<[u8]> + ?Sized>(tenant_id: &'a T) -> Event<'a> {
        Event::new(sys::SCI_EVENT_TENANT_CLEARED, &[]).tenant(tenant_id)
    }

    /// The logical group (SGLang page) the object belongs to.
    pub fn group<G: AsRef<[u8]> + ?Sized>(mut self, group_id: &'a G) -> Event<'a> {
        self.raw.group_id = sci_str(group_id.as_ref());
        self
    }

    /// The Mooncake tenant (unset = `"default"`).
    pub fn tenant<T: AsRef<[u8]> + ?Sized>(mut self, tenant_id: &'a T) -> Event<'a> {
        self.raw.tenant_id = sci_str(tenant_id.as_ref());
        self
    }

    /// Storage medium of the replica: read by an index whose residency is
    /// [`Residency::PerMedium`](crate::Residency::PerMedium), informational otherwise.
    pub fn medium<M: AsRef<[u8]> + ?Sized>(mut self, medium: &'a M) -> Event<'a> {
        self.raw.medium = sci_str(medium.as_ref());
        self
    }

    pub fn kind(&self) -> Option<EventKind> {
        match self.raw.kind {
            sys::SCI_EVENT_STORED => Some(EventKind::Stored),
            sys::SCI_EVENT_REMOVED => Some(EventKind::Removed),
            sys::SCI_EVENT_ALL_CLEARED => Some(EventKind::AllCleared),
            sys::SCI_EVENT_TENANT_CLEARED => Some(EventKind::TenantCleared),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("kind", &self.raw.kind)
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// Index

/// The index of present objects and verified page groups; owns one
/// `sci_index` and frees it on drop.
///
/// Every method takes `&self`: the library synchronizes internally (C1), so
/// one index may be queried from many threads while one applies batches. To
/// feed it from a [`Subscriber`], put it in an `Arc`.
pub struct Index {
    raw: NonNull<sys::sci_index>,
}

// SAFETY: C1 — every sci_index_* function except sci_index_free may be called
// from any thread, concurrently. sci_index_free runs only in Drop, which has
// the index by value: no other use of it can be in flight.
unsafe impl Send for Index {}
// SAFETY: C1, as above: all methods reachable through `&Index` call functions
// the contract declares safe to call concurrently on one handle.
unsafe impl Sync for Index {}

impl Index {
    /// An empty index with the library's defaults.
    pub fn new() -> Result<Index> {
        Index::with_options(&IndexOptions::default())
    }

    pub fn with_options(options: &IndexOptions) -> Result<Index> {
        let raw_options = sys::sci_index_options {
            struct_size: struct_size::<sys::sci_index_options>(),
            max_entries: options.max_entries,
            residency: options.residency.to_sys(),
            medium_tiers: sci_str(options.medium_tiers.as_bytes()),
        };
        let mut out = ptr::null_mut();
        // SAFETY: both pointers are valid for the call; the options are read
        // during the call only (C2, C5).
        check(unsafe { sys::sci_index_new(&raw_options, &mut out) })?;
        NonNull::new(out).map(|raw| Index { raw }).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "sci_index_new: returned SCI_OK and a NULL index",
            )
        })
    }

    /// The raw handle, for callers of [`sys`](crate::sys) functions (e.g.
    /// to measure the wrapper's overhead). It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::sci_index {
        self.raw.as_ptr()
    }

    /// Forgets every key, group and the sequence cursor (counted as a clear).
    pub fn clear(&self) {
        // SAFETY: a live handle (C1).
        unsafe { sys::sci_index_clear(self.raw.as_ptr()) }
    }

    /// Applies one batch published under `sequence` (the sequence rules of
    /// the header: duplicate ignored, gap or restart clears first).
    pub fn apply_events(&self, sequence: u64, events: &[Event<'_>]) -> Result<()> {
        // SAFETY: Event is repr(transparent) over sci_event, so the slice is an
        // array of n valid sci_events whose strings borrow live slices (C3);
        // the library reads them during the call only (C2).
        check(unsafe {
            sys::sci_index_apply_events(
                self.raw.as_ptr(),
                sequence,
                events.as_ptr().cast::<sys::sci_event>(),
                events.len(),
            )
        })
    }

    /// Decodes one ZeroMQ multipart message (any supported wire format) and
    /// applies it as one batch. Malformed: `Status::Decode`, nothing applied.
    pub fn apply_message<F: AsRef<[u8]>>(&self, frames: &[F]) -> Result<()> {
        const INLINE: usize = 4;
        let empty = sys::sci_bytes {
            ptr: ptr::null(),
            len: 0,
        };
        let mut inline = [empty; INLINE];
        let mut spilled = Vec::new();
        let raw_frames: &[sys::sci_bytes] = if frames.len() <= INLINE {
            for (out, frame) in inline.iter_mut().zip(frames) {
                *out = sys::sci_bytes {
                    ptr: frame.as_ref().as_ptr(),
                    len: frame.as_ref().len(),
                };
            }
            &inline[..frames.len()]
        } else {
            spilled.extend(frames.iter().map(|f| sys::sci_bytes {
                ptr: f.as_ref().as_ptr(),
                len: f.as_ref().len(),
            }));
            &spilled
        };
        // SAFETY: raw_frames points at frames.len() descriptors of live byte
        // slices, read during the call only (C2).
        check(unsafe {
            sys::sci_index_apply_message(self.raw.as_ptr(), raw_frames.as_ptr(), raw_frames.len())
        })
    }

    /// Is `object_key` stored for `tenant_id` (empty = `"default"`)?
    pub fn contains(
        &self,
        tenant_id: impl AsRef<[u8]>,
        object_key: impl AsRef<[u8]>,
    ) -> Result<bool> {
        let mut present = false;
        // SAFETY: the strings borrow live slices (C3) for the call; `present`
        // is a valid bool to write.
        check(unsafe {
            sys::sci_index_contains(
                self.raw.as_ptr(),
                sci_str(tenant_id.as_ref()),
                sci_str(object_key.as_ref()),
                &mut present,
            )
        })?;
        Ok(present)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Result<Stats> {
        // SAFETY (zeroed): sci_stats is plain integers and bools; all-zero is valid.
        let mut raw: sys::sci_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = struct_size::<sys::sci_stats>();
        // SAFETY: `raw` is a writable sci_stats of the size it declares (C5).
        check(unsafe { sys::sci_index_stats(self.raw.as_ptr(), &mut raw) })?;
        Ok(Stats::from(&raw))
    }

    /// The counters in the Prometheus text format; `labels` is empty or a
    /// label list body such as `pool="a",model="llama"`.
    pub fn prometheus(&self, labels: &str) -> Result<String> {
        let mut needed = 0usize;
        // SAFETY: a NULL buffer with capacity 0 asks for the size; `needed` is writable.
        let status = unsafe {
            sys::sci_stats_format_prometheus(
                self.raw.as_ptr(),
                sci_str(labels.as_bytes()),
                ptr::null_mut(),
                0,
                &mut needed,
            )
        };
        if status != sys::SCI_ERR_BUFFER_TOO_SMALL {
            check(status)?;
        }
        loop {
            // Counters may gain digits between the two calls: leave room, and
            // retry if that was not enough.
            let mut buf = vec![0u8; needed + 1 + 256];
            let mut written = 0usize;
            // SAFETY: `buf` is writable for buf.len() bytes; `written` is writable.
            let status = unsafe {
                sys::sci_stats_format_prometheus(
                    self.raw.as_ptr(),
                    sci_str(labels.as_bytes()),
                    buf.as_mut_ptr().cast::<c_char>(),
                    buf.len(),
                    &mut written,
                )
            };
            if status == sys::SCI_ERR_BUFFER_TOO_SMALL {
                needed = written;
                continue;
            }
            check(status)?;
            buf.truncate(written);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }

    /// The router's query: which whole pages of `tokens` are fully present
    /// under `layout`. Fills `scratch` (no allocation once it has grown to
    /// the request's page count) and returns the per-page flags, the ranges
    /// of consecutive hit pages and the counts, borrowed from it.
    /// A `block_size` other than the layout's [`block_size`](Layout::block_size)
    /// answers zero hits.
    ///
    /// On a vLLM layout a "page" is a router block (`main_event_block_size`
    /// tokens): it hits when, for every full-attention group, the chunks
    /// covering it lie wholly inside the request and have every object
    /// present (a layout with no full-attention group has no block hit).
    /// Dynamo's answer is [`check_prefix`](Index::check_prefix).
    pub fn check_pages<'s>(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        scratch: &'s mut PageScratch,
    ) -> Result<PageHits<'s>> {
        self.pages_query(layout, tokens, block_size, None, scratch)
    }

    /// [`check_pages`](Index::check_pages) for a request with vLLM extra
    /// keys (LoRA name, cache salt). On an SGLang layout a request with any
    /// extras hits nothing.
    pub fn check_pages_with_extras<'s>(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: &RequestExtras<'_>,
        scratch: &'s mut PageScratch,
    ) -> Result<PageHits<'s>> {
        self.pages_query(layout, tokens, block_size, Some(extras), scratch)
    }

    fn pages_query<'s>(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: Option<&RequestExtras<'_>>,
        scratch: &'s mut PageScratch,
    ) -> Result<PageHits<'s>> {
        // n_tokens / block size always suffices (header); the block size is
        // > 0 for every layout the library builds.
        let cap = tokens.len() / layout.block_size as usize;
        let hits = scratch.hits_buffer(cap);
        let mut result = sys::sci_page_result {
            struct_size: struct_size::<sys::sci_page_result>(),
            n_pages: 0,
            total_hits: 0,
            prefix_hits: 0,
            fast_path: 0,
            prefix_tokens: 0,
        };
        let raw_extras = extras.map(raw_extras);
        // SAFETY: both handles are live; `tokens` is readable and `hits`
        // writable for the lengths passed; `result` and the extras declare
        // their size (C5), the extras' strings borrow live slices (C3). The
        // index's interior updates (verified groups) are synchronized by the
        // library (C1), so `&self` suffices.
        check(unsafe {
            match &raw_extras {
                None => sys::sci_index_check_pages(
                    self.raw.as_ptr(),
                    layout.raw_ptr(),
                    tokens.as_ptr(),
                    tokens.len(),
                    block_size,
                    hits.as_mut_ptr(),
                    hits.len(),
                    &mut result,
                ),
                Some(raw) => sys::sci_index_check_pages_with_extras(
                    self.raw.as_ptr(),
                    layout.raw_ptr(),
                    tokens.as_ptr(),
                    tokens.len(),
                    block_size,
                    raw,
                    hits.as_mut_ptr(),
                    hits.len(),
                    &mut result,
                ),
            }
        })?;
        let summary = PageSummary {
            n_pages: result.n_pages,
            total_hits: result.total_hits,
            prefix_hits: result.prefix_hits,
            fast_path: result.fast_path,
            prefix_tokens: result.prefix_tokens,
        };
        Ok(scratch.finish(result.n_pages, summary))
    }

    /// Which storage tier each page of `tokens` is in (added in 1.3), and
    /// the usable prefix per tier, in one call. `page_tier` is resized to
    /// the request's pages (reuse it: a warm call allocates nothing); entry
    /// `i` becomes the best tier at which page `i` (a vLLM router block) is
    /// fully present, [`TIER_ABSENT`](crate::TIER_ABSENT) if it is not. A
    /// page is at tier `t` when every object it needs has a replica on a
    /// medium of tier `t` or faster ([`IndexOptions::medium_tiers`]), read
    /// at one instant like its presence. The summary's `prefix_pages[t]` is
    /// the prefix answer counting only pages at tier `t` or faster (on a
    /// vLLM layout, Dynamo's); at the slowest tier it is
    /// [`check_prefix`](Index::check_prefix)'s. `extras`: a vLLM request's
    /// LoRA name and cache salt (on an SGLang layout, a request with any
    /// hits nothing).
    pub fn check_tiers(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: Option<&RequestExtras<'_>>,
        page_tier: &mut Vec<u8>,
    ) -> Result<TierSummary> {
        // n_tokens / block size always suffices (as pages_query).
        page_tier.clear();
        page_tier.resize(tokens.len() / layout.block_size as usize, TIER_ABSENT);
        let mut result = sys::sci_tier_result {
            struct_size: struct_size::<sys::sci_tier_result>(),
            n_tiers: 0,
            n_pages: 0,
            prefix_pages: [0; 4],
            pages_at: [0; 4],
            prefix_tokens: [0; 4],
        };
        let raw_extras = extras.map(raw_extras);
        // SAFETY: both handles are live; `tokens` is readable and
        // `page_tier` writable for the lengths passed; `result` and the
        // extras declare their size (C5), the extras' strings borrow live
        // slices (C3); the index synchronizes its own updates (C1).
        check(unsafe {
            sys::sci_index_check_tiers(
                self.raw.as_ptr(),
                layout.raw_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                block_size,
                raw_extras.as_ref().map_or(ptr::null(), |raw| raw as *const _),
                page_tier.as_mut_ptr(),
                page_tier.len(),
                &mut result,
            )
        })?;
        page_tier.truncate(result.n_pages);
        Ok(TierSummary {
            n_tiers: result.n_tiers as usize,
            n_pages: result.n_pages,
            prefix_pages: result.prefix_pages,
            pages_at: result.pages_at,
            prefix_tokens: result.prefix_tokens,
        })
    }

    /// The router's prefix query: how many leading pages of `tokens` are
    /// fully present under `layout`, stopping at the first page that is not.
    /// No page after it is looked up (the next may be hashed), so an
    /// unrelated prompt costs one page hash. Allocates nothing. A `block_size` other
    /// than the layout's [`block_size`](Layout::block_size) answers 0.
    ///
    /// On a vLLM layout this is Dynamo's answer, in blocks: the longest
    /// prefix `L` tokens, a multiple of the layout's alignment (the lcm of
    /// its block sizes), that never includes the request's last token and at
    /// which every KV-cache group holds (full attention: every chunk ending
    /// at or before `L`; sliding window: the last chunks the window needs;
    /// Mamba: the chunk ending exactly at `L`).
    pub fn check_prefix(&self, layout: &Layout, tokens: &[u32], block_size: u32) -> Result<usize> {
        Ok(self.prefix_query(layout, tokens, block_size, None)?.pages)
    }

    /// [`check_prefix`](Index::check_prefix) answering in tokens too (added
    /// in 1.4): the same walk, stopping at the first missing page, and
    /// [`PrefixCredit::tokens`], the leading prompt tokens the engine will
    /// load from the pool (SGLang: pages x page size; vLLM: whole chunks,
    /// past the last whole router block where the layout loads them).
    /// `extras`: a vLLM request's LoRA name and cache salt.
    pub fn check_prefix_tokens(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: Option<&RequestExtras<'_>>,
    ) -> Result<PrefixCredit> {
        self.prefix_query(layout, tokens, block_size, extras)
    }

    /// [`check_prefix`](Index::check_prefix) for a request with vLLM extra
    /// keys. On an SGLang layout a request with any extras answers 0.
    pub fn check_prefix_with_extras(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: &RequestExtras<'_>,
    ) -> Result<usize> {
        Ok(self.prefix_query(layout, tokens, block_size, Some(extras))?.pages)
    }

    fn prefix_query(
        &self,
        layout: &Layout,
        tokens: &[u32],
        block_size: u32,
        extras: Option<&RequestExtras<'_>>,
    ) -> Result<PrefixCredit> {
        let mut credit = PrefixCredit::default();
        let raw_extras = extras.map(raw_extras);
        // SAFETY: both handles are live; `tokens` is readable for its length
        // and both counts writable; the extras (or NULL) declare their size
        // (C5) and borrow live slices (C3). Interior updates are
        // synchronized by the library (C1), so `&self` suffices.
        check(unsafe {
            sys::sci_index_check_prefix_tokens(
                self.raw.as_ptr(),
                layout.raw_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                block_size,
                raw_extras.as_ref().map_or(ptr::null(), |raw| raw as *const _),
                &mut credit.pages,
                &mut credit.tokens,
            )
        })?;
        Ok(credit)
    }

    /// Dynamo's answer ([`check_prefix`](Index::check_prefix)) for a vLLM
    /// request given by the block hashes the caller already holds: one
    /// 32-byte digest per whole hash block (`hash_block_size` tokens), in
    /// order. `n_tokens` is the request's length (`None`: one more token than
    /// the hashes cover, so every block is creditable). `Status::InvalidArgument`
    /// for an SGLang layout or an `n_tokens` shorter than the hashes.
    pub fn check_block_hashes(
        &self,
        layout: &Layout,
        digests: &[[u8; 32]],
        n_tokens: Option<usize>,
        block_size: u32,
    ) -> Result<usize> {
        let hashes = sys::sci_block_hashes {
            struct_size: struct_size::<sys::sci_block_hashes>(),
            // [[u8; 32]] is n * 32 contiguous bytes.
            digests: digests.as_ptr().cast::<u8>(),
            event_hashes: ptr::null(),
            n_hashes: digests.len(),
            n_tokens: n_tokens.unwrap_or(0),
        };
        self.block_hashes_query(layout, &hashes, block_size)
    }

    /// [`check_block_hashes`](Index::check_block_hashes) by the engine's
    /// 64-bit event hashes (the digests' low 64 bits, as vLLM's KV events
    /// carry them), resolved through the digests of the keys the index
    /// holds: an event hash no present key's digest has, or that two
    /// digests share, is a missing block.
    pub fn check_event_hashes(
        &self,
        layout: &Layout,
        event_hashes: &[u64],
        n_tokens: Option<usize>,
        block_size: u32,
    ) -> Result<usize> {
        let hashes = sys::sci_block_hashes {
            struct_size: struct_size::<sys::sci_block_hashes>(),
            digests: ptr::null(),
            event_hashes: event_hashes.as_ptr(),
            n_hashes: event_hashes.len(),
            n_tokens: n_tokens.unwrap_or(0),
        };
        self.block_hashes_query(layout, &hashes, block_size)
    }

    fn block_hashes_query(
        &self,
        layout: &Layout,
        hashes: &sys::sci_block_hashes,
        block_size: u32,
    ) -> Result<usize> {
        let mut prefix_blocks = 0usize;
        // SAFETY: both handles are live; `hashes` declares its size (C5) and
        // points at n_hashes digests (32 bytes each) or event hashes of a
        // live slice, exactly one of the two set by the callers above (an
        // empty slice's pointer is dangling, never read with n_hashes 0);
        // `prefix_blocks` is writable. Read during the call only (C2).
        check(unsafe {
            sys::sci_index_check_block_hashes(
                self.raw.as_ptr(),
                layout.raw_ptr(),
                hashes,
                block_size,
                &mut prefix_blocks,
            )
        })?;
        Ok(prefix_blocks)
    }
}

/// The C view of `extras`, borrowing its strings.
fn raw_extras(extras: &RequestExtras<'_>) -> sys::sci_request_extras {
    sys::sci_request_extras {
        struct_size: struct_size::<sys::sci_request_extras>(),
        lora_name: sci_opt_str(extras.lora_name),
        cache_salt: sci_opt_str(extras.cache_salt),
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: we own the handle; Drop has exclusive access (C1) and no
        // subscriber can be feeding it, since each holds an Arc<Index> (C6).
        unsafe { sys::sci_index_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("raw", &self.raw).finish()
    }
}

// ---------------------------------------------------------------------------
// Layout

/// Which engine's naming a [`Layout`] follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutFamily {
    /// SGLang HiCache pages (`docs/sglang-hicache.md`).
    SGLang,
    /// vLLM MooncakeStoreConnector chunks (`docs/vllm-family.md`).
    Vllm,
}

/// A validated, immutable layout, SGLang's or vLLM's. Share it freely:
/// `&Layout` across threads, or clones, which share one `sci_layout` (a
/// clone costs a reference count, not a second parse), freed with the last.
#[derive(Clone)]
pub struct Layout {
    handle: Arc<LayoutHandle>,
    block_size: u32,
    family: LayoutFamily,
}

/// The owned `sci_layout`, freed when the last [`Layout`] sharing it goes.
struct LayoutHandle(NonNull<sys::sci_layout>);

// SAFETY: C1 — the layout is immutable after sci_layout_new and may be used by
// any number of threads; sci_layout_free runs only in Drop (exclusive access).
unsafe impl Send for LayoutHandle {}
// SAFETY: as above; `&LayoutHandle` only passes the handle to thread-safe calls.
unsafe impl Sync for LayoutHandle {}

impl Drop for LayoutHandle {
    fn drop(&mut self) {
        // SAFETY: the last owner (the Arc's count reached zero); Drop has
        // exclusive access (C1).
        unsafe { sys::sci_layout_free(self.0.as_ptr()) }
    }
}

impl Layout {
    /// Validates `spec` in the library and builds the layout.
    pub fn new(spec: &LayoutBuilder) -> Result<Layout> {
        // The C views borrow `spec` and these vectors; they live until the
        // call returns, and the library copies what it needs (C2).
        let suffixes: Vec<Vec<sys::sci_str>> = spec
            .pools
            .iter()
            .map(|p| p.suffixes.iter().map(|s| sci_str(s.as_bytes())).collect())
            .collect();
        let pools: Vec<sys::sci_pool> = spec
            .pools
            .iter()
            .zip(&suffixes)
            .map(|(pool, suffixes)| {
                let (hit_policy, trailing_pages) = match pool.hit_policy {
                    HitPolicy::AllPages => (sys::SCI_HIT_ALL_PAGES, 0),
                    HitPolicy::TrailingPages(n) => (sys::SCI_HIT_TRAILING_PAGES, n),
                };
                sys::sci_pool {
                    suffixes: suffixes.as_ptr(),
                    n_suffixes: suffixes.len(),
                    hit_policy,
                    trailing_pages,
                }
            })
            .collect();
        let raw_spec = sys::sci_layout_spec {
            struct_size: struct_size::<sys::sci_layout_spec>(),
            page_size: spec.page_size,
            tp_size: spec.tp_size,
            pp_size: spec.pp_size,
            tp_lcm_size: spec.tp_lcm_size,
            is_mla_model: spec.is_mla_model,
            is_eagle: spec.is_eagle,
            should_split_heads: spec.should_split_heads,
            extra_backend_tag: sci_str(spec.extra_backend_tag.as_bytes()),
            key_prefix: sci_str(spec.key_prefix.as_bytes()),
            tenant_id: sci_str(spec.tenant_id.as_bytes()),
            pools: if pools.is_empty() {
                ptr::null()
            } else {
                pools.as_ptr()
            },
            n_pools: pools.len(),
        };
        let mut out = ptr::null_mut();
        // SAFETY: every pointer in raw_spec is valid for the call (see above).
        check(unsafe { sys::sci_layout_new(&raw_spec, &mut out) })?;
        Layout::from_raw(out, "sci_layout_new")
    }

    /// Builds a layout from the runtime config a worker publishes, in the
    /// library (`sci_layout_new_json`): vLLM's MooncakeStoreConnector
    /// descriptor (bare or wrapped as `{"vllm_mooncake_store": {...}}`) makes
    /// a [`LayoutFamily::Vllm`] layout; SGLang's runtime config (the fields
    /// [`LayoutBuilder::from_json`] reads, with the same checks) an SGLang
    /// one. Unknown fields are ignored. `Status::InvalidArgument`, with the
    /// library's message naming the field by its JSON path, for text that is
    /// not a JSON object, a missing or mistyped field, or a value the
    /// library cannot honour.
    pub fn from_json(json: &str) -> Result<Layout> {
        let mut out = ptr::null_mut();
        // SAFETY: the string borrows `json` for the call (C2, C3); `out` is writable.
        check(unsafe { sys::sci_layout_new_json(sci_str(json.as_bytes()), &mut out) })?;
        Layout::from_raw(out, "sci_layout_new_json")
    }

    /// Takes ownership of a layout the library just built.
    fn from_raw(out: *mut sys::sci_layout, function: &str) -> Result<Layout> {
        let raw = NonNull::new(out).ok_or_else(|| {
            Error::new(
                Status::Internal,
                format!("{}: returned SCI_OK and a NULL layout", function),
            )
        })?;
        // SAFETY: a live layout handle; both calls only read it (C1).
        let (family, block_size) = unsafe {
            (
                sys::sci_layout_get_family(raw.as_ptr()),
                sys::sci_layout_block_size(raw.as_ptr()),
            )
        };
        Ok(Layout {
            handle: Arc::new(LayoutHandle(raw)),
            block_size,
            family: if family == sys::SCI_LAYOUT_VLLM {
                LayoutFamily::Vllm
            } else {
                LayoutFamily::SGLang
            },
        })
    }

    pub fn family(&self) -> LayoutFamily {
        self.family
    }

    /// The block size a router must query the layout with: SGLang's
    /// `page_size`, vLLM's `main_event_block_size`.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// [`block_size`](Layout::block_size), by its SGLang name (for a vLLM
    /// layout, a "page" is a router block).
    pub fn page_size(&self) -> u32 {
        self.block_size
    }

    /// The raw handle (still owned by `self` and its clones).
    pub fn as_raw(&self) -> *const sys::sci_layout {
        self.handle.0.as_ptr()
    }

    fn raw_ptr(&self) -> *mut sys::sci_layout {
        self.handle.0.as_ptr()
    }
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layout")
            .field("raw", &self.handle.0)
            .field("family", &self.family)
            .field("block_size", &self.block_size)
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Subscriber

/// A background thread, owned by the library, that follows a publisher and
/// applies every message to an index. Stopped (thread joined, socket closed)
/// when dropped.
///
/// It holds an `Arc` of its index: the index cannot be freed while the
/// subscriber feeds it (C6), whatever safe code does with its own handles.
pub struct Subscriber {
    raw: NonNull<sys::sci_subscriber>,
    // Dropped after `Drop::drop` has stopped the thread (fields drop last).
    index: Arc<Index>,
}

// SAFETY: the handle is used only by sci_subscriber_stop, in Drop, which has
// the subscriber by value (C1: *_stop must not race other uses — there are
// none). Moving the handle to another thread and stopping it there is allowed:
// the contract ties no function to the starting thread.
unsafe impl Send for Subscriber {}

impl Subscriber {
    /// Connects to `options.endpoint` and starts applying what arrives to
    /// `index`. `Status::Io` if the socket or thread cannot be set up;
    /// `Status::InvalidArgument` if `index` already has a subscriber (one
    /// per index: drop that one first).
    pub fn start(index: Arc<Index>, options: &SubscriberOptions) -> Result<Subscriber> {
        let raw_options = sys::sci_subscriber_options {
            struct_size: struct_size::<sys::sci_subscriber_options>(),
            endpoint: sci_str(options.endpoint.as_bytes()),
            topic: sci_str(&options.topic),
            reconnect_ms: options.reconnect_ms,
            reconnect_max_ms: options.reconnect_max_ms,
            stale_after_ms: options.stale_after_ms,
            snapshot_url: sci_str(options.snapshot_url.as_bytes()),
            resync_min_interval_ms: options.resync_min_interval_ms,
            snapshot_timeout_ms: options.snapshot_timeout_ms,
            etcd_endpoints: sci_str(options.etcd_endpoints.as_bytes()),
            cluster_id: sci_str(options.cluster_id.as_bytes()),
            event_port: options.event_port,
            admin_port: options.admin_port,
            redis_endpoint: sci_str(options.redis_endpoint.as_bytes()),
            status_url: sci_str(options.status_url.as_bytes()),
            status_poll_ms: options.status_poll_ms,
            reconnect_policy: options.reconnect_policy,
            resync_catch_up_max_ms: options.resync_catch_up_max_ms,
        };
        let mut out = ptr::null_mut();
        // SAFETY: the options borrow live strings for the call (C2, C3). The
        // index stays alive until after sci_subscriber_stop: `index` is kept
        // in the returned Subscriber and dropped after it stops (C6).
        check(unsafe { sys::sci_subscriber_start(index.raw.as_ptr(), &raw_options, &mut out) })?;
        match NonNull::new(out) {
            Some(raw) => Ok(Subscriber { raw, index }),
            None => Err(Error::new(
                Status::Internal,
                "sci_subscriber_start: returned SCI_OK and a NULL subscriber",
            )),
        }
    }

    /// Moves the subscriber to another publisher (an application that finds
    /// the Mooncake leader itself): connects to `endpoint`, clears the index
    /// and resyncs from `snapshot_url` (empty = no resync). Returns once the
    /// switch is made; `Stats::resyncing` tells when the resync is done.
    /// `Status::InvalidArgument` (nothing changes) for an unusable endpoint
    /// or a URL that is not http(s).
    pub fn retarget(&self, endpoint: &str, snapshot_url: &str) -> Result<()> {
        // SAFETY: the handle is live (it is stopped only in Drop, which
        // cannot run while `&self` is borrowed); the strings are borrowed for
        // the call only (C2, C3).
        check(unsafe {
            sys::sci_subscriber_retarget(
                self.raw.as_ptr(),
                sci_str(endpoint.as_bytes()),
                sci_str(snapshot_url.as_bytes()),
            )
        })
    }

    /// The index this subscriber feeds.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// Stops the thread and closes the socket (what dropping does).
    pub fn stop(self) {}
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        // SAFETY: we own the handle and Drop has exclusive access (C1); the
        // index is still alive (self.index is dropped after this). Dropped in
        // a log handler on the subscriber's own thread, the stop returns
        // without joining and the thread finishes on an index the library
        // keeps alive, so dropping the last `Arc<Index>` next is sound (C6).
        unsafe { sys::sci_subscriber_stop(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("raw", &self.raw)
            .field("index", &self.index)
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Logging

/// Routes the library's log lines (process-wide) to `handler`, which may be
/// called from any thread, the subscriber's included; `None` silences them
/// (the default). A panic in the handler is caught: it never unwinds into C.
///
/// The handler may itself call `set_log_handler` (the new one takes effect
/// once the handler returns) and drop a `Subscriber`, the one whose thread
/// is calling it included (C6, C8): neither hangs nor aborts.
pub fn set_log_handler(handler: Option<fn(LogLevel, &str)>) {
    match handler {
        // SAFETY: the trampoline matches sci_log_fn; `user` is a plain fn
        // pointer ('static), so it can never dangle.
        Some(handler) => unsafe {
            sys::sci_set_log_callback(Some(log_trampoline), handler as *mut c_void)
        },
        // SAFETY: NULL silences the library.
        None => unsafe { sys::sci_set_log_callback(None, ptr::null_mut()) },
    }
}

extern "C" fn log_trampoline(user: *mut c_void, level: i32, msg: *const c_char, len: usize) {
    if user.is_null() || (msg.is_null() && len > 0) {
        return;
    }
    // SAFETY: `user` is the `fn(LogLevel, &str)` set_log_handler registered
    // (a 'static fn pointer; fn and data pointers have the same size on every
    // target the library supports).
    let handler = unsafe { std::mem::transmute::<*mut c_void, fn(LogLevel, &str)>(user) };
    let bytes = if len == 0 {
        &[][..]
    } else {
        // SAFETY: the library passes `len` readable bytes at `msg`, valid for
        // the duration of this call (sci_log_fn); they are copied below.
        unsafe { std::slice::from_raw_parts(msg.cast::<u8>(), len) }
    };
    let text = String::from_utf8_lossy(bytes);
    let _ = std::panic::catch_unwind(|| handler(LogLevel::from_raw(level), &text));
}
