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

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use switchyard_core::Nanos;
use switchyard_core::cache::cacheflow::{Batch, Merged, Server, merge};
pub use switchyard_models::cacheflow::{make_sets, pick_set};

use crate::{EventQueue, Model, SimError, Streams, secs};

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
    /// What their clients got, summed.
    pub total: Merged,
}

impl CacheflowOutcome {
    /// Objects delivered from any cache over objects asked for.
    pub fn hit_rate(&self) -> f64 {
        self.total.hit_rate()
    }

    /// Objects delivered over objects asked for.
    pub fn delivered(&self) -> f64 {
        self.total.delivered()
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
    /// The local server's part: what it sent, how many of those it loaded, and the neighbours
    /// to ignore.
    local: Option<(Vec<u32>, u64, Vec<usize>)>,
    /// Each neighbour's reply.
    remotes: Vec<(usize, Vec<u32>)>,
}

struct Node {
    /// The core's server: cache, views, changes owed.
    server: Server<u32>,
    /// Its neighbours, in the order of its views.
    neighbours: Vec<usize>,
}

struct Cacheflow {
    params: CacheflowParams,
    sets: Vec<Vec<u32>>,
    servers: Vec<Node>,
    /// Round trips between nodes (servers, then clients), seconds.
    rtt: Vec<Vec<f64>>,
    requests: Vec<Request>,
    rng: ChaCha8Rng,
    warmup: Nanos,
    out: CacheflowOutcome,
}

impl Cacheflow {
    fn client_node(&self, client: usize) -> usize {
        self.params.servers + client
    }

    /// Sends batches of changes from `server` to its neighbours.
    fn send(&self, server: usize, due: Vec<Batch<u32>>, queue: &mut EventQueue<Event>) {
        for (i, changes) in due {
            let to = self.servers[server].neighbours[i];
            queue.schedule_in(secs(self.rtt[server][to] / 2.0), Event::Updates { from: server, to, changes });
        }
    }

    /// Merges a request's replies, as the client does, once all have come.
    fn finish(&mut self, request: usize) {
        let r = &self.requests[request];
        if !r.measured {
            return;
        }
        let (local, loads, ignore) = r.local.as_ref().expect("the local reply came");
        let neighbours = &self.servers[r.server].neighbours;
        // Each reply by its sender's place among the local server's neighbours.
        let remotes: Vec<(usize, Vec<u32>)> = r
            .remotes
            .iter()
            .filter_map(|(server, files)| Some((neighbours.iter().position(|n| n == server)?, files.clone())))
            .collect();
        self.out.requests += 1;
        self.out.total += merge(&self.sets[r.set], local, *loads, 0, ignore, &remotes);
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
                let neighbours = self.servers[server].neighbours.clone();
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
                let node = &mut self.servers[server].server;
                let plan = node.plan(&files, self.params.threshold);
                let (_, due) = node.keep(&plan.loads);
                let sent: Vec<u32> = plan.hits.iter().chain(&plan.loads).copied().collect();
                self.requests[request].local = Some((sent, plan.loads.len() as u64, plan.ignore));
                self.send(server, due, queue);
                self.reply(request);
            }
            Event::Remote { request, server } => {
                let files = self.sets[self.requests[request].set].clone();
                let served = self.servers[server].server.serve(&files, self.params.threshold);
                self.requests[request].remotes.push((server, served));
                self.reply(request);
            }
            Event::Updates { from, to, changes } => {
                let node = &mut self.servers[to];
                if let Some(i) = node.neighbours.iter().position(|n| *n == from) {
                    node.server.apply(i, changes);
                }
            }
        }
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
            let neighbours = if params.cooperate { ring(i) } else { Vec::new() };
            Node { server: Server::new(params.cache, params.dedup, neighbours.len(), params.link_buffer), neighbours }
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
