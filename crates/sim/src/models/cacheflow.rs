//! Cacheflow (Dou 2011 ch. 4) in the simulator: servers with LRU caches, each knowing its
//! neighbours' caches through batched update messages, and clients that ask their server and
//! its neighbours for sets of objects at once.
//!
//! The workload is the thesis's (Table 4.2): 5,000 objects of one size, 1,000 sets of 100
//! drawn 80/20 from popular objects, clients choosing sets 80/20, one request every 5 s from
//! each of 3 clients per server, 6 servers. Choices the thesis leaves open, made here:
//! - neighbours: each server has the two next to it on a ring, so a server's two neighbours
//!   share nothing with each other (the non-transitivity the thesis points out); its discovery
//!   by latency would give some servers more than two;
//! - latencies: every round trip drawn once, uniformly from 20 to 200 ms;
//! - hit rate: objects delivered from any cache over objects asked for, after a 5-minute
//!   warm-up of the 30-minute run.

use std::collections::BTreeSet;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use switchyard_core::Nanos;
use switchyard_core::cache::Lru;
use switchyard_core::cache::cacheflow::{plan_local, serve_remote};

use crate::{EventQueue, Model, SimError, Streams};

/// A run's parameters.
#[derive(Clone, Debug)]
pub struct CacheflowParams {
    /// Servers.
    pub servers: usize,
    /// Clients per server.
    pub clients_per_server: usize,
    /// Whether servers cooperate (clients ask neighbours too; views are kept).
    pub cooperate: bool,
    /// Evict first what a neighbour holds.
    pub dedup: bool,
    /// Objects each server's cache holds.
    pub cache: usize,
    /// Objects in all.
    pub files: usize,
    /// Sets.
    pub sets: usize,
    /// Objects per set.
    pub set_size: usize,
    /// Update messages buffered per link before they are sent (Cacheflow's L).
    pub link_buffer: usize,
    /// Fewest objects a neighbour must hold of a request to be asked.
    pub threshold: usize,
    /// Seconds between a client's requests.
    pub period_s: f64,
    /// Seconds run.
    pub run_s: f64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// The root seed.
    pub seed: u64,
}

impl Default for CacheflowParams {
    /// The thesis's defaults (Table 4.2, with Table 4.3's two neighbours).
    fn default() -> Self {
        Self {
            servers: 6,
            clients_per_server: 3,
            cooperate: true,
            dedup: true,
            cache: 600,
            files: 5000,
            sets: 1000,
            set_size: 100,
            link_buffer: 0,
            threshold: 0,
            period_s: 5.0,
            run_s: 1800.0,
            warmup_s: 300.0,
            seed: 1,
        }
    }
}

/// What a run measured, over the requests made after the warm-up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheflowOutcome {
    /// Requests.
    pub requests: u64,
    /// Objects asked for.
    pub asked: u64,
    /// Served from the local server's cache.
    pub local_hits: u64,
    /// Served from a neighbour's cache (counted once per object).
    pub remote_hits: u64,
    /// Loaded from the local server's disk.
    pub loads: u64,
    /// Not delivered: the local server thought a neighbour held them, and it did not.
    pub mispredicted: u64,
    /// Delivered more than once.
    pub duplicates: u64,
}

impl CacheflowOutcome {
    /// Objects delivered from any cache over objects asked for.
    pub fn hit_rate(&self) -> f64 {
        (self.local_hits + self.remote_hits) as f64 / self.asked.max(1) as f64
    }

    /// Objects delivered over objects asked for.
    pub fn delivered(&self) -> f64 {
        1.0 - self.mispredicted as f64 / self.asked.max(1) as f64
    }
}

enum Event {
    /// Client `c` sends its next request.
    Ask { client: usize },
    /// A request reaches its local server.
    Local { request: usize },
    /// A request reaches neighbour `server`.
    Remote { request: usize, server: usize },
    /// Update messages reach `to`'s view of `from`: (object, added).
    Updates { from: usize, to: usize, changes: Vec<(u32, bool)> },
}

struct Request {
    set: usize,
    server: usize,
    measured: bool,
    /// Replies outstanding.
    waiting: usize,
    /// The local server's part: its hits, its loads, and the neighbours to ignore.
    local: Option<(Vec<u32>, Vec<u32>, Vec<usize>)>,
    /// Each neighbour's reply.
    remotes: Vec<(usize, Vec<u32>)>,
}

struct Server {
    cache: Lru<u32>,
    neighbours: Vec<usize>,
    /// Its view of each neighbour's cache, in the order of `neighbours`.
    views: Vec<BTreeSet<u32>>,
    /// Changes waiting to be sent to each neighbour.
    outbox: Vec<Vec<(u32, bool)>>,
}

struct Cacheflow {
    params: CacheflowParams,
    sets: Vec<Vec<u32>>,
    servers: Vec<Server>,
    /// Round trips between nodes (servers, then clients), seconds.
    rtt: Vec<Vec<f64>>,
    requests: Vec<Request>,
    rng: ChaCha8Rng,
    warmup: Nanos,
    out: CacheflowOutcome,
}

fn secs(s: f64) -> Nanos {
    Nanos((s * 1e9) as u64)
}

impl Cacheflow {
    fn client_node(&self, client: usize) -> usize {
        self.params.servers + client
    }

    /// Records `changes` at `server` and sends them to its neighbours when the buffer is full.
    fn changed(&mut self, server: usize, changes: &[(u32, bool)], queue: &mut EventQueue<Event>) {
        if !self.params.cooperate || changes.is_empty() {
            return;
        }
        let s = &mut self.servers[server];
        for (i, &to) in s.neighbours.clone().iter().enumerate() {
            s.outbox[i].extend_from_slice(changes);
            if s.outbox[i].len() > self.params.link_buffer {
                let batch = std::mem::take(&mut s.outbox[i]);
                queue
                    .schedule_in(secs(self.rtt[server][to] / 2.0), Event::Updates { from: server, to, changes: batch });
            }
        }
    }

    /// Merges a request's replies, as the client does, once all have come.
    fn finish(&mut self, request: usize) {
        let r = &self.requests[request];
        if !r.measured {
            return;
        }
        let (hits, loads, ignore) = r.local.as_ref().expect("the local reply came");
        let local = &self.servers[r.server].neighbours;
        let set = &self.sets[r.set];
        let mut delivered: BTreeSet<u32> = hits.iter().chain(loads).copied().collect();
        let mut remote = 0;
        for (server, files) in &r.remotes {
            let slot = local.iter().position(|n| n == server);
            if slot.is_some_and(|i| ignore.contains(&i)) {
                continue;
            }
            for f in files {
                if delivered.insert(*f) {
                    remote += 1;
                } else {
                    self.out.duplicates += 1;
                }
            }
        }
        self.out.requests += 1;
        self.out.asked += set.len() as u64;
        self.out.local_hits += hits.len() as u64;
        self.out.loads += loads.len() as u64;
        self.out.remote_hits += remote;
        self.out.mispredicted += set.iter().filter(|f| !delivered.contains(f)).count() as u64;
    }

    fn reply(&mut self, request: usize) {
        let r = &mut self.requests[request];
        r.waiting -= 1;
        if r.waiting == 0 {
            self.finish(request);
        }
    }
}

impl Model for Cacheflow {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, queue: &mut EventQueue<Event>) {
        match event {
            Event::Ask { client } => {
                let server = client / self.params.clients_per_server;
                let set = pick_set(self.params.sets, &mut self.rng);
                let neighbours =
                    if self.params.cooperate { self.servers[server].neighbours.clone() } else { Vec::new() };
                let request = self.requests.len();
                self.requests.push(Request {
                    set,
                    server,
                    measured: now >= self.warmup,
                    waiting: 1 + neighbours.len(),
                    local: None,
                    remotes: Vec::new(),
                });
                let node = self.client_node(client);
                // A request reaches each server half a round trip after it leaves.
                queue.schedule_in(secs(self.rtt[node][server] / 2.0), Event::Local { request });
                for nb in neighbours {
                    queue.schedule_in(secs(self.rtt[node][nb] / 2.0), Event::Remote { request, server: nb });
                }
                queue.schedule_in(secs(self.params.period_s), Event::Ask { client });
            }
            Event::Local { request } => {
                let server = self.requests[request].server;
                let files = self.sets[self.requests[request].set].clone();
                let s = &self.servers[server];
                let views: Vec<BTreeSet<u32>> = if self.params.cooperate { s.views.clone() } else { Vec::new() };
                let plan = plan_local(&files, &s.cache, &views, self.params.threshold);
                let mut changes = Vec::new();
                for f in &plan.hits {
                    self.servers[server].cache.touch(f);
                }
                for f in &plan.loads {
                    for e in self.servers[server].cache.insert(*f) {
                        changes.push((e, false));
                    }
                    changes.push((*f, true));
                }
                self.requests[request].local = Some((plan.hits, plan.loads, plan.ignore));
                self.changed(server, &changes, queue);
                self.reply(request);
            }
            Event::Remote { request, server } => {
                let files = self.sets[self.requests[request].set].clone();
                let served = serve_remote(&files, &self.servers[server].cache, self.params.threshold);
                for f in &served {
                    self.servers[server].cache.touch(f);
                }
                self.requests[request].remotes.push((server, served));
                self.reply(request);
            }
            Event::Updates { from, to, changes } => {
                let s = &mut self.servers[to];
                let Some(i) = s.neighbours.iter().position(|n| *n == from) else { return };
                for (f, added) in changes {
                    if added {
                        if s.views[i].insert(f) {
                            s.cache.neighbour_added(&f);
                        }
                    } else if s.views[i].remove(&f) {
                        s.cache.neighbour_evicted(&f);
                    }
                }
            }
        }
    }
}

/// Cacheflow's sets (Dou Table 4.2): `sets` sets of `set_size` distinct objects of `files`, each
/// slot drawn from the popular fifth of the objects with probability 0.8.
pub fn make_sets(files: usize, sets: usize, set_size: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<u32>> {
    let popular = (files / 5).max(1);
    (0..sets)
        .map(|_| {
            let mut set = BTreeSet::new();
            while set.len() < set_size.min(files) {
                let f = if rng.random::<f64>() < 0.8 {
                    rng.random_range(0..popular)
                } else {
                    rng.random_range(popular..files.max(popular + 1))
                };
                set.insert(f as u32);
            }
            set.into_iter().collect()
        })
        .collect()
}

/// Which set a client asks for next: 80% of requests go to the popular fifth of the sets.
pub fn pick_set(sets: usize, rng: &mut ChaCha8Rng) -> usize {
    let popular = (sets / 5).max(1);
    if sets <= popular || rng.random::<f64>() < 0.8 {
        rng.random_range(0..popular.min(sets.max(1)))
    } else {
        rng.random_range(popular..sets)
    }
}

/// Runs Cacheflow (or, with `cooperate` off, the same servers alone).
pub fn simulate(params: &CacheflowParams) -> Result<CacheflowOutcome, SimError> {
    let bad = |name: &'static str, value: usize| SimError::BadParameter {
        name,
        value: value.to_string(),
        expected: "at least 1",
    };
    for (name, v) in
        [("servers", params.servers), ("clients_per_server", params.clients_per_server), ("sets", params.sets)]
    {
        if v == 0 {
            return Err(bad(name, v));
        }
    }
    if params.set_size == 0 || params.set_size > params.files / 2 {
        return Err(SimError::BadParameter {
            name: "set_size",
            value: params.set_size.to_string(),
            expected: "at least 1 and at most half the files",
        });
    }
    let streams = Streams::new(params.seed);
    let sets = make_sets(params.files, params.sets, params.set_size, &mut streams.stream(1));
    let n = params.servers;
    let clients = n * params.clients_per_server;
    let mut lat = streams.stream(2);
    let nodes = n + clients;
    // One draw per pair, in the order of the upper triangle, so the matrix is symmetric.
    let pairs: Vec<f64> = (0..nodes * (nodes - 1) / 2).map(|_| lat.random_range(0.020..0.200)).collect();
    let pair = |a: usize, b: usize| {
        let (i, j) = (a.min(b), a.max(b));
        pairs[i * nodes - i * (i + 1) / 2 + (j - i - 1)]
    };
    let rtt: Vec<Vec<f64>> =
        (0..nodes).map(|a| (0..nodes).map(|b| if a == b { 0.0 } else { pair(a, b) }).collect()).collect();
    let ring = |i: usize| -> Vec<usize> {
        match n {
            1 => Vec::new(),
            2 => vec![1 - i],
            _ => vec![(i + n - 1) % n, (i + 1) % n],
        }
    };
    let servers = (0..n)
        .map(|i| {
            let neighbours = ring(i);
            Server {
                cache: Lru::new(params.cache, params.dedup),
                views: vec![BTreeSet::new(); neighbours.len()],
                outbox: vec![Vec::new(); neighbours.len()],
                neighbours,
            }
        })
        .collect();
    let mut model = Cacheflow {
        params: params.clone(),
        sets,
        servers,
        rtt,
        requests: Vec::new(),
        rng: streams.stream(3),
        warmup: secs(params.warmup_s),
        out: CacheflowOutcome::default(),
    };
    let mut queue = EventQueue::new();
    let mut phase = streams.stream(4);
    for client in 0..clients {
        queue.schedule_at(secs(phase.random_range(0.0..params.period_s)), Event::Ask { client })?;
    }
    crate::run(&mut model, &mut queue, secs(params.run_s));
    Ok(model.out)
}
