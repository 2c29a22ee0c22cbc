//! Plain values crossing the API: options, counters, log levels.

use std::time::Duration;

use crate::sys;

/// Options of [`Index::with_options`](crate::Index::with_options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexOptions {
    /// Most entries (present keys + groups) held at once; 0 = the library's
    /// default. Beyond it new entries are refused and counted, never wiped.
    pub max_entries: u64,
    /// When a key stops being present (added in 1.2).
    pub residency: Residency,
    /// Storage tiers for [`Index::check_tiers`](crate::Index::check_tiers):
    /// `"cpu=0,disk=1"` (the default, also when empty), medium name = tier,
    /// fastest tier 0, at most 4 tiers. A medium not named, and a key whose
    /// media are unknown (snapshot keys, [`Residency::Object`]), count at the
    /// slowest tier (added in 1.3).
    pub medium_tiers: String,
}

/// When a key stops being present: the rule to follow for the master's
/// generation (added in 1.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Residency {
    /// Any `removed` drops the key, whatever its medium: exact for
    /// first-generation masters (Mooncake main), safe on both generations,
    /// costing hits on a per-medium master (a key evicted from memory but
    /// kept on disk reads absent). The default.
    #[default]
    Object,
    /// A key is present while some medium holds it: exact for per-medium
    /// (second-generation) masters, and since 1.3 safe on a first-generation
    /// one (a removal whose event shows that generation drops the whole key).
    PerMedium,
}

impl Residency {
    pub(crate) fn to_sys(self) -> u32 {
        match self {
            Residency::Object => sys::SCI_RESIDENCY_OBJECT as u32,
            Residency::PerMedium => sys::SCI_RESIDENCY_PER_MEDIUM as u32,
        }
    }
}

/// Where and how a [`Subscriber`](crate::Subscriber) follows a publisher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberOptions {
    pub(crate) endpoint: String,
    pub(crate) topic: Vec<u8>,
    pub(crate) reconnect_ms: u32,
    pub(crate) reconnect_max_ms: u32,
    pub(crate) stale_after_ms: u32,
    pub(crate) snapshot_url: String,
    pub(crate) resync_min_interval_ms: u32,
    pub(crate) snapshot_timeout_ms: u32,
    pub(crate) etcd_endpoints: String,
    pub(crate) cluster_id: String,
    pub(crate) event_port: u32,
    pub(crate) admin_port: u32,
    pub(crate) redis_endpoint: String,
    pub(crate) status_url: String,
    pub(crate) status_poll_ms: u32,
    pub(crate) reconnect_policy: u32,
    pub(crate) resync_catch_up_max_ms: u32,
}

impl SubscriberOptions {
    /// Follow the publisher bound at `endpoint` (e.g. `"tcp://127.0.0.1:5557"`),
    /// every topic, with the library's default timings.
    pub fn new(endpoint: impl Into<String>) -> SubscriberOptions {
        SubscriberOptions {
            endpoint: endpoint.into(),
            topic: Vec::new(),
            reconnect_ms: 0,
            reconnect_max_ms: 0,
            stale_after_ms: 0,
            snapshot_url: String::new(),
            resync_min_interval_ms: 0,
            snapshot_timeout_ms: 0,
            etcd_endpoints: String::new(),
            cluster_id: String::new(),
            event_port: 0,
            admin_port: 0,
            redis_endpoint: String::new(),
            status_url: String::new(),
            status_poll_ms: 0,
            reconnect_policy: sys::SCI_RECONNECT_RESYNC as u32,
            resync_catch_up_max_ms: 0,
        }
    }

    /// What a real disconnect does (added in 1.3.0). By default (`false`)
    /// it clears the index, drops the receive queue and resyncs
    /// (`disconnect_clears`): a publisher that restarted behind it cannot
    /// leave a false hit, whatever its sequence and event ids. `true`: 1.3's
    /// rule, the state is kept when the next batch continues the sequence
    /// and the event ids (a blip costs nothing; a restart whose sequence and
    /// ids both continue goes unseen).
    pub fn trust_reconnects_by_event_ids(mut self, trust: bool) -> Self {
        self.reconnect_policy =
            if trust { sys::SCI_RECONNECT_EVENT_IDS as u32 } else { sys::SCI_RECONNECT_RESYNC as u32 };
        self
    }

    /// How long, at most, a resync released before its catch-up was
    /// anchored withholds stored events while batches flow (zero = 30 s;
    /// `catch_ups_unanchored`) (added in 1.3.0).
    pub fn resync_catch_up_max(mut self, limit: Duration) -> Self {
        self.resync_catch_up_max_ms = millis(limit);
        self
    }

    /// The master's `GET /kv_events/status` (added in 1.3), read while the
    /// stream is connected and quiet to find a loss at its tail (the index
    /// is cleared, `tail_losses`), and after each resync's snapshot to end
    /// its catch-up where the publisher's queue has caught up
    /// (`resyncs_anchored`). Unset: beside the snapshot URL, or the
    /// leader's with HA following.
    pub fn status_url(mut self, url: impl Into<String>) -> Self {
        self.status_url = url.into();
        self
    }

    /// How often a quiet stream's status is read (zero = 1 s); `None`:
    /// never, not even for a resync's catch-up, which then ends on its
    /// 100 ms timer (`resyncs_timed`) (added in 1.3).
    pub fn status_poll(mut self, interval: Option<Duration>) -> Self {
        self.status_poll_ms = match interval {
            Some(interval) => millis(interval),
            None => u32::MAX,
        };
        self
    }

    /// Follow the Mooncake HA leader named in etcd instead of a fixed
    /// endpoint: `etcd_endpoints` is `"http://etcd-a:2379,http://etcd-b:2379"`;
    /// the leader's events are read from `tcp://<leader ip>:<event_port>` and
    /// its snapshot from `http://<leader ip>:<admin_port>/get_all_keys`
    /// (admin port 0 = 9003). Every new leader clears the index and resyncs.
    pub fn follow_leader(etcd_endpoints: impl Into<String>, event_port: u16, admin_port: u16) -> SubscriberOptions {
        let mut options = SubscriberOptions::leader_ports(event_port, admin_port);
        options.etcd_endpoints = etcd_endpoints.into();
        options
    }

    /// Follow the Mooncake HA leader named in Redis, as Mooncake's Redis
    /// leadership backend writes it: `redis_endpoint` is
    /// `"redis://[:password@]host:port[/db]"`; the view is the hash
    /// `mooncake-store/{<ns>}/master_view` (`leader_address`, `view_version`).
    /// Events, snapshot and new leaders as with [`follow_leader`](Self::follow_leader).
    pub fn follow_leader_redis(redis_endpoint: impl Into<String>, event_port: u16, admin_port: u16) -> SubscriberOptions {
        let mut options = SubscriberOptions::leader_ports(event_port, admin_port);
        options.redis_endpoint = redis_endpoint.into();
        options
    }

    /// No endpoint (the leader view names it), the leader's ports.
    fn leader_ports(event_port: u16, admin_port: u16) -> SubscriberOptions {
        let mut options = SubscriberOptions::new("");
        options.event_port = u32::from(event_port);
        options.admin_port = u32::from(admin_port);
        options
    }

    /// The etcd key is `mooncake-store/<cluster_id>/master_view`, the Redis
    /// hash `mooncake-store/{<ns>}/master_view` (`<ns>`: the cluster id
    /// without a trailing `/`, `{` and `}` made `_`); empty =
    /// `"mooncake_cluster"`. Only used with [`follow_leader`](Self::follow_leader)
    /// and [`follow_leader_redis`](Self::follow_leader_redis).
    pub fn cluster_id(mut self, cluster_id: impl Into<String>) -> Self {
        self.cluster_id = cluster_id.into();
        self
    }

    /// Resync from this snapshot (`http(s)://master:9003/get_all_keys`) at
    /// start and after every clear: until the snapshot is loaded and the
    /// stream caught up, queries answer miss. Empty = no resync.
    pub fn snapshot(mut self, url: impl Into<String>) -> Self {
        self.snapshot_url = url.into();
        self
    }

    /// At most one snapshot download per `interval` (zero = 5 s); failures
    /// back off further, up to 16 times it.
    pub fn resync_min_interval(mut self, interval: Duration) -> Self {
        self.resync_min_interval_ms = millis(interval);
        self
    }

    /// Time-out of one whole snapshot download (zero = 60 s).
    pub fn snapshot_timeout(mut self, timeout: Duration) -> Self {
        self.snapshot_timeout_ms = millis(timeout);
        self
    }

    /// Only messages whose topic frame starts with `prefix` (empty = all).
    pub fn topic(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.topic = prefix.into();
        self
    }

    /// First reconnect interval and back-off ceiling (zero = library default).
    pub fn reconnect(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect_ms = millis(first);
        self.reconnect_max_ms = millis(max);
        self
    }

    /// Disconnected (or unproven after a reconnect) for longer than this, the
    /// index is cleared and answers miss (zero = library default, 10 s).
    pub fn stale_after(mut self, grace: Duration) -> Self {
        self.stale_after_ms = millis(grace);
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// Whole milliseconds, rounding a non-zero sub-millisecond duration up (0
/// means "default" to the library) and saturating at u32::MAX.
fn millis(duration: Duration) -> u32 {
    let ms = duration.as_millis();
    if ms == 0 && !duration.is_zero() {
        1
    } else {
        u32::try_from(ms).unwrap_or(u32::MAX)
    }
}

/// A snapshot of the index's counters (each read atomically; the set is not
/// one atomic snapshot). Gauges: `keys`, `groups` (page entries since 1.4),
/// `subscriber_connected`, `snapshot_keys`, `resyncing`; the rest only grow.
/// `verified_groups`, `summarised_pages`, `tail_numbers`, `groups_adopted`
/// and `stray_keys` are 0 since 1.4 (the page store retired what they counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub keys: u64,
    pub groups: u64,
    pub verified_groups: u64,
    pub batches_applied: u64,
    pub events_applied: u64,
    pub duplicate_batches: u64,
    pub sequence_gaps: u64,
    pub clears: u64,
    pub malformed_messages: u64,
    pub ignored_events: u64,
    pub capacity_refusals: u64,
    /// `None` until a batch is applied, and again after a clear.
    pub last_sequence: Option<u64>,
    pub subscriber_connected: bool,
    pub subscriber_connects: u64,
    pub subscriber_disconnects: u64,
    pub messages_received: u64,
    pub queries: u64,
    pub pages_checked: u64,
    pub page_hits: u64,
    pub fast_path_hits: u64,
    /// Snapshots loaded and caught up with the stream.
    pub resyncs: u64,
    /// Resyncs that failed (download, time-out, malformed body, overflow, gap).
    pub resync_failures: u64,
    /// Keys loaded by the last completed resync.
    pub snapshot_keys: u64,
    /// A resync is under way: queries answer miss.
    pub resyncing: bool,
    /// New leader views followed (etcd).
    pub leader_changes: u64,
    /// Stored events not applied because their Mooncake batch began a run
    /// right after a possible loss (added in 1.1).
    pub stores_withheld: u64,
    /// 0 since 1.4 (1.3: pages in the page summary).
    pub summarised_pages: u64,
    /// 0 since 1.4 (1.3: key tails numbered for the page summary).
    pub tail_numbers: u64,
    /// 0 since 1.4 (1.3: snapshot pages given their group back).
    pub groups_adopted: u64,
    /// 0 since 1.4 (1.3: page keys present outside their page's group).
    pub stray_keys: u64,
    /// Tenants emptied by a `cleared` event, or by an event of an unknown
    /// type that names no key (added in 1.2).
    pub tenant_clears: u64,
    /// Per-medium residency: removals that left their key present on
    /// another medium (added in 1.2).
    pub medium_removals_kept: u64,
    /// Queries whose block size is not the layout's (answered with no pages) (added in 1.3).
    pub block_size_mismatches: u64,
    /// Gaps found through the publisher's counters (a loss at the tail of a quiet stream) (added in 1.3).
    pub tail_losses: u64,
    /// Reconnects whose next batch continued the sequence but not the event
    /// ids: a restarted publisher (cleared, resynced if configured) (added in 1.3).
    pub restarts_suspected: u64,
    /// Resyncs whose catch-up ended at a batch the publisher's counters anchor (added in 1.3).
    pub resyncs_anchored: u64,
    /// Resyncs whose catch-up ended on the timer (no status endpoint) (added in 1.3).
    pub resyncs_timed: u64,
    /// Reads of the publisher's status endpoint that failed or found none (added in 1.3).
    pub status_unavailable: u64,
    /// Removals applied to one medium of their key (per-medium rule) (added in 1.3).
    pub removals_per_medium: u64,
    /// Removals applied to the whole key: object rule, first-generation
    /// removals, removals on no known medium (added in 1.3).
    pub removals_whole_key: u64,
    /// Gauge: publisher generation the stream has shown (0 unknown, 1, 2) (added in 1.3).
    pub stream_generation: u64,
    /// Removals whose publisher generation contradicts the residency option (added in 1.3).
    pub residency_mismatches: u64,
    /// Failures of the subscriber's loop, each clearing the index: out of
    /// memory or no thread (it resumes), or a socket error (it stops) (added in 1.3).
    pub subscriber_failures: u64,
    /// Gauges: present keys by the tier of their fastest medium
    /// ([`IndexOptions::medium_tiers`]; unknown media: the slowest tier) (added in 1.3).
    pub keys_by_tier: [u64; 4],
    /// Publisher status answers refused: a bound below a sequence the stream
    /// had shown (another master's, or counters reset), or values out of
    /// range (added in 1.3.0).
    pub status_refused: u64,
    /// Resyncs released before their catch-up was anchored (a quiet master,
    /// or the hold's limit): stored events withheld until the anchor
    /// (added in 1.3.0).
    pub resyncs_withholding: u64,
    /// Catch-ups that met no anchor within `resync_catch_up_max_ms` while
    /// batches flowed (added in 1.3.0).
    pub catch_ups_unanchored: u64,
    /// Disconnects that cleared the index because a restart behind them
    /// could not be ruled out (the default reconnect policy; added in 1.3.0).
    pub disconnect_clears: u64,
    /// Keys stored whole because every page slot number was taken (1.4).
    pub stores_past_slot_capacity: u64,
}

impl From<&sys::sci_stats> for Stats {
    fn from(s: &sys::sci_stats) -> Stats {
        Stats {
            keys: s.keys,
            groups: s.groups,
            verified_groups: s.verified_groups,
            batches_applied: s.batches_applied,
            events_applied: s.events_applied,
            duplicate_batches: s.duplicate_batches,
            sequence_gaps: s.sequence_gaps,
            clears: s.clears,
            malformed_messages: s.malformed_messages,
            ignored_events: s.ignored_events,
            capacity_refusals: s.capacity_refusals,
            last_sequence: if s.has_sequence {
                Some(s.last_sequence)
            } else {
                None
            },
            subscriber_connected: s.subscriber_connected,
            subscriber_connects: s.subscriber_connects,
            subscriber_disconnects: s.subscriber_disconnects,
            messages_received: s.messages_received,
            queries: s.queries,
            pages_checked: s.pages_checked,
            page_hits: s.page_hits,
            fast_path_hits: s.fast_path_hits,
            resyncs: s.resyncs,
            resync_failures: s.resync_failures,
            snapshot_keys: s.snapshot_keys,
            resyncing: s.resyncing,
            leader_changes: s.leader_changes,
            stores_withheld: s.stores_withheld,
            summarised_pages: s.summarised_pages,
            tail_numbers: s.tail_numbers,
            groups_adopted: s.groups_adopted,
            stray_keys: s.stray_keys,
            tenant_clears: s.tenant_clears,
            medium_removals_kept: s.medium_removals_kept,
            block_size_mismatches: s.block_size_mismatches,
            tail_losses: s.tail_losses,
            restarts_suspected: s.restarts_suspected,
            resyncs_anchored: s.resyncs_anchored,
            resyncs_timed: s.resyncs_timed,
            status_unavailable: s.status_unavailable,
            removals_per_medium: s.removals_per_medium,
            removals_whole_key: s.removals_whole_key,
            stream_generation: s.stream_generation,
            residency_mismatches: s.residency_mismatches,
            subscriber_failures: s.subscriber_failures,
            keys_by_tier: [s.keys_tier0, s.keys_tier1, s.keys_tier2, s.keys_tier3],
            status_refused: s.status_refused,
            resyncs_withholding: s.resyncs_withholding,
            catch_ups_unanchored: s.catch_ups_unanchored,
            disconnect_clears: s.disconnect_clears,
            stores_past_slot_capacity: s.stores_past_slot_capacity,
        }
    }
}

/// Severity of a library log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub(crate) fn from_raw(level: i32) -> LogLevel {
        match level {
            sys::SCI_LOG_DEBUG => LogLevel::Debug,
            sys::SCI_LOG_INFO => LogLevel::Info,
            sys::SCI_LOG_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}
