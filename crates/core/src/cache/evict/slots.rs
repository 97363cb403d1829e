//! What every eviction policy here is built from: entries in slots of one vector, found by
//! key through a hash table of slot numbers (so each key is stored once), and doubly linked
//! queues threaded through the slots (so moving an entry is a few index writes, with no
//! allocation).

use std::hash::{BuildHasher, Hash, Hasher};

use hashbrown::HashTable;

/// No slot: the end of a queue.
pub(super) const NIL: u32 = u32::MAX;

/// One entry held (or, for S3-FIFO, remembered as a ghost).
#[derive(Clone, Debug)]
pub(super) struct Node<K> {
    /// `None` only while the slot is free.
    pub(super) key: Option<K>,
    /// The key's seeded hash, kept so that a use found by slot (a cache's hit) and TinyLFU's
    /// sketch need not hash the key again, nor an eviction to find it in the index.
    pub(super) hash: u64,
    pub(super) weight: u64,
    prev: u32,
    next: u32,
    /// Which of its policy's queues the entry is on.
    pub(super) queue: u8,
    /// The policy's per-entry state: SIEVE's visited bit, S3-FIFO's 2-bit frequency.
    pub(super) bits: u8,
}

/// A seeded hash with folded multiplies (the mixing step of foldhash and wyhash): quick on
/// short keys, and unlike std's `RandomState` it takes its seed as an argument, as the core
/// takes all its randomness. The gateway seeds it at random, so URLs chosen to collide for one
/// seed do not collide for another.
#[derive(Clone, Copy, Debug)]
pub(in crate::cache) struct Seeded(pub(in crate::cache) u64);

/// The hasher [`Seeded`] builds.
pub(in crate::cache) struct Folded(u64);

const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = fold(self.0 ^ u64::from_le_bytes(c.try_into().expect("eight bytes")), MUL);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.0 = fold(self.0 ^ u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59), MUL);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = fold(self.0 ^ n, MUL);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        fold(self.0, MUL ^ 0x2D35_8DCC_AA6C_78A5)
    }
}

impl BuildHasher for Seeded {
    type Hasher = Folded;

    fn build_hasher(&self) -> Folded {
        Folded(self.0 ^ 0x243F_6A88_85A3_08D3)
    }
}

/// A queue of slots, oldest at the front, with the weights on it summed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queue {
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) len: usize,
    pub(super) weight: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Self { head: NIL, tail: NIL, len: 0, weight: 0 }
    }
}

impl Queue {
    /// The oldest slot, if any.
    pub(super) fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
}

/// The slots and the index over them.
#[derive(Clone, Debug)]
pub(super) struct Slots<K> {
    nodes: Vec<Node<K>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: Seeded,
}

impl<K: Hash + Eq> Slots<K> {
    pub(super) fn new(seed: u64) -> Self {
        Self { nodes: Vec::new(), free: Vec::new(), index: HashTable::new(), hasher: Seeded(seed) }
    }

    /// The seeded hash of `key` (TinyLFU's sketch counts by it too).
    pub(super) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// `key`'s slot, if it has one.
    pub(super) fn find(&self, key: &K) -> Option<u32> {
        let nodes = &self.nodes;
        self.index.find(self.hash(key), |&i| nodes[i as usize].key.as_ref() == Some(key)).copied()
    }

    /// `key`'s hash and slot, if it has one (one hash for a policy that also counts by it).
    pub(super) fn find_hashed(&self, key: &K) -> (u64, Option<u32>) {
        let hash = self.hash(key);
        let nodes = &self.nodes;
        (hash, self.index.find(hash, |&i| nodes[i as usize].key.as_ref() == Some(key)).copied())
    }

    /// A slot for `key`, which has none, on no queue yet.
    pub(super) fn add(&mut self, key: K, weight: u64, queue: u8) -> u32 {
        let hash = self.hash(&key);
        let node = Node { key: Some(key), hash, weight, prev: NIL, next: NIL, queue, bits: 0 };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("fewer than 2^32 entries")
            }
        };
        let nodes = &self.nodes;
        self.index.insert_unique(hash, i, |&j| nodes[j as usize].hash);
        i
    }

    /// Frees slot `i` (already off its queue), giving back its key and weight.
    pub(super) fn take(&mut self, i: u32) -> (K, u64) {
        let hash = self.nodes[i as usize].hash;
        if let Ok(e) = self.index.find_entry(hash, |&j| j == i) {
            e.remove();
        }
        self.free.push(i);
        let n = &mut self.nodes[i as usize];
        (n.key.take().expect("in use"), n.weight)
    }

    /// Whether slot `i` holds a key (it may be a ghost's: the policy knows).
    pub(super) fn in_use(&self, i: u32) -> bool {
        self.nodes.get(i as usize).is_some_and(|n| n.key.is_some())
    }

    pub(super) fn node(&self, i: u32) -> &Node<K> {
        &self.nodes[i as usize]
    }

    pub(super) fn node_mut(&mut self, i: u32) -> &mut Node<K> {
        &mut self.nodes[i as usize]
    }

    /// The slot after `i` on its queue (toward the newest).
    pub(super) fn next(&self, i: u32) -> Option<u32> {
        let n = self.nodes[i as usize].next;
        (n != NIL).then_some(n)
    }

    /// Puts slot `i` at the back (newest end) of `q`, marking it as on queue `tag`.
    pub(super) fn push_back(&mut self, q: &mut Queue, i: u32, tag: u8) {
        let tail = q.tail;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = tail;
            n.next = NIL;
            n.queue = tag;
            q.weight += n.weight;
        }
        if tail == NIL {
            q.head = i;
        } else {
            self.nodes[tail as usize].next = i;
        }
        q.tail = i;
        q.len += 1;
    }

    /// Takes slot `i` off `q`.
    pub(super) fn unlink(&mut self, q: &mut Queue, i: u32) {
        let (prev, next, w) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next, n.weight)
        };
        if prev == NIL {
            q.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            q.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        let n = &mut self.nodes[i as usize];
        n.prev = NIL;
        n.next = NIL;
        q.len -= 1;
        q.weight -= w;
    }

    /// Moves slot `i` from `from` to the back of `to`.
    pub(super) fn requeue(&mut self, from: &mut Queue, to: &mut Queue, i: u32, tag: u8) {
        self.unlink(from, i);
        self.push_back(to, i, tag);
    }
}

impl<K> Slots<K> {
    /// Gives slot `i`, on `q`, a new weight.
    pub(super) fn reweigh(&mut self, q: &mut Queue, i: u32, weight: u64) {
        let n = &mut self.nodes[i as usize];
        q.weight = q.weight - n.weight + weight;
        n.weight = weight;
    }
}
