//! Live capture from a network interface: an `AF_PACKET` socket with a `TPACKET_V3` receive ring
//! (packet(7); the kernel's Documentation/networking/packet_mmap.rst), read as [`Packets`] like a
//! capture file.
//!
//! The kernel fills the ring's blocks with frames and hands each block over whole (when it is
//! full, or [`RingConfig::block_timeout_ms`] after its first frame); the reader walks a block's
//! frames, decodes each like a capture's record, and gives the block back when it moves on. A
//! frame the ring had no room for is dropped by the kernel and counted ([`Ring::stats`]). With
//! [`RingConfig::fanout`], several rings on one interface share its traffic by the kernel's flow
//! hash (`PACKET_FANOUT_HASH`, the same for both directions of a connection), one per worker.
//!
//! Linux only, and it needs `CAP_NET_RAW` (root): [`Ring::open`] says so plainly when it cannot.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::decode::decode;
use crate::read::{IngestError, Packet, SkipCounts};
use crate::slice::Packets;

/// `TPACKET_V3` from linux/if_packet.h (`enum tpacket_versions`), which libc does not export.
const TPACKET_V3: libc::c_int = 2;
/// pcap's link type for Ethernet frames, which an Ethernet or veth interface delivers.
const LINKTYPE_ETHERNET: i32 = 1;

/// The ring's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block (a multiple of the page size).
    pub block_size: u32,
    /// Blocks in the ring.
    pub blocks: u32,
    /// How long the kernel keeps a block that has frames but is not full before handing it over:
    /// the longest a frame waits to be read when traffic is light.
    pub block_timeout_ms: u32,
    /// Join fanout group `id`, sharing the interface's traffic with the group's other rings by
    /// flow hash.
    pub fanout: Option<u16>,
    /// Receive every frame on the wire, not only those addressed to the interface.
    pub promiscuous: bool,
}

impl Default for RingConfig {
    /// 64 blocks of 1 MiB, handed over 10 ms after their first frame at the latest; no fanout;
    /// promiscuous.
    fn default() -> Self {
        Self { block_size: 1 << 20, blocks: 64, block_timeout_ms: 10, fanout: None, promiscuous: true }
    }
}

/// A ring's counts as last read from the kernel, for a thread that watches the run: refreshed
/// whenever the ring waits for frames, and every [`REFRESH_EVERY`] frames.
#[derive(Debug, Default)]
pub struct RingCounters {
    /// Frames that reached the socket.
    pub packets: std::sync::atomic::AtomicU64,
    /// Frames dropped because the ring was full.
    pub drops: std::sync::atomic::AtomicU64,
}

/// Frames between refreshes of [`RingCounters`] while frames keep coming.
pub const REFRESH_EVERY: u32 = 16_384;

/// What the kernel counted for a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Frames that reached the socket.
    pub packets: u64,
    /// Frames dropped because the ring was full.
    pub drops: u64,
}

/// A live interface's receive ring.
#[derive(Debug)]
pub struct Ring {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    config: RingConfig,
    interface: String,
    /// The block being read, its frames left and the next frame's offset in it.
    block: usize,
    left: u32,
    offset: usize,
    /// A block whose frames have all been handed out, given back on the next call (the last
    /// packet handed out borrows it until then).
    finished: Option<usize>,
    stop: Arc<AtomicBool>,
    skipped: SkipCounts,
    stats: RingStats,
    counters: Arc<RingCounters>,
    /// Frames read since the counters were last refreshed.
    since_refresh: u32,
}

// SAFETY: the mapping belongs to this ring alone; it is only read and written through `&mut self`.
unsafe impl Send for Ring {}

fn os_error(interface: &str, what: &str) -> IngestError {
    let e = std::io::Error::last_os_error();
    let hint = match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => " (live capture needs root or CAP_NET_RAW)",
        Some(libc::ENODEV | libc::ENXIO) => " (no such interface)",
        _ => "",
    };
    IngestError::Live { interface: interface.into(), what: format!("{what}: {e}{hint}") }
}

fn set<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> libc::c_int {
    // SAFETY: `value` points at a live T of the size passed.
    unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t)
    }
}

impl Ring {
    /// Opens a ring on `interface`. `stop` ends the packets ([`Packets::next_packet`] returns
    /// `None`) within a block timeout of being set, as Ctrl-C does.
    pub fn open(interface: &str, config: RingConfig, stop: Arc<AtomicBool>) -> Result<Self, IngestError> {
        let name = std::ffi::CString::new(interface)
            .map_err(|_| IngestError::Live { interface: interface.into(), what: "a name with a NUL byte".into() })?;
        // SAFETY: `name` is a valid C string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(IngestError::Live {
                interface: interface.into(),
                what: "no such interface here (`ip link` lists those there are)".into(),
            });
        }
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket creation; the descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(protocol)) };
        if raw < 0 {
            return Err(os_error(interface, "cannot open a packet socket"));
        }
        // SAFETY: `raw` is a descriptor just opened and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if set(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3) != 0 {
            return Err(os_error(interface, "TPACKET_V3 is not available"));
        }
        let frame_size = 2048;
        let req = libc::tpacket_req3 {
            tp_block_size: config.block_size,
            tp_block_nr: config.blocks,
            tp_frame_size: frame_size,
            tp_frame_nr: config.block_size / frame_size * config.blocks,
            tp_retire_blk_tov: config.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        if set(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) != 0 {
            return Err(os_error(interface, "cannot make the receive ring"));
        }
        let map_len = config.block_size as usize * config.blocks as usize;
        // SAFETY: maps the ring the kernel just made for this socket; unmapped in Drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd.as_raw_fd(),
                0,
            )
        };
        let map = if map == libc::MAP_FAILED {
            // SAFETY: as above, without locking the pages (RLIMIT_MEMLOCK may forbid it).
            let again = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if again == libc::MAP_FAILED {
                return Err(os_error(interface, "cannot map the receive ring"));
            }
            again
        } else {
            map
        };
        let ring = Self {
            fd,
            map: map.cast(),
            map_len,
            config,
            interface: interface.into(),
            block: 0,
            left: 0,
            offset: 0,
            finished: None,
            stop,
            skipped: SkipCounts::default(),
            stats: RingStats::default(),
            counters: Arc::default(),
            since_refresh: 0,
        };
        // SAFETY: zeroed sockaddr_ll is valid; the fields the kernel reads are set.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        addr.sll_ifindex = index as libc::c_int;
        // SAFETY: `addr` is a sockaddr_ll of the size passed.
        let bound = unsafe {
            libc::bind(ring.fd.as_raw_fd(), (&raw const addr).cast(), size_of::<libc::sockaddr_ll>() as libc::socklen_t)
        };
        if bound != 0 {
            return Err(os_error(interface, "cannot bind to the interface"));
        }
        if config.promiscuous {
            // SAFETY: zeroed packet_mreq is valid.
            let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mreq.mr_ifindex = index as libc::c_int;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            if set(&ring.fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq) != 0 {
                return Err(os_error(interface, "cannot make the interface promiscuous"));
            }
        }
        if let Some(group) = config.fanout {
            let arg: u32 = u32::from(group) | (libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_DEFRAG) << 16;
            if set(&ring.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg) != 0 {
                return Err(os_error(interface, "cannot join the fanout group"));
            }
        }
        Ok(ring)
    }

    /// The interface's name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// What the kernel has counted for this ring so far.
    pub fn stats(&mut self) -> RingStats {
        // SAFETY: zeroed tpacket_stats_v3 is valid; the kernel fills it.
        let mut s: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `s` and `len` describe a buffer of the right size.
        let got = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut s).cast(),
                &mut len,
            )
        };
        // The kernel's counters restart at each read: they are added up here.
        if got == 0 {
            self.stats.packets += u64::from(s.tp_packets);
            self.stats.drops += u64::from(s.tp_drops);
        }
        self.counters.packets.store(self.stats.packets, Ordering::Relaxed);
        self.counters.drops.store(self.stats.drops, Ordering::Relaxed);
        self.since_refresh = 0;
        self.stats
    }

    /// The ring's counts for another thread to read while this one reads frames.
    pub fn counters(&self) -> Arc<RingCounters> {
        Arc::clone(&self.counters)
    }

    fn block_desc(&self, block: usize) -> *mut libc::tpacket_block_desc {
        // SAFETY: `block` is below `blocks`, so the offset is inside the mapping.
        unsafe { self.map.add(block * self.config.block_size as usize).cast() }
    }

    /// Whether block `block` has been handed to us.
    fn ready(&self, block: usize) -> bool {
        let desc = self.block_desc(block);
        // SAFETY: the descriptor lies in the mapping; the kernel writes block_status, so it is
        // read volatile, and the fence orders the frames' reads after it.
        let status = unsafe { std::ptr::read_volatile(&raw const (*desc).hdr.bh1.block_status) };
        std::sync::atomic::fence(Ordering::Acquire);
        status & libc::TP_STATUS_USER != 0
    }

    fn give_back(&mut self, block: usize) {
        let desc = self.block_desc(block);
        std::sync::atomic::fence(Ordering::Release);
        // SAFETY: as in `ready`; writing TP_STATUS_KERNEL hands the block back.
        unsafe { std::ptr::write_volatile(&raw mut (*desc).hdr.bh1.block_status, libc::TP_STATUS_KERNEL) };
    }

    /// Waits up to 100 ms for the ring; an error where the interface went away.
    fn wait(&mut self) -> Result<(), IngestError> {
        self.stats();
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_error(&self.interface, "poll"));
        }
        if pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            let mut err: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `err` and `len` describe an int.
            unsafe {
                libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut err).cast(), &mut len)
            };
            let e = std::io::Error::from_raw_os_error(err);
            return Err(IngestError::Live {
                interface: self.interface.clone(),
                what: format!("the interface went away or down ({e})"),
            });
        }
        Ok(())
    }
}

impl Packets for Ring {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        if let Some(block) = self.finished.take() {
            self.give_back(block);
        }
        loop {
            if self.left == 0 {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(None);
                }
                if !self.ready(self.block) {
                    self.wait()?;
                    continue;
                }
                let desc = self.block_desc(self.block);
                // SAFETY: the block is ours (ready); its header lies in the mapping.
                let (n, first) = unsafe { ((*desc).hdr.bh1.num_pkts, (*desc).hdr.bh1.offset_to_first_pkt) };
                if n == 0 {
                    self.give_back(self.block);
                    self.block = (self.block + 1) % self.config.blocks as usize;
                    continue;
                }
                self.left = n;
                self.offset = first as usize;
            }
            let block = self.block;
            let base = block * self.config.block_size as usize;
            let limit = self.config.block_size as usize;
            // A frame header the kernel wrote; its offsets are checked against the block.
            if self.offset + size_of::<libc::tpacket3_hdr>() > limit {
                return Err(IngestError::Live {
                    interface: self.interface.clone(),
                    what: "a ring frame past its block".into(),
                });
            }
            // SAFETY: the header lies inside this block of the mapping (checked above), which
            // is ours until given back.
            let hdr =
                unsafe { std::ptr::read_unaligned(self.map.add(base + self.offset).cast::<libc::tpacket3_hdr>()) };
            let (start, len) = (self.offset + usize::from(hdr.tp_mac), hdr.tp_snaplen as usize);
            if start + len > limit {
                return Err(IngestError::Live {
                    interface: self.interface.clone(),
                    what: "a ring frame past its block".into(),
                });
            }
            self.left -= 1;
            self.offset += hdr.tp_next_offset as usize;
            self.since_refresh += 1;
            if self.since_refresh >= REFRESH_EVERY {
                self.stats();
            }
            if self.left == 0 {
                self.finished = Some(block);
                self.block = (block + 1) % self.config.blocks as usize;
            }
            // SAFETY: the frame lies inside the block (checked), which is given back only on
            // the next call, after the packet borrowing it is gone.
            let frame = unsafe { std::slice::from_raw_parts(self.map.add(base + start), len) };
            let time_ns = u64::from(hdr.tp_sec) * 1_000_000_000 + u64::from(hdr.tp_nsec);
            match decode(LINKTYPE_ETHERNET, frame) {
                Ok(d) => {
                    return Ok(Some(Packet {
                        time_ns,
                        key: d.key,
                        wire_len: hdr.tp_len,
                        ip_len: d.ip_len,
                        payload: d.payload,
                        tcp: d.tcp,
                    }));
                }
                Err(reason) => self.skipped.add(reason),
            }
            if let Some(block) = self.finished.take() {
                self.give_back(block);
            }
        }
    }

    fn skipped(&self) -> SkipCounts {
        self.skipped
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, no longer borrowed (drop takes `&mut self`).
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let stop = Arc::new(AtomicBool::new(false));
        let e = Ring::open("sy-no-such0", RingConfig::default(), stop).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("sy-no-such0") && text.contains("no such interface here"), "{text}");
    }
}
