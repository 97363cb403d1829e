//! Two network namespaces joined by an emulated link: real TCP, with its real congestion
//! control, runs end to end across a bottleneck of the rate, delay, loss and queue asked for.
//!
//! Each namespace has a TUN device; a forwarder thread reads the packets one side's kernel
//! routes into its TUN, passes them through that direction's [`Link`], and writes them into the
//! other side's TUN when they arrive. The kernels here have `tbf`, `htb` and `red` but not
//! `netem`, so delay and random loss need this (the issue's reason for it).
//!
//! Needs root (namespaces and TUN devices); [`Dumbbell::new`] says plainly when it cannot, so
//! that tests can skip with a visible message.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tun_rs::{AsyncDevice, DeviceBuilder, SyncDevice};

use crate::impair::{Impairments, Verdict};
use crate::link::{Link, LinkConfig, LinkStats};

/// Why a dumbbell could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LinkemError {
    /// This machine or user cannot make namespaces or TUN devices.
    #[error("network namespaces are not available here: {0}")]
    Unavailable(String),
    /// A setup step failed.
    #[error("{0}")]
    Setup(String),
}

/// A network namespace made for the emulator, deleted when dropped.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Makes a fresh namespace named after this process and `tag`, its loopback up. Needs root;
    /// says plainly when it cannot, as [`LinkemError::Unavailable`].
    pub fn new(tag: &str) -> Result<Self, LinkemError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(LinkemError::Unavailable("not root (network namespaces need it)".into()));
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("sy{}-{n}{tag}", std::process::id());
        ip(&["netns", "add", &name]).map_err(|e| LinkemError::Unavailable(e.to_string()))?;
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `ip -n NAME ARGS…`: its configuration stays inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<(), LinkemError> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Its name (for `ip netns exec NAME …`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Moves the calling thread into the namespace: sockets it opens from then on live there.
    pub fn enter(&self) -> Result<(), LinkemError> {
        enter(&self.name)
    }

    /// Runs `f` on a new thread inside the namespace.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<Result<T, LinkemError>> {
        let name = self.name.clone();
        std::thread::spawn(move || enter(&name).map(|()| f()))
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn enter(name: &str) -> Result<(), LinkemError> {
    let f = std::fs::File::open(format!("/run/netns/{name}"))
        .map_err(|e| LinkemError::Setup(format!("opening namespace {name}: {e}")))?;
    // SAFETY: setns takes a descriptor of a namespace file, which `f` is and keeps open for the
    // call; it changes only the calling thread's network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(LinkemError::Setup(format!("entering namespace {name}: {}", std::io::Error::last_os_error())));
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<(), LinkemError> {
    let out =
        Command::new("ip").args(args).output().map_err(|e| LinkemError::Unavailable(format!("running `ip`: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LinkemError::Setup(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
    }
}

/// Makes the TUN device `name` inside `ns` (a TUN is bound to the namespace it is made in;
/// moving one afterwards detaches its descriptor).
fn tun_in(ns: &Namespace, name: &str) -> Result<SyncDevice, LinkemError> {
    let name = name.to_owned();
    ns.spawn(move || DeviceBuilder::new().name(&name).mtu(1500).build_sync())
        .join()
        .map_err(|_| LinkemError::Setup("the thread making a TUN device panicked".into()))??
        .map_err(|e| LinkemError::Setup(format!("making a TUN device: {e}")))
}

/// Two namespaces and the emulated link between them.
#[derive(Debug)]
pub struct Dumbbell {
    /// The sending side (address [`Dumbbell::LEFT`]).
    pub left: Namespace,
    /// The receiving side (address [`Dumbbell::RIGHT`]).
    pub right: Namespace,
    stats: Arc<Mutex<[LinkStats; 2]>>,
    impairments: Impairments,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    forwarder: Option<std::thread::JoinHandle<()>>,
}

impl Dumbbell {
    /// The left side's address.
    pub const LEFT: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
    /// The right side's address.
    pub const RIGHT: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);

    /// Makes two namespaces joined by `forward` (left to right) and `back` (right to left).
    pub fn new(forward: LinkConfig, back: LinkConfig) -> Result<Self, LinkemError> {
        Self::with_addresses(forward, back, 1, 1)
    }

    /// The same with `left` and `right` addresses on the two sides: [`Dumbbell::LEFT`] and
    /// [`Dumbbell::RIGHT`] first, then [`Dumbbell::left_address`] and
    /// [`Dumbbell::right_address`] of 1, 2, …, so that connections (an MPTCP connection's
    /// subflows) can take different address pairs across the one link.
    pub fn with_addresses(
        forward: LinkConfig,
        back: LinkConfig,
        left: usize,
        right: usize,
    ) -> Result<Self, LinkemError> {
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Err(LinkemError::Unavailable("no /dev/net/tun".into()));
        }
        let counts = [left, right];
        if let Some(bad) = counts.iter().find(|k| !(1..=255).contains(*k)) {
            return Err(LinkemError::Setup(format!("{bad} addresses a side: from 1 to 255")));
        }
        let (left, right) = (Namespace::new("l")?, Namespace::new("r")?);
        let left_tun = tun_in(&left, "sylink")?;
        let right_tun = tun_in(&right, "sylink")?;
        for (ns, side) in [(&left, 0), (&right, 1)] {
            let me = |k| if side == 0 { Self::left_address(k) } else { Self::right_address(k) };
            let peer = if side == 0 { Self::RIGHT } else { Self::LEFT };
            for k in 0..counts[side] {
                ns.ip(&["addr", "add", &format!("{}/32", me(k)), "dev", "sylink"])?;
            }
            ns.ip(&["link", "set", "sylink", "up"])?;
            ns.ip(&["route", "add", &format!("{peer}/32"), "dev", "sylink"])?;
            if counts[1 - side] > 1 {
                // The far side's further addresses, all of them through the link.
                let far = if side == 0 { 2 } else { 1 };
                ns.ip(&["route", "add", &format!("10.200.{far}.0/24"), "dev", "sylink"])?;
            }
        }
        let stats = Arc::new(Mutex::new([LinkStats::default(); 2]));
        let impairments = Impairments::new();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let shared = Arc::clone(&stats);
        let judge = impairments.clone();
        let forwarder = std::thread::Builder::new()
            .name("sy-linkem".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
                rt.block_on(async move {
                    let l = Arc::new(AsyncDevice::new(left_tun).expect("an async TUN"));
                    let r = Arc::new(AsyncDevice::new(right_tun).expect("an async TUN"));
                    let start = Instant::now();
                    let a = direction(
                        Arc::clone(&l),
                        Arc::clone(&r),
                        Link::new(forward),
                        start,
                        Arc::clone(&shared),
                        0,
                        judge.clone(),
                        stopped.clone(),
                    );
                    let b = direction(r, l, Link::new(back), start, shared, 1, judge, stopped);
                    tokio::join!(a, b);
                });
            })
            .map_err(|e| LinkemError::Setup(format!("starting the forwarder: {e}")))?;
        Ok(Self { left, right, stats, impairments, stop: Some(stop), forwarder: Some(forwarder) })
    }

    /// The left side's address `k`: [`Dumbbell::LEFT`] for 0, then 10.200.1.k.
    pub fn left_address(k: usize) -> Ipv4Addr {
        if k == 0 { Self::LEFT } else { Ipv4Addr::new(10, 200, 1, k as u8) }
    }

    /// The right side's address `k`: [`Dumbbell::RIGHT`] for 0, then 10.200.2.k.
    pub fn right_address(k: usize) -> Ipv4Addr {
        if k == 0 { Self::RIGHT } else { Ipv4Addr::new(10, 200, 2, k as u8) }
    }

    /// The impairments of single connections, in force from the next packet.
    pub fn impairments(&self) -> &Impairments {
        &self.impairments
    }

    /// Counters of the left-to-right and right-to-left links.
    pub fn stats(&self) -> [LinkStats; 2] {
        *self.stats.lock().expect("the forwarder does not panic holding it")
    }
}

impl Drop for Dumbbell {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(f) = self.forwarder.take() {
            let _ = f.join();
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn direction(
    from: Arc<AsyncDevice>,
    to: Arc<AsyncDevice>,
    mut link: Link,
    start: Instant,
    stats: Arc<Mutex<[LinkStats; 2]>>,
    which: usize,
    impairments: Impairments,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 65536];
    // Packets of slowed connections, by when they enter the link (then in arrival order).
    let mut held: BinaryHeap<Reverse<(std::time::Duration, u64, Vec<u8>)>> = BinaryHeap::new();
    let mut order = 0u64;
    loop {
        let next = [link.next_arrival(), held.peek().map(|Reverse((t, _, _))| *t)].into_iter().flatten().min();
        let wake = next.map(|t| tokio::time::Instant::from_std(start + t));
        tokio::select! {
            r = from.recv(&mut buf) => match r {
                Ok(n) => match impairments.judge(&buf[..n]) {
                    Verdict::Pass => {
                        let _ = link.offer(start.elapsed(), buf[..n].to_vec());
                    }
                    Verdict::Drop => {}
                    Verdict::Delay(d) => {
                        order += 1;
                        held.push(Reverse((start.elapsed() + d, order, buf[..n].to_vec())));
                    }
                    Verdict::Reset { to_source, to_destination } => {
                        let _ = from.send(&to_source).await;
                        let _ = to.send(&to_destination).await;
                    }
                },
                Err(_) => return,
            },
            () = async { tokio::time::sleep_until(wake.expect("guarded")).await }, if wake.is_some() => {}
            _ = stop.changed() => return,
        }
        let now = start.elapsed();
        while held.peek().is_some_and(|Reverse((t, _, _))| *t <= now) {
            let Reverse((_, _, p)) = held.pop().expect("peeked");
            let _ = link.offer(now, p);
        }
        while let Some(p) = link.poll(now) {
            let _ = to.send(&p).await;
        }
        stats.lock().expect("no task panics holding it")[which] = link.stats();
    }
}
