//! The device: a file or block device written one whole block at a time, each write durable
//! before it is reported done, and optionally paced to behave like a slow card.
//!
//! Durability: the file is opened with `O_DSYNC`, so a write returns only once its data (and the
//! metadata needed to read it back) is on stable storage; where the open refuses the flag, each
//! write is followed by `fdatasync`. `O_DIRECT` is asked for as well, to keep the page cache out
//! of the measurement; a filesystem that refuses it (tmpfs before Linux 6.6) gets buffered writes, still
//! synchronised, and [`DeviceInfo`] says so.
//!
//! Pacing: this machine's kernel has no device-mapper (`/dev/mapper` is absent and `dmsetup`
//! cannot load `dm-delay`), so a slow device is emulated here instead: after the durable write,
//! the writer sleeps until the write has taken at least the paced time. [`Pacing::sd_card`] is the
//! thesis's SD card (Dou §2.5: 9–13 ms a block, 60–140 ms more on the first write into each
//! 256-block sector).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::frame;

/// Alignment of the write buffer: `O_DIRECT` needs the buffer aligned to the device's logical
/// block; 4096 covers every device in use.
pub const ALIGN: usize = 4096;

/// A slow device's timing, imposed on each block write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Shortest and longest time a block write takes (drawn uniformly).
    pub write: (Duration, Duration),
    /// Blocks per sector (erase unit); the first write into each pays `sector_extra`.
    pub sector_blocks: u64,
    /// Shortest and longest extra time of a first write into a sector (drawn uniformly).
    pub sector_extra: (Duration, Duration),
    /// Seed of the draws, so a run's device timings can be repeated.
    pub seed: u64,
}

impl Pacing {
    /// The thesis's 128 MB SanDisk card over SPI (Dou §2.5; notes 003 §4.1): a 512-byte block
    /// in 9 ms, up to 13 ms with reading the data out of memory, and 60–140 ms more on the first
    /// write into each 256-block sector.
    #[must_use]
    pub const fn sd_card(seed: u64) -> Self {
        Self {
            write: (Duration::from_millis(9), Duration::from_millis(13)),
            sector_blocks: 256,
            sector_extra: (Duration::from_millis(60), Duration::from_millis(140)),
            seed,
        }
    }

    /// How much longer than a plain write each of the writes of blocks `next` and `next + 1`
    /// will take: the sector penalty's mean where one opens a sector. RG-EDF's slack is
    /// measured with it, and only the device knows its block numbers (the same rule as the
    /// simulator's sensor node, `sim::models::flash`).
    #[must_use]
    pub fn ahead(&self, next: u64) -> (Duration, Duration) {
        let penalty = (self.sector_extra.0 + self.sector_extra.1) / 2;
        let opens = |k: u64| self.sector_blocks > 0 && (next + k).is_multiple_of(self.sector_blocks);
        let extra = |k| if opens(k) { penalty } else { Duration::ZERO };
        (extra(0), extra(1))
    }

    /// The same card without the sector penalty: what a scheduler that cannot hide 140 ms
    /// stalls inside a 70 ms deadline is measured on.
    #[must_use]
    pub const fn sd_card_without_sectors(seed: u64) -> Self {
        Self { sector_blocks: 0, ..Self::sd_card(seed) }
    }
}

/// How a device was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Writes bypass the page cache.
    pub direct: bool,
    /// Durable through `O_DSYNC` (else `fdatasync` after each write).
    pub dsync: bool,
    /// Writes are paced to the given timing.
    pub paced: Option<Pacing>,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let direct = if self.direct { "O_DIRECT" } else { "buffered (O_DIRECT refused)" };
        let sync = if self.dsync { "O_DSYNC" } else { "fdatasync" };
        write!(f, "{direct}, {sync}")?;
        let Some(p) = self.paced else {
            return write!(f, ", not paced");
        };
        write!(f, ", paced (emulated slow device): {}–{} ms a block", p.write.0.as_millis(), p.write.1.as_millis())?;
        if p.sector_blocks == 0 {
            return write!(f, ", no sector penalty");
        }
        write!(
            f,
            ", +{}–{} ms on the first write into each {}-block sector",
            p.sector_extra.0.as_millis(),
            p.sector_extra.1.as_millis(),
            p.sector_blocks
        )
    }
}

/// A device failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The path could not be opened for writing.
    #[error("cannot open {path} for writing: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The path is a non-empty regular file that is not a log of the block size asked for, and
    /// overwriting such a file was not asked for ([`crate::LogConfig::overwrite_any`]).
    #[error("refusing to overwrite {path}: a {len}-byte file, {found}")]
    WouldOverwrite {
        /// The path.
        path: PathBuf,
        /// The file's length.
        len: u64,
        /// What its start holds instead.
        found: Foreign,
    },
    /// A block write or its synchronisation failed; the block may be torn.
    #[error("writing block {block} of {path}: {source}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The block's index.
        block: u64,
        /// Why.
        source: io::Error,
    },
}

/// What a file that [`Device::open`] will not overwrite holds, as its first bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Foreign {
    /// No blocklog header at its start: an ordinary file.
    #[error("not a blocklog (no blocklog header at its start)")]
    NotALog,
    /// A blocklog of a format version this code does not write.
    #[error("a blocklog of format version {0}, where this writes version {v}", v = frame::VERSION)]
    Version(u8),
    /// A blocklog of blocks of another size than asked for.
    #[error("a blocklog of {found}-byte blocks, not of the {asked}-byte blocks asked for")]
    BlockSize {
        /// The file's blocks' size.
        found: usize,
        /// The size asked for.
        asked: usize,
    },
}

/// Whether opening `path` for a log of `block_size` blocks may overwrite what is there: a path
/// that does not exist, an empty file, a blocklog of the same block size (a log written again)
/// and a block device (the operator named it: its old blocks are told apart by the log id) may
/// be; a non-empty regular file that is anything else may not, since `open` truncates it and
/// the file is as likely a mistyped path as a log.
fn may_overwrite(path: &Path, block_size: usize) -> io::Result<Result<(), (u64, Foreign)>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ok(())),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_file() || meta.len() == 0 {
        return Ok(Ok(()));
    }
    let mut head = [0; frame::HEADER_LEN];
    let n = read_full_at(&File::open(path)?, &mut head, 0)?;
    let head = &head[..n];
    // The header is judged, not the checksum: a log whose writer was killed mid-block is still
    // a log, and is rewritten like one.
    let found = match frame::block_size_of(head) {
        None => Foreign::NotALog,
        Some(_) if head[4] != frame::VERSION => Foreign::Version(head[4]),
        Some(found) if found == block_size => return Ok(Ok(())),
        Some(found) => Foreign::BlockSize { found, asked: block_size },
    };
    Ok(Err((meta.len(), found)))
}

/// Reads at `at` until `buf` is full or the end; returns the bytes read.
pub(crate) fn read_full_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A buffer of one block at an address `O_DIRECT` accepts, without `unsafe`: a vector one
/// alignment longer than the block, used from its first aligned byte.
#[derive(Debug)]
pub struct BlockBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl BlockBuf {
    /// A zeroed buffer of `len` bytes.
    #[must_use]
    pub fn new(len: usize) -> Self {
        let raw = vec![0; len + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        Self { raw, start, len }
    }

    /// The block's bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The block's bytes, to fill.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// One device, written by one writer.
#[derive(Debug)]
pub struct Device {
    file: File,
    path: PathBuf,
    block_size: usize,
    info: DeviceInfo,
    rng: Option<ChaCha8Rng>,
}

impl Device {
    /// Opens `path` (created if missing; a file is truncated, a block device is written from its
    /// start) for whole-block writes of `block_size` bytes. A non-empty regular file that is not
    /// a blocklog of `block_size` blocks is refused ([`DeviceError::WouldOverwrite`]) unless
    /// `overwrite_any`.
    pub fn open(
        path: &Path,
        block_size: usize,
        pacing: Option<Pacing>,
        overwrite_any: bool,
    ) -> Result<Self, DeviceError> {
        if !overwrite_any {
            let check = may_overwrite(path, block_size)
                .map_err(|source| DeviceError::Open { path: path.to_owned(), source })?;
            if let Err((len, found)) = check {
                return Err(DeviceError::WouldOverwrite { path: path.to_owned(), len, found });
            }
        }
        let open = |flags: i32| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true).custom_flags(flags);
            let is_block_device = std::fs::metadata(path).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_block_device()
            });
            if !is_block_device {
                o.truncate(true);
            }
            o.open(path)
        };
        let err = |source| DeviceError::Open { path: path.to_owned(), source };
        // Most durable first; each refusal (EINVAL from a filesystem without the flag) drops one.
        let attempts = [(true, true), (true, false), (false, true), (false, false)];
        let mut last = None;
        for (direct, dsync) in attempts {
            let flags = if direct { libc::O_DIRECT } else { 0 } | if dsync { libc::O_DSYNC } else { 0 };
            match open(flags) {
                Ok(file) => {
                    let info = DeviceInfo { direct, dsync, paced: pacing };
                    let rng = pacing.map(|p| ChaCha8Rng::seed_from_u64(p.seed));
                    return Ok(Self { file, path: path.to_owned(), block_size, info, rng });
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
                Err(e) => return Err(err(e)),
            }
        }
        Err(err(last.unwrap_or_else(|| io::Error::other("no open mode was accepted"))))
    }

    /// How it was opened.
    #[must_use]
    pub fn info(&self) -> DeviceInfo {
        self.info
    }

    /// Writes `buf` as block `index`; returns once it is durable (and, when paced, once the
    /// paced time has passed).
    pub fn write_block(&mut self, index: u64, buf: &BlockBuf) -> Result<(), DeviceError> {
        let started = Instant::now();
        let offset = index * self.block_size as u64;
        let mut result = self.file.write_all_at(buf.bytes(), offset);
        if self.info.direct && result.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL)) {
            // The open took O_DIRECT but the write's alignment is refused (a device whose
            // logical block is larger than ours): carry on buffered, and say so.
            result = self.reopen_buffered().and_then(|()| self.file.write_all_at(buf.bytes(), offset));
        }
        if result.is_ok() && !self.info.dsync {
            result = self.file.sync_data();
        }
        result.map_err(|source| DeviceError::Write { path: self.path.clone(), block: index, source })?;
        if let (Some(p), Some(rng)) = (self.info.paced, self.rng.as_mut()) {
            let mut target = draw(rng, p.write);
            if p.sector_blocks > 0 && index.is_multiple_of(p.sector_blocks) {
                target += draw(rng, p.sector_extra);
            }
            if let Some(rest) = target.checked_sub(started.elapsed()) {
                std::thread::sleep(rest);
            }
        }
        Ok(())
    }

    fn reopen_buffered(&mut self) -> io::Result<()> {
        let flags = if self.info.dsync { libc::O_DSYNC } else { 0 };
        self.file = OpenOptions::new().read(true).write(true).custom_flags(flags).open(&self.path)?;
        self.info.direct = false;
        Ok(())
    }
}

/// A duration drawn uniformly from `[lo, hi]`.
fn draw(rng: &mut ChaCha8Rng, (lo, hi): (Duration, Duration)) -> Duration {
    if hi <= lo {
        return lo;
    }
    Duration::from_nanos(rng.random_range(lo.as_nanos() as u64..=hi.as_nanos() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sector_penalty_is_ahead_when_either_of_the_next_two_writes_opens_a_sector() {
        let card = Pacing::sd_card(0);
        let ms = |n| {
            let (first, second) = card.ahead(n);
            (first.as_millis(), second.as_millis())
        };
        assert_eq!([ms(0), ms(1), ms(254), ms(255), ms(256)], [(100, 0), (0, 0), (0, 0), (0, 100), (100, 0)]);
        assert_eq!(Pacing::sd_card_without_sectors(0).ahead(255), (Duration::ZERO, Duration::ZERO));
    }
}
