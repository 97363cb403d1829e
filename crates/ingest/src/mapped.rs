//! A capture file's bytes for the [`SliceReader`](crate::SliceReader): the file mapped into
//! memory, so that a capture larger than memory is paged in as it is read and no payload is
//! copied; or, where a file cannot be mapped (a pipe, a special file), read whole.

use std::fs::File;
use std::io::{self, BufReader, Read};

/// A capture's bytes, mapped or read.
pub enum CaptureBytes {
    /// The file, mapped.
    Mapped(memmap2::Mmap),
    /// The file, read whole (it could not be mapped).
    Read(Vec<u8>),
}

impl CaptureBytes {
    /// Maps `file`, or reads it whole where it cannot be mapped.
    ///
    /// Inspect finished captures: another process truncating the file while it is mapped would
    /// make reads past the new end fault (SIGBUS). A capture still being appended to is safe;
    /// what was mapped is what is read.
    pub fn open(file: &File) -> io::Result<Self> {
        // SAFETY: the map is only read, and lives no longer than the bytes it backs; the
        // truncation hazard above is the caller's to avoid, as the doc says.
        match unsafe { memmap2::Mmap::map(file) } {
            Ok(map) => Ok(Self::Mapped(map)),
            Err(_) => {
                let mut bytes = Vec::new();
                BufReader::new(file).read_to_end(&mut bytes)?;
                Ok(Self::Read(bytes))
            }
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Read(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_maps_to_its_bytes_and_a_pipe_is_read_whole() {
        let path = std::env::temp_dir().join(format!("switchyard-mapped-{}", std::process::id()));
        std::fs::write(&path, b"\xd4\xc3\xb2\xa1 and the rest").unwrap();
        let mapped = CaptureBytes::open(&File::open(&path).unwrap()).unwrap();
        assert!(matches!(mapped, CaptureBytes::Mapped(_)));
        assert_eq!(mapped.bytes(), b"\xd4\xc3\xb2\xa1 and the rest");
        std::fs::remove_file(&path).unwrap();

        let (reader, writer) = io::pipe().unwrap();
        let writer = std::thread::spawn(move || {
            let mut w = writer;
            io::Write::write_all(&mut w, b"through a pipe").unwrap();
        });
        let piped = CaptureBytes::open(&File::from(std::os::fd::OwnedFd::from(reader))).unwrap();
        writer.join().unwrap();
        assert!(matches!(piped, CaptureBytes::Read(_)));
        assert_eq!(piped.bytes(), b"through a pipe");
    }
}
