//! Guo ch. 3's interrupt-affinity experiment (notes 002 §2.2, §5.2) as a small deterministic
//! model: an iperf-like TCP receive stream of messages of one size arriving at a NIC on the
//! Xeon E5335 (Clovertown), each message costing the kernel's interrupt and softirq work on one
//! core and the application's receive on another (or the same), with the caches of
//! [`cache`](super::cache) charging the misses.
//!
//! Another machine is a topology spec plus its caches ([`IrqParams::caches`], e.g. read from
//! Linux's sysfs by [`CacheHierarchy::from_sys`]): `switchyard bench steer` predicts the
//! machine it runs on that way.
//!
//! What lives here: the per-message costs, the three placements ch. 3 compares, the pipeline
//! that turns per-message times into throughput at saturation, and per-message L2 misses.
//! What does not: the sender, the wire, TCP's window dynamics and losses (the receiver is the
//! bottleneck and always has a message waiting), the VM variant (§3.3.3; left out, see
//! `switchyard_experiments::guo_irq`), and any comparison with the published figures.
//!
//! # One message
//!
//! A message of `S` bytes (iperf's `-l`) arrives as `S / mss` segments — fractional for small
//! messages, since iperf's sender leaves Nagle on and small writes travel in full segments.
//! 1. *Top half*, on the core the NIC's interrupt is delivered to: `interrupt_ns` per segment
//!    (one interrupt per segment: ch. 3 ran default driver settings, no coalescing tuning, §4.4).
//! 2. *Softirq*, on the same core (`softirq()` runs on the core that took the interrupt; after
//!    `MAX_SOFTIRQ_RESTART = 10` rounds it hands the rest to that core's `ksoftirqd`, §2.2 — the
//!    same core either way, so the hand-off changes nothing here): `softirq_segment_ns` per
//!    segment of protocol work, touching the socket's state once per segment, then a copy of
//!    the `S` bytes from the NIC's DMA buffer (cold: DMA writes memory, the Clovertown has no
//!    direct cache placement) into a socket-buffer slot.
//! 3. *Receive*, on the application's core: `syscall_ns` for `recv()`, then a copy of the slot's
//!    `S` bytes into the application's buffer, touching the socket's state. The slot is warm if
//!    the softirq ran on this core or on its L2 sibling, else it comes from memory.
//!
//! Copies cost `copy_ns_per_byte` plus the cache model's miss penalties divided by `copy_mlp`
//! (lines a sequential copy has in flight at once); the socket's state is pointer-chasing and
//! pays its misses in full.
//!
//! # Placements (Guo §2.2)
//!
//! - [`Placement::RoundRobin`], the default: the interrupt rotates over the 8 cores, one core
//!   per segment (the "round-robin" delivery of 2.6.18's irqbalance/IO-APIC), and the scheduler
//!   moves the application to a core drawn at random (seeded) every `quantum_ns`.
//! - [`Placement::Affinity`]: interrupt and softirq/ksoftirqd on core 0, the application on the
//!   core sharing its L2. Guo calls them cores 0 and 2 (Linux numbers Clovertown's L2 pairs 0–2,
//!   1–3, …); the `xeon-e5335` topology numbers the pairs 0–1, so here they are leaves 0 and 1.
//! - [`Placement::SameCore`]: interrupt and application on core 0 (the prior work's +20%, [21]).
//!
//! # Time
//!
//! At saturation the kernel always has a segment waiting. Kernel work is serial (one NIC
//! queue, one IRQ: §2.2 step 5) and a core runs one thing at a time. With `K_m` and `A_m` the
//! times message `m`'s kernel and receive work end, `k_m`, `a_m` their costs, `free[c]` when
//! core `c` is next idle and `W` the socket buffer's slots:
//! `K_m = max(free[kcore], K_{m-1}, A_{m-W}) + k_m` and `A_m = max(free[acore], A_{m-1}, K_m) + a_m`.
//! On two cores this is a pipeline; on one it is the sum. Throughput is bytes received over
//! the time after a warm-up. Deterministic: the seed draws only the application's cores and
//! the interrupt's starting core.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchyard_core::Topology;

use super::cache::{CacheHierarchy, Caches};

/// Where interrupts and the application run (Guo §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placement {
    /// Interrupts round-robin over all cores, the application moved by the scheduler.
    RoundRobin,
    /// Interrupt and softirq on core 0, the application on its L2 sibling.
    Affinity,
    /// Interrupt, softirq and application on core 0.
    SameCore,
}

impl Placement {
    /// All three, in the order printed.
    pub const ALL: [Self; 3] = [Self::RoundRobin, Self::Affinity, Self::SameCore];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::RoundRobin => "round-robin (default)",
            Self::Affinity => "affinity (irq 0, app on L2 sibling)",
            Self::SameCore => "same core",
        }
    }
}

/// The per-message CPU costs. None is fitted to the published results; each is **chosen** as
/// said, since ch. 3 publishes no breakdown of its receive path.
#[derive(Clone, Debug, PartialEq)]
pub struct IrqCosts {
    /// Top half per interrupt: acknowledge, reprogram the PIC, schedule the softirq (§2.2).
    /// Chosen 500 ns (1,000 cycles at 2.0 GHz): interrupt entry and exit plus a NIC driver's
    /// handler on a Core 2-era CPU, to an order of magnitude.
    pub interrupt_ns: f64,
    /// Softirq protocol work per segment (IP and TCP receive, the ACK, skb handling), without
    /// the copy. Chosen 1,000 ns (2,000 cycles): Clark et al. (1989) count a few hundred
    /// instructions for TCP itself; 2.6's skb and socket handling add several times that.
    pub softirq_segment_ns: f64,
    /// One `recv()` system call's entry, exit and socket locking. Chosen 500 ns.
    pub syscall_ns: f64,
    /// Copying one byte whose lines are in L1: chosen 0.25 ns (4 GB/s, a `rep movs`/SSE copy on
    /// a 2.0 GHz Core 2 moving 8 bytes a cycle at best, halved for the loads and stores).
    pub copy_ns_per_byte: f64,
    /// Cache-line misses a sequential copy overlaps. Chosen 8: the Core microarchitecture's
    /// outstanding L1D misses (recalled from Intel's optimization manual, not checked here);
    /// with the cache model's 127 ns to memory that is about 4 GB/s streaming from DRAM, the
    /// order of a Clovertown's per-core memory bandwidth.
    pub copy_mlp: f64,
    /// TCP's maximum segment size: MTU 1500 without jumbo frames (Guo §4.4) less 52 bytes of
    /// IP and TCP headers with timestamps.
    pub mss: u64,
    /// The socket's and TCP control block's state, touched by softirq and `recv()`. Chosen
    /// 2 KiB (`struct sock`, `tcp_sock`, the receive queue's heads).
    pub socket_bytes: u64,
    /// The socket receive buffer: slots of one message each, `rcvbuf / S` of them (at least 2).
    /// 87,380 B, Linux 2.6.18's default `tcp_rmem` (autotuning, which can grow it, is left out).
    pub rcvbuf: u64,
}

impl Default for IrqCosts {
    fn default() -> Self {
        Self {
            interrupt_ns: 500.0,
            softirq_segment_ns: 1000.0,
            syscall_ns: 500.0,
            copy_ns_per_byte: 0.25,
            copy_mlp: 8.0,
            mss: 1448,
            socket_bytes: 2048,
            rcvbuf: 87_380,
        }
    }
}

/// One run's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct IrqParams {
    /// Message size in bytes (iperf's `-l`).
    pub message: u64,
    /// Messages received, the warm-up included.
    pub messages: u64,
    /// Messages not counted at the start (caches warming).
    pub warmup: u64,
    /// Where interrupts and the application run.
    pub placement: Placement,
    /// The costs.
    pub costs: IrqCosts,
    /// RoundRobin: how long the application stays on a core before the scheduler may move it.
    /// Chosen 1 ms, one tick at HZ = 1000, when 2.6's load balancer can act.
    pub quantum_ns: f64,
    /// The machine (a topology spec).
    pub topology: String,
    /// Its caches; `None` takes the topology's data sheet ([`CacheHierarchy::data_sheet`]).
    /// A machine at hand: [`CacheHierarchy::from_sys`].
    pub caches: Option<CacheHierarchy>,
    /// Seed of the application's cores and the interrupt's first core.
    pub seed: u64,
}

impl IrqParams {
    /// Ch. 3's setup for messages of `message` bytes: the Xeon E5335, about 16 MiB received (at
    /// least 2,000 messages), the first tenth not counted.
    pub fn guo(message: u64, placement: Placement, seed: u64) -> Self {
        let messages = (16 << 20) / message.max(1);
        let messages = messages.max(2000);
        Self {
            message,
            messages,
            warmup: messages / 10,
            placement,
            costs: IrqCosts::default(),
            quantum_ns: 1e6,
            topology: "xeon-e5335".into(),
            caches: None,
            seed,
        }
    }
}

/// What one message cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MessageCost {
    /// The core its interrupt and softirq ran on.
    pub kernel_core: u32,
    /// The core that received it.
    pub app_core: u32,
    /// Kernel (top half and softirq) time, ns.
    pub kernel_ns: f64,
    /// Receive time, ns.
    pub app_ns: f64,
    /// Of which cache misses, ns (both stages).
    pub miss_ns: f64,
    /// L2 misses, in lines, both stages.
    pub l2_misses: u64,
}

/// A run's result.
#[derive(Clone, Debug, PartialEq)]
pub struct IrqOutcome {
    /// Bytes per second received after the warm-up.
    pub throughput: f64,
    /// Mean L2 misses per message after the warm-up.
    pub l2_per_message: f64,
    /// Mean kernel and receive CPU time per message after the warm-up, ns.
    pub cpu_ns_per_message: f64,
    /// Share of messages after the warm-up whose softirq ran on the receiving core or its L2
    /// sibling.
    pub shared_l2: f64,
    /// Every message's cost, in arrival order.
    pub messages: Vec<MessageCost>,
}

/// Keys of the footprints in the cache model.
const SOCKET: u64 = 1;
const USER_BUFFER: u64 = 2;
const SLOT: u64 = 1 << 32;
const DMA: u64 = 1 << 48;

/// Runs one placement and message size.
///
/// # Panics
///
/// If the topology does not parse, the caches do not fit it, the message size or MSS is 0, or
/// the placement needs a second core the topology does not have.
pub fn simulate(p: &IrqParams) -> IrqOutcome {
    let topology = Topology::parse(&p.topology).expect("a valid topology spec");
    let leaves = topology.leaves();
    let hierarchy = p.caches.clone().unwrap_or_else(|| CacheHierarchy::data_sheet(&topology));
    if let Err(why) = hierarchy.validate(leaves) {
        panic!("caches for {}: {why}", p.topology);
    }
    let mut caches = Caches::new(hierarchy, leaves);
    let c = &p.costs;
    assert!(p.message > 0 && c.mss > 0, "message size and MSS must be positive");
    let s = p.message;
    let segments = s as f64 / c.mss as f64;
    let slots = (c.rcvbuf / s).max(2);
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let irq_offset = rng.random_range(0..leaves);
    let mut app_core = match p.placement {
        Placement::RoundRobin => rng.random_range(0..leaves),
        Placement::Affinity => {
            assert!(leaves > 1, "affinity needs two cores");
            1
        }
        Placement::SameCore => 0,
    };
    let mut next_move = p.quantum_ns;
    let penalties: Vec<f64> = caches.hierarchy().levels.iter().map(|l| l.miss_ns).collect();
    let l2 = penalties.len().min(2) - 1;
    // A copy's misses overlap `copy_mlp` at a time; the socket's are paid one by one.
    // A write (the socket's state, by both sides; the slot, by softirq; the application's
    // buffer) invalidates other cores' copies, so a core never reads a stale copy warm.
    let touch =
        |caches: &mut Caches, core: u32, key: u64, bytes: u64, (mlp, write): (f64, bool), cost: &mut MessageCost| {
            let a = if write { caches.write(core, key, bytes) } else { caches.access(core, key, bytes) };
            cost.l2_misses += a.misses[l2];
            cost.miss_ns += a.ns / mlp;
            a.ns / mlp
        };
    let mut free = vec![0.0f64; leaves as usize];
    let (mut kernel_end, mut app_end) = (0.0f64, 0.0f64);
    let mut app_ends: Vec<f64> = Vec::with_capacity(p.messages as usize);
    let mut out = Vec::with_capacity(p.messages as usize);
    for m in 0..p.messages {
        let kcore = match p.placement {
            // The segment carrying the message's first byte picks the core.
            Placement::RoundRobin => ((irq_offset as u64 + m * s / c.mss) % u64::from(leaves)) as u32,
            Placement::Affinity | Placement::SameCore => 0,
        };
        if p.placement == Placement::RoundRobin && app_end >= next_move {
            app_core = rng.random_range(0..leaves);
            next_move = app_end + p.quantum_ns;
        }
        let mut cost = MessageCost { kernel_core: kcore, app_core, ..MessageCost::default() };
        let slot = SLOT + m % slots;
        let mut k = segments * (c.interrupt_ns + c.softirq_segment_ns) + s as f64 * c.copy_ns_per_byte;
        // The kernel touches the socket once per segment: a message that starts no new segment
        // (small messages travel several to a segment) finds its segment already processed.
        let new_segment = m == 0 || (m * s) / c.mss != ((m - 1) * s) / c.mss || s >= c.mss;
        if new_segment {
            k += touch(&mut caches, kcore, SOCKET, c.socket_bytes, (1.0, true), &mut cost);
        }
        k += touch(&mut caches, kcore, DMA + m, s, (c.copy_mlp, false), &mut cost);
        k += touch(&mut caches, kcore, slot, s, (c.copy_mlp, true), &mut cost);
        let mut a = c.syscall_ns + s as f64 * c.copy_ns_per_byte;
        a += touch(&mut caches, app_core, SOCKET, c.socket_bytes, (1.0, true), &mut cost);
        a += touch(&mut caches, app_core, slot, s, (c.copy_mlp, false), &mut cost);
        a += touch(&mut caches, app_core, USER_BUFFER, s, (c.copy_mlp, true), &mut cost);
        cost.kernel_ns = k;
        cost.app_ns = a;
        let room = if m >= slots { app_ends[(m - slots) as usize] } else { 0.0 };
        kernel_end = free[kcore as usize].max(kernel_end).max(room) + k;
        free[kcore as usize] = kernel_end;
        app_end = free[app_core as usize].max(app_end).max(kernel_end) + a;
        free[app_core as usize] = app_end;
        app_ends.push(app_end);
        out.push(cost);
    }
    let counted = &out[p.warmup.min(p.messages) as usize..];
    let n = counted.len().max(1) as f64;
    let start = if p.warmup == 0 { 0.0 } else { app_ends[(p.warmup - 1) as usize] };
    let span = app_ends.last().copied().unwrap_or(0.0) - start;
    let shares =
        |a: u32, b: u32| a / caches.hierarchy().levels[l2].shared_by == b / caches.hierarchy().levels[l2].shared_by;
    IrqOutcome {
        throughput: if span > 0.0 { counted.len() as f64 * s as f64 / (span * 1e-9) } else { 0.0 },
        l2_per_message: counted.iter().map(|m| m.l2_misses as f64).sum::<f64>() / n,
        cpu_ns_per_message: counted.iter().map(|m| m.kernel_ns + m.app_ns).sum::<f64>() / n,
        shared_l2: counted.iter().filter(|m| shares(m.kernel_core, m.app_core)).count() as f64 / n,
        messages: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(message: u64, placement: Placement, seed: u64) -> IrqOutcome {
        simulate(&IrqParams { messages: 3000, warmup: 300, ..IrqParams::guo(message, placement, seed) })
    }

    #[test]
    fn affinity_never_takes_more_l2_misses_than_round_robin_for_a_message() {
        for size in [64, 1024, 4096, 16384, 65536] {
            let rr = run(size, Placement::RoundRobin, 3);
            let aff = run(size, Placement::Affinity, 3);
            for (m, (a, r)) in aff.messages.iter().zip(&rr.messages).enumerate() {
                assert!(a.l2_misses <= r.l2_misses, "size {size}, message {m}: {a:?} against {r:?}");
            }
            if size >= 4096 {
                assert!(aff.l2_per_message < rr.l2_per_message, "size {size}");
            }
        }
    }

    #[test]
    fn costs_add_up() {
        let p = IrqParams { messages: 50, warmup: 0, ..IrqParams::guo(2896, Placement::SameCore, 1) };
        let c = &p.costs;
        let out = simulate(&p);
        for m in &out.messages {
            let fixed =
                2.0 * (c.interrupt_ns + c.softirq_segment_ns) + c.syscall_ns + 2.0 * 2896.0 * c.copy_ns_per_byte;
            assert!((m.kernel_ns + m.app_ns - fixed - m.miss_ns).abs() < 1e-6, "{m:?}");
        }
        // One core, no overlap: the run lasts the sum of every message's work.
        let total: f64 = out.messages.iter().map(|m| m.kernel_ns + m.app_ns).sum();
        assert!((out.throughput - 50.0 * 2896.0 / (total * 1e-9)).abs() / out.throughput < 1e-9);
        // Once every slot has been used (30 of 2,896 B), DMA'd bytes are the only misses on one
        // core: 2896 / 64 lines.
        let warm = &out.messages[40];
        assert_eq!(warm.l2_misses, 2896_u64.div_ceil(64));
    }

    #[test]
    fn affinity_pipelines_two_cores() {
        let p = IrqParams { messages: 400, warmup: 100, ..IrqParams::guo(8192, Placement::Affinity, 1) };
        let out = simulate(&p);
        let tail = &out.messages[100..];
        let k = tail.iter().map(|m| m.kernel_ns).sum::<f64>() / tail.len() as f64;
        let a = tail.iter().map(|m| m.app_ns).sum::<f64>() / tail.len() as f64;
        let bound = 8192.0 / (k.max(a) * 1e-9);
        assert!((out.throughput / bound - 1.0).abs() < 0.02, "{} against the slower stage's {bound}", out.throughput);
        assert_eq!(out.shared_l2, 1.0);
    }

    /// A two-core machine described as Linux lists it (private L1d and L2, a shared L3): with
    /// interrupt and application on one core the received data stays in that core's L2; on the
    /// other core every message's slot is read through the shared L3.
    #[test]
    fn a_machine_from_sys_takes_fewer_l2_misses_on_the_same_core() {
        use crate::models::cache::SysCache;
        let sys = |level, kind: &str, size: &str, shared: &str| SysCache {
            level,
            kind: kind.into(),
            size: size.into(),
            line: 64,
            shared_cpu_list: shared.into(),
        };
        let caches = CacheHierarchy::from_sys(
            &[
                sys(1, "Data", "48K", "0"),
                sys(1, "Instruction", "32K", "0"),
                sys(2, "Unified", "2048K", "0"),
                sys(3, "Unified", "266240K", "0-1"),
            ],
            &[7.0, 33.0, 110.0],
        )
        .unwrap();
        let names: Vec<(&str, u64, u32)> =
            caches.levels.iter().map(|l| (l.name.as_str(), l.size, l.shared_by)).collect();
        assert_eq!(names, [("L1d", 48 << 10, 1), ("L2", 2 << 20, 1), ("L3", 260 << 20, 2)]);
        let run = |placement| {
            simulate(&IrqParams {
                topology: "flat:2".into(),
                caches: Some(caches.clone()),
                messages: 2000,
                warmup: 200,
                ..IrqParams::guo(16384, placement, 1)
            })
        };
        let (same, other) = (run(Placement::SameCore), run(Placement::Affinity));
        assert!(same.l2_per_message < other.l2_per_message, "{} against {}", same.l2_per_message, other.l2_per_message);
        assert!(same.cpu_ns_per_message < other.cpu_ns_per_message);
        // The other core shares only the L3, so the shared-L2 measure says so.
        assert_eq!((same.shared_l2, other.shared_l2), (1.0, 0.0));
    }

    #[test]
    fn sys_caches_that_do_not_fit_the_model_say_why() {
        use crate::models::cache::SysCache;
        let l3 = |shared: &str, size: &str| SysCache {
            level: 3,
            kind: "Unified".into(),
            size: size.into(),
            line: 64,
            shared_cpu_list: shared.into(),
        };
        let e = CacheHierarchy::from_sys(&[l3("0,2", "1M")], &[1.0]).unwrap_err();
        assert!(e.contains("\"0,2\"") && e.contains("consecutive"), "{e}");
        let e = CacheHierarchy::from_sys(&[l3("0-1", "lots")], &[1.0]).unwrap_err();
        assert!(e.contains("\"lots\""), "{e}");
        let e = CacheHierarchy::from_sys(&[l3("0-1", "1M")], &[]).unwrap_err();
        assert!(e.contains("1 data or unified cache levels but 0"), "{e}");
    }

    #[test]
    fn deterministic_with_a_seed() {
        assert_eq!(run(1500, Placement::RoundRobin, 9), run(1500, Placement::RoundRobin, 9));
        let other = run(1500, Placement::RoundRobin, 10);
        assert_ne!(run(1500, Placement::RoundRobin, 9).messages, other.messages);
    }
}
