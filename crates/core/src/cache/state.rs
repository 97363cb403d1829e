//! The cache as a state machine: entries, reads under way and who waits on them.
//!
//! The driver asks [`Cache::query`] what to do with a query and carries the answer out: reply
//! from the entry, reply from neighbours, wait on a read under way, or read the source and
//! report the reading with [`Cache::fill`] (or the failure with [`Cache::fail`]). Who waits is
//! the driver's token `W` (a query number in the simulator, a reply channel in the gateway);
//! the cache keeps the tokens and hands them back when the read they wait on ends.

use std::collections::BTreeMap;
use std::hash::Hash;

use hashbrown::HashMap;

use super::evict::{Eviction, Evictor, Seeded, Slot};
use super::neighbours::Neighbourhood;
use super::policy::{AgeFrom, Freshness, Lookup};
use crate::Nanos;

/// A value and when it was sensed (or produced by the origin). Values are numbers for sensor
/// fields; a generic gateway keeps response bodies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading<V = f64> {
    /// The value.
    pub value: V,
    /// When the source produced it.
    pub sensed_at: Nanos,
}

/// A cached reading: Yates's e_l = (l, v, t), with the time it was loaded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry<V = f64> {
    /// The reading.
    pub reading: Reading<V>,
    /// When the cache loaded it.
    pub loaded_at: Nanos,
}

impl<V> Entry<V> {
    /// Its age at `now`, counted as `from` says.
    pub fn age(&self, now: Nanos, from: AgeFrom) -> Nanos {
        let since = match from {
            AgeFrom::Load => self.loaded_at,
            AgeFrom::Sensor => self.reading.sensed_at,
        };
        Nanos(now.0.saturating_sub(since.0))
    }
}

/// What to do with a query.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer<K, V = f64> {
    /// Reply with the key's own entry.
    Hit(Entry<V>),
    /// Reply with `value`, made from the entries of the neighbours `from` (an approximate hit).
    Approx {
        /// The value to reply with.
        value: V,
        /// The oldest sensing time among the entries used.
        sensed_at: Nanos,
        /// The neighbours whose entries made it.
        from: Vec<K>,
    },
    /// A read of `on` (the key itself, or a neighbour) is under way: hand the cache a token
    /// with [`Cache::wait`], and answer when [`Cache::fill`] or [`Cache::fail`] returns it.
    Wait {
        /// The key being read.
        on: K,
        /// Which of its reads.
        read: ReadId,
    },
    /// Read the source for the key, then call [`Cache::fill`] (or [`Cache::fail`]) with `read`.
    /// `Some`: the read is registered, and others may wait on it; the asker waits on it too
    /// (hand [`Cache::wait`] its token like any other's). `None`: the policy does not coalesce;
    /// answer the asker directly.
    Read {
        /// The read's number, if others may wait on it.
        read: Option<ReadId>,
    },
}

/// One read of the source, numbered so that its answer reaches its own waiters even when
/// several reads of one key are under way (a reader whose bound an older read cannot meet
/// starts another).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadId(pub u64);

/// One read under way.
#[derive(Debug)]
struct Pending<K, W> {
    read: ReadId,
    since: Nanos,
    /// Tokens waiting, each with the key its query asked for.
    waiters: Vec<(W, K)>,
}

/// Counts of what the cache answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answered from the key's own entry.
    pub hits: u64,
    /// Answered from neighbours' entries.
    pub approx_hits: u64,
    /// Told to wait on a read under way.
    pub waits: u64,
    /// Told to read the source.
    pub reads: u64,
    /// Reads that failed.
    pub failures: u64,
    /// Entries evicted to keep a bounded cache ([`Cache::bounded`]) within its capacity.
    pub evictions: u64,
    /// The weight (bytes, for the HTTP gateway) of those entries.
    pub evicted_weight: u64,
    /// Fills a bounded cache did not keep: heavier than its capacity, or refused by the
    /// policy's admission (TinyLFU's, over more frequent victims).
    pub refused: u64,
}

/// An entry held, with where the eviction policy holds its key.
#[derive(Debug)]
struct Held<V> {
    entry: Entry<V>,
    /// The key's slot in the bound's policy (`None` without a bound), so that a hit counts its
    /// use without the policy looking the key up in an index of its own.
    slot: Option<Slot>,
}

/// A freshness-bounded cache with one of Yates's seven lookup policies.
///
/// Keys are any ordered type; neighbours come from `N` (see [`super::neighbours`]).
///
/// Entries are found through one hash index, which also gives each entry's place in the
/// eviction policy: a hit is one lookup. Ordered lookups (a run of keys: a prefix) scan it
/// ([`Cache::invalidate_run`]); they are an operator's rare purges, and an ordered index
/// beside it would cost every fill and eviction a second search and a second copy of the key.
///
/// Measured by `switchyard bench eviction` (its prefix purge table; AMD EPYC, 2 cores, load
/// 7–9, URL-like keys, a purge forgetting a hundredth of them): one purge takes 3.0 ms at
/// 100,000 entries and 80 ms at 1,000,000 (10.7× and 31× a scan of a `Vec` of the same keys),
/// under the gateway's cache lock, so hits wait that long. A sorted side index (`BTreeSet`)
/// would find the range in 0.12 and 2.3 ms, for 355–568 ns more on every fill and eviction
/// and a second copy of every key counted against the memory bound. Not worth it at the
/// sizes a purge is rare at: a fill is a miss that already waited for the origin, but the
/// copy of the key costs memory all the time, and an 80 ms pause per purge at a million URLs
/// is an operator's rare event. A site that purges by prefix often at that size would want
/// it; that is the case to measure again.
#[derive(Debug)]
pub struct Cache<K, W, N, V = f64> {
    lookup: Lookup,
    freshness: Freshness,
    neighbours: N,
    entries: HashMap<K, Held<V>, Seeded>,
    /// Approximate answers kept (with [`Cache::keep_approximations`]), with the keys they
    /// came from: answered as approximate, and never the source of another approximation.
    approximations: BTreeMap<K, (Entry<V>, Vec<K>)>,
    /// Reads under way, by key, oldest first.
    pending: BTreeMap<K, Vec<Pending<K, W>>>,
    next_read: u64,
    stats: CacheStats,
    keep_approximations: bool,
    /// Keys invalidated, with when: a read started before then brings what was invalidated,
    /// and is answered but not kept.
    invalidated: BTreeMap<K, Nanos>,
    /// With [`Cache::bounded`]: the entries' weights, and the policy that evicts them.
    bound: Option<Evictor<K>>,
}

impl<K: Ord + Hash + Clone, W, N: Neighbourhood<K>, V: Clone + PartialOrd> Cache<K, W, N, V> {
    /// An empty cache. `ttl` is Yates's T (ignored for [`Lookup::AllHits`], where it is ∞, and
    /// [`Lookup::AllMisses`], where it is 0).
    pub fn new(lookup: Lookup, ttl: Nanos, age_from: AgeFrom, neighbours: N) -> Self {
        let ttl = match lookup {
            Lookup::AllHits => None,
            Lookup::AllMisses => Some(Nanos::ZERO),
            _ => Some(ttl),
        };
        Self {
            lookup,
            freshness: Freshness { ttl, age_from },
            neighbours,
            entries: HashMap::with_hasher(Seeded(0)),
            approximations: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_read: 0,
            stats: CacheStats::default(),
            keep_approximations: false,
            invalidated: BTreeMap::new(),
            bound: None,
        }
    }

    /// Bounds the entries held: their weights (one each, or as [`Cache::fill_weighted`] says;
    /// the HTTP gateway weighs them in bytes) sum to at most `capacity`, the least recently
    /// used evicted first to make room (a hit, a fill and a [`Cache::touch`] count as uses).
    /// [`Cache::bounded_by`] chooses another policy. An entry heavier than `capacity` is not
    /// kept. Without a bound, entries are kept until they are purged or invalidated.
    /// Approximate answers kept ([`Cache::keep_approximations`]) are not weighed; they go when
    /// their key's entry does.
    pub fn bounded(self, capacity: u64) -> Self {
        self.bounded_by(capacity, Eviction::Lru, 0)
    }

    /// As [`Cache::bounded`], evicting as `eviction` says (see [`super::evict`]); `seed` seeds
    /// the hash of the entries' index and of the policy (a driver facing keys it does not
    /// choose passes a random one, so that keys cannot be chosen to collide). A fill the
    /// policy refuses to admit (TinyLFU's admission) answers its waiters and is not kept.
    pub fn bounded_by(mut self, capacity: u64, eviction: Eviction, seed: u64) -> Self {
        let mut bound = Evictor::new(eviction, capacity, seed);
        // In key order, as the entries were kept before they were hashed: the same order of
        // use whatever the seed.
        let mut held: Vec<(K, Held<V>)> =
            std::mem::replace(&mut self.entries, HashMap::with_hasher(Seeded(seed))).into_iter().collect();
        held.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries = HashMap::with_capacity_and_hasher(held.len(), Seeded(seed));
        for (k, h) in held {
            for (gone, _) in bound.insert(k.clone(), 1) {
                entries.remove(&gone);
            }
            if bound.contains(&k) {
                entries.insert(k, h);
            }
        }
        for (k, h) in entries.iter_mut() {
            h.slot = bound.slot_of(k);
        }
        self.entries = entries;
        self.bound = Some(bound);
        self
    }

    /// The eviction policy, if the cache is bounded.
    pub fn eviction(&self) -> Option<Eviction> {
        self.bound.as_ref().map(Evictor::kind)
    }

    /// The bound on the entries' weights, if any.
    pub fn capacity(&self) -> Option<u64> {
        self.bound.as_ref().map(Evictor::capacity)
    }

    /// The sum of the entries' weights (zero without a bound).
    pub fn weight(&self) -> u64 {
        self.bound.as_ref().map_or(0, Evictor::weight)
    }

    /// Changes the bound of a bounded cache ([`Cache::bounded`]) to `capacity`, evicting at
    /// once, as its policy orders them, what no longer fits (counted in [`CacheStats`]'s
    /// evictions); returns the entries and weight evicted. Without a bound it does nothing.
    pub fn rebound(&mut self, capacity: u64) -> (u64, u64) {
        let Some(b) = &mut self.bound else { return (0, 0) };
        let evicted = b.resize(capacity);
        let (mut n, mut w) = (0, 0);
        for (k, weight) in evicted {
            self.entries.remove(&k);
            self.approximations.remove(&k);
            n += 1;
            w += weight;
        }
        self.stats.evictions += n;
        self.stats.evicted_weight += w;
        (n, w)
    }

    /// Whether an entry of `weight` would be kept: no heavier than the bound.
    pub fn admits(&self, weight: u64) -> bool {
        self.bound.as_ref().is_none_or(|b| weight <= b.capacity())
    }

    /// Counts a use of `key`'s entry (a driver that answered from [`Cache::peek`]), so that a
    /// bounded cache evicts it later; false if it is not held.
    pub fn touch(&mut self, key: &K) -> bool {
        let Some(slot) = self.entries.get(key).map(|h| h.slot) else { return false };
        self.used(slot);
        true
    }

    /// Reads `key`'s entry with `answer`, which returns what it made of it and whether it
    /// answered from it (a use, counted as [`Cache::touch`] counts one): a driver's hit, with
    /// one lookup of the key for both. `None` if no entry is held.
    pub fn use_entry<R>(&mut self, key: &K, answer: impl FnOnce(&Entry<V>) -> (R, bool)) -> Option<R> {
        let held = self.entries.get(key)?;
        let (r, used) = answer(&held.entry);
        if used {
            let slot = held.slot;
            self.used(slot);
        }
        Some(r)
    }

    /// Counts a use of the entry whose key the bound holds in `slot`.
    fn used(&mut self, slot: Option<Slot>) {
        if let (Some(b), Some(slot)) = (&mut self.bound, slot) {
            b.touch_slot(slot);
        }
    }

    /// Keeps `entry` for `key` with `weight`, evicting what the bound says.
    fn keep(&mut self, key: K, entry: Entry<V>, weight: u64) {
        let Some(b) = &mut self.bound else {
            self.entries.insert(key, Held { entry, slot: None });
            return;
        };
        let evicted = b.insert(key.clone(), weight);
        let slot = b.slot_of(&key);
        for (k, w) in evicted {
            self.entries.remove(&k);
            self.approximations.remove(&k);
            if k != key {
                self.stats.evictions += 1;
                self.stats.evicted_weight += w;
            }
        }
        if slot.is_some() {
            self.entries.insert(key, Held { entry, slot });
        } else {
            self.stats.refused += 1;
        }
    }

    /// Whether every entry's slot is where the bound holds its key (for tests: no policy here
    /// moves a held key to another slot, so only the key just inserted needs its slot read
    /// again; a stale slot would count a hit as another key's use).
    #[cfg(test)]
    pub(super) fn slots_agree(&self) -> bool {
        let Some(b) = &self.bound else { return self.entries.values().all(|h| h.slot.is_none()) };
        self.entries.len() == b.len() && self.entries.iter().all(|(k, h)| h.slot.is_some() && h.slot == b.slot_of(k))
    }

    /// Drops `key`'s entry, if any, from the bound's account.
    fn unweigh(&mut self, key: &K) {
        if let Some(b) = &mut self.bound {
            b.remove(key);
        }
    }

    /// Whether an approximate answer is also cached for the key it answered, as old as the
    /// oldest entry it was made from (so it never outlives them).
    ///
    /// The thesis does not say it does this, and by default the cache does not. But its tables
    /// give the three approximate policies different hit ratios (Table 5.4: 0.62, 0.60, 0.55),
    /// which they cannot have if the neighbour chosen only sets the value: any fresh neighbour
    /// makes a hit under all three. Keeping the answer makes the choice matter later (greedy
    /// age keeps the youngest copies, median-of-3 the oldest of three), in the thesis's order.
    pub fn keep_approximations(mut self, on: bool) -> Self {
        self.keep_approximations = on;
        self
    }

    /// The policy.
    pub fn lookup(&self) -> Lookup {
        self.lookup
    }

    /// The counters so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The entry held for `key`, fresh or not (for answers marked stale).
    pub fn peek(&self, key: &K) -> Option<&Entry<V>> {
        self.entries.get(key).map(|h| &h.entry)
    }

    /// The entry for `key` if it is no more than `grace` past the cache's T: RFC 5861's
    /// stale-while-revalidate (answer it now, while a read refreshes it) and stale-if-error
    /// (answer it when the read fails), whose windows both end `grace` after T. An entry still
    /// within T is offered too (a reader's own bound may have refused it). Under All hits every
    /// entry qualifies; under All misses none is kept.
    pub fn stale_within(&self, key: &K, now: Nanos, grace: Nanos) -> Option<&Entry<V>> {
        let e = self.peek(key)?;
        let Some(t) = self.freshness.ttl else { return Some(e) };
        (e.age(now, self.freshness.age_from) < Nanos(t.0.saturating_add(grace.0))).then_some(e)
    }

    /// Whether a read of `key` is under way.
    pub fn is_pending(&self, key: &K) -> bool {
        self.pending.contains_key(key)
    }

    /// The approximate answer kept for `key`, and the keys it came from.
    pub fn kept_approximation(&self, key: &K) -> Option<(&Entry<V>, &[K])> {
        self.approximations.get(key).map(|(e, from)| (e, from.as_slice()))
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Loads `reading` for `key` without a query (the thesis's All hits starts with every
    /// location cached).
    pub fn preload(&mut self, key: K, reading: Reading<V>, now: Nanos) {
        self.keep(key, Entry { reading, loaded_at: now }, 1);
    }

    /// Whether `e` may answer at `now`: younger than T (counted as [`AgeFrom`] says), and
    /// sensed less than the reader's `max_age` ago. A reader's bound is always on the value's
    /// age since it was sensed, as OPC UA's maxAge and TeenyLIME's freshness are, and as the
    /// gateway reports an answer's age.
    fn usable(&self, e: &Entry<V>, now: Nanos, max_age: Option<Nanos>) -> bool {
        self.freshness.ttl.is_none_or(|t| e.age(now, self.freshness.age_from) < t)
            && max_age.is_none_or(|m| now.0.saturating_sub(e.reading.sensed_at.0) < m.0)
    }

    fn fresh(&self, key: &K, now: Nanos, max_age: Option<Nanos>) -> Option<&Entry<V>> {
        self.peek(key).filter(|e| self.usable(e, now, max_age))
    }

    /// What to do with a query for `key` at `now`, from a reader who accepts answers no older
    /// than `max_age` (on top of the cache's T). `draw(n)` returns a number below `n` drawn
    /// at random (median-of-3's choices); the driver owns the random stream.
    ///
    /// The order is the thesis's (Yates §5.2, notes 000 §3.5): the key's own fresh entry; then,
    /// for the approximate policies, fresh neighbour entries; then a read under way of the key,
    /// then (approximate policies) of a neighbour, the one started first; then a read of the
    /// source. A reader waits only on a read started within its `max_age`, since an older read
    /// may bring a value older than it accepts; such a reader reads for itself, and the cache
    /// keeps whichever value is newer.
    pub fn query(
        &mut self,
        key: &K,
        now: Nanos,
        max_age: Option<Nanos>,
        draw: &mut impl FnMut(usize) -> usize,
    ) -> Answer<K, V> {
        if let Some(h) = self.entries.get(key).filter(|h| self.usable(&h.entry, now, max_age)) {
            let (e, slot) = (h.entry.clone(), h.slot);
            self.stats.hits += 1;
            self.used(slot);
            return Answer::Hit(e);
        }
        if self.lookup.approximates() {
            if let Some((e, from)) = self.approximations.get(key).filter(|(e, _)| self.usable(e, now, max_age)) {
                self.stats.approx_hits += 1;
                return Answer::Approx {
                    value: e.reading.value.clone(),
                    sensed_at: e.reading.sensed_at,
                    from: from.clone(),
                };
            }
            if let Some((answer, loaded_at)) = self.approximate(key, now, max_age, draw) {
                self.stats.approx_hits += 1;
                if self.keep_approximations
                    && let Answer::Approx { value, sensed_at, from } = &answer
                {
                    let entry = Entry { reading: Reading { value: value.clone(), sensed_at: *sensed_at }, loaded_at };
                    self.approximations.insert(key.clone(), (entry, from.clone()));
                }
                return answer;
            }
        }
        if !self.lookup.coalesces() {
            self.stats.reads += 1;
            return Answer::Read { read: None };
        }
        // A read started longer ago than the reader's bound may bring a value older than it
        // accepts: such a reader starts a read of its own.
        let recent = |since: Nanos| max_age.is_none_or(|m| since.0.saturating_add(m.0) >= now.0);
        let own = self.pending.get(key);
        if let Some(p) = own.and_then(|reads| reads.iter().rev().find(|p| recent(p.since))) {
            self.stats.waits += 1;
            return Answer::Wait { on: key.clone(), read: p.read };
        }
        if own.is_none() && self.lookup.approximates() {
            let first = self
                .neighbours
                .of(key)
                .iter()
                .filter_map(|(n, _)| self.pending.get(n).map(|reads| (n, reads)))
                .flat_map(|(n, reads)| reads.iter().map(move |p| (p.since, n, p.read)))
                .filter(|(since, _, _)| recent(*since))
                .min_by_key(|(since, _, _)| *since);
            if let Some((_, n, read)) = first {
                self.stats.waits += 1;
                return Answer::Wait { on: n.clone(), read };
            }
        }
        let read = ReadId(self.next_read);
        self.next_read += 1;
        self.pending.entry(key.clone()).or_default().push(Pending { read, since: now, waiters: Vec::new() });
        self.stats.reads += 1;
        Answer::Read { read: Some(read) }
    }

    /// The approximate answer, and the oldest load time of the entries it used.
    fn approximate(
        &self,
        key: &K,
        now: Nanos,
        max_age: Option<Nanos>,
        draw: &mut impl FnMut(usize) -> usize,
    ) -> Option<(Answer<K, V>, Nanos)> {
        let found: Vec<(&K, f64, &Entry<V>)> = self
            .neighbours
            .of(key)
            .iter()
            .filter_map(|(n, d)| self.fresh(n, now, max_age).map(|e| (n, *d, e)))
            .collect();
        let one = |(k, _, e): (&K, f64, &Entry<V>)| {
            (
                Answer::Approx {
                    value: e.reading.value.clone(),
                    sensed_at: e.reading.sensed_at,
                    from: vec![k.clone()],
                },
                e.loaded_at,
            )
        };
        match self.lookup {
            // Freshest by sensing time; among equals the nearest (the list is nearest first).
            Lookup::GreedyAge => found
                .into_iter()
                .reduce(|a, b| if b.2.reading.sensed_at > a.2.reading.sensed_at { b } else { a })
                .map(one),
            Lookup::GreedyDistance => found.into_iter().next().map(one),
            Lookup::MedianOf3 => match found.len() {
                0 => None,
                1 | 2 => Some(one(found[draw(found.len())])),
                n => {
                    // Three distinct entries: a partial Fisher–Yates shuffle of the indices.
                    let mut idx: Vec<usize> = (0..n).collect();
                    for i in 0..3 {
                        let j = i + draw(n - i);
                        idx.swap(i, j);
                    }
                    let mut three: Vec<(&K, f64, &Entry<V>)> = idx[..3].iter().map(|&i| found[i]).collect();
                    three.sort_by(|a, b| {
                        a.2.reading.value.partial_cmp(&b.2.reading.value).unwrap_or(std::cmp::Ordering::Equal)
                    });
                    let sensed_at = three.iter().map(|t| t.2.reading.sensed_at).min().unwrap_or_default();
                    let loaded_at = three.iter().map(|t| t.2.loaded_at).min().unwrap_or_default();
                    let answer = Answer::Approx {
                        value: three[1].2.reading.value.clone(),
                        sensed_at,
                        from: three.iter().map(|t| t.0.clone()).collect(),
                    };
                    Some((answer, loaded_at))
                }
            },
            _ => None,
        }
    }

    /// Joins the newest read of `key` under way, or registers a new one, without looking at
    /// entries: for a driver that decides freshness itself (the HTTP cache, whose responses
    /// each carry their own rules) and wants only its reads coalesced. Every query that joins
    /// gets the answer of a read that started before it was asked.
    pub fn join(&mut self, key: &K, now: Nanos) -> Answer<K, V> {
        if let Some(p) = self.pending.get(key).and_then(|reads| reads.last()) {
            self.stats.waits += 1;
            return Answer::Wait { on: key.clone(), read: p.read };
        }
        let read = ReadId(self.next_read);
        self.next_read += 1;
        self.pending.entry(key.clone()).or_default().push(Pending { read, since: now, waiters: Vec::new() });
        self.stats.reads += 1;
        Answer::Read { read: Some(read) }
    }

    /// Queues `who`, whose query asked for `asked`, behind the read `read` of `on` that
    /// [`Cache::query`] named. Gives `who` back if that read is no longer under way.
    pub fn wait(&mut self, on: &K, read: ReadId, asked: K, who: W) -> Result<(), W> {
        match self.pending.get_mut(on).and_then(|reads| reads.iter_mut().find(|p| p.read == read)) {
            Some(p) => {
                p.waiters.push((who, asked));
                Ok(())
            }
            None => Err(who),
        }
    }

    /// Takes read `read` of `key` off the list of reads under way; returns its waiters.
    fn end(&mut self, key: &K, read: Option<ReadId>) -> Vec<(W, K)> {
        let (Some(read), Some(reads)) = (read, self.pending.get_mut(key)) else { return Vec::new() };
        let Some(at) = reads.iter().position(|p| p.read == read) else { return Vec::new() };
        let waiters = reads.remove(at).waiters;
        if reads.is_empty() {
            self.pending.remove(key);
        }
        waiters
    }

    /// The source answered read `read` of `key` (as [`Answer::Read`] numbered it): loads the
    /// reading (except under All misses) and returns that read's waiters, each with the key its
    /// query asked for, to be answered with it.
    pub fn fill(&mut self, key: K, read: Option<ReadId>, reading: Reading<V>, now: Nanos) -> Vec<(W, K)> {
        self.fill_weighted(key, read, reading, now, 1)
    }

    /// As [`Cache::fill`], the entry weighing `weight` against the bound ([`Cache::bounded`]):
    /// the least recently used others are evicted to make room, and an entry heavier than the
    /// bound is not kept (nor is the one it would have replaced, which it supersedes).
    pub fn fill_weighted(
        &mut self,
        key: K,
        read: Option<ReadId>,
        reading: Reading<V>,
        now: Nanos,
        weight: u64,
    ) -> Vec<(W, K)> {
        let waiters = self.end(&key, read);
        if self.lookup != Lookup::AllMisses {
            // A slower read of an older value must not replace a newer one (reads of one key
            // may run side by side).
            let newer = self.peek(&key).is_none_or(|e| e.reading.sensed_at <= reading.sensed_at);
            let after_invalidation = self.invalidated.get(&key).is_none_or(|at| *at <= reading.sensed_at);
            if newer && after_invalidation {
                self.invalidated.remove(&key);
                self.approximations.remove(&key);
                self.keep(key, Entry { reading, loaded_at: now }, weight);
            }
        }
        waiters
    }

    /// Read `read` of `key` failed or timed out: returns its waiters, to be answered with the
    /// failure (or with [`Cache::stale_within`]'s entry, marked as such).
    pub fn fail(&mut self, key: &K, read: Option<ReadId>) -> Vec<(W, K)> {
        self.stats.failures += 1;
        self.end(key, read)
    }

    /// Forgets `key`'s entry at `now` (RFC 9111 §4.4: an unsafe request changed it at the
    /// source): later queries read it again, and a read already under way, having started
    /// before the change, answers its waiters but is not kept.
    pub fn invalidate(&mut self, key: &K, now: Nanos) {
        self.entries.remove(key);
        self.unweigh(key);
        self.approximations.remove(key);
        if self.pending.contains_key(key) {
            self.invalidated.insert(key.clone(), now);
        }
    }

    /// Forgets, as [`Cache::invalidate`] does, every key from `from` on in order for as long as
    /// `within` holds (for text keys and a prefix: everything under the prefix): stored
    /// entries, and reads under way, which answer their waiters but are not kept. Returns how
    /// many stored entries were forgotten.
    ///
    /// The entries' index is hashed (a hit is one lookup), so this scans every stored key:
    /// O(entries) compares under the caller's lock (measured in the commit that hashed it).
    /// `within` must hold on one run of keys in order, as a prefix does; keys past that run
    /// are not forgotten even if it holds again there. Reads under way are few, and kept in
    /// order: found in their range.
    pub fn invalidate_run(&mut self, from: &K, within: impl Fn(&K) -> bool, now: Nanos) -> usize {
        // One pass: the keys from `from` on where `within` holds, and the first where it does
        // not, which ends the run.
        let (mut run, mut end) = (Vec::new(), None::<&K>);
        for k in self.entries.keys().filter(|k| *k >= from) {
            if within(k) {
                run.push(k);
            } else if end.is_none_or(|e| k < e) {
                end = Some(k);
            }
        }
        let stored: Vec<K> = run.into_iter().filter(|k| end.is_none_or(|e| *k < e)).cloned().collect();
        let reading: Vec<K> = self.pending.range(from..).map(|(k, _)| k).take_while(|k| within(k)).cloned().collect();
        for k in stored.iter().chain(&reading) {
            self.invalidate(k, now);
        }
        stored.len()
    }

    /// Forgets, as [`Cache::invalidate`] does, every stored entry `pick` chooses by its key and
    /// value (a scan of them all: for what the key's order cannot find, such as a tag inside
    /// the stored value). Reads under way are not touched: what they bring is not known yet,
    /// and the caller decides on it when it comes. Returns how many were forgotten.
    pub fn invalidate_picked(&mut self, mut pick: impl FnMut(&K, &V) -> bool, now: Nanos) -> usize {
        let picked: Vec<K> =
            self.entries.iter().filter(|(k, h)| pick(k, &h.entry.reading.value)).map(|(k, _)| k.clone()).collect();
        for k in &picked {
            self.invalidate(k, now);
        }
        picked.len()
    }

    /// Drops entries older than `keep` (counted as the cache counts age), to bound memory.
    pub fn purge(&mut self, now: Nanos, keep: Nanos) {
        let from = self.freshness.age_from;
        let bound = &mut self.bound;
        self.entries.retain(|k, h| {
            let kept = h.entry.age(now, from) < keep;
            if !kept && let Some(b) = bound.as_mut() {
                b.remove(k);
            }
            kept
        });
        self.approximations.retain(|_, (e, _)| e.age(now, from) < keep);
        let pending = &self.pending;
        self.invalidated.retain(|k, _| pending.contains_key(k));
    }
}
