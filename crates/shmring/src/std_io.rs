//! The blocking ends as `std::io::Read` and `std::io::Write`, so that anything written for a
//! file or a pipe (a pcap writer, a `BufReader`, `std::io::copy`) runs over a ring unchanged.
//!
//! Errors are [`RingError`]s inside `std::io::Error` (see its `From`), except that a writer
//! that died without closing is, for a reader, an `UnexpectedEof`: the stream was cut short,
//! which a parser should report as such rather than as a broken pipe.

use std::io;

use crate::{Reader, RingError, Writer};

impl io::Read for Reader {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        Self::read(self, dst).map_err(|e| match e {
            RingError::PeerGone => io::Error::new(io::ErrorKind::UnexpectedEof, e),
            e => e.into(),
        })
    }
}

impl io::Write for Writer {
    fn write(&mut self, src: &[u8]) -> io::Result<usize> {
        Ok(Self::write(self, src)?)
    }

    /// Nothing to do: every write is published to the reader before it returns.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
