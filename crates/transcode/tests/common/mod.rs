//! What the transcoding tests share.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// An output the test can read after the run: the pool writes each stream into one, and the
/// test keeps a clone to compare the bytes.
#[derive(Clone, Default)]
pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One [`Shared`] output per stream, and the same outputs as the pool takes them.
pub(crate) fn outputs(streams: usize) -> (Vec<Shared>, Vec<Box<dyn Write + Send>>) {
    let shared: Vec<Shared> = (0..streams).map(|_| Shared::default()).collect();
    let boxed = shared.iter().map(|s| Box::new(s.clone()) as Box<dyn Write + Send>).collect();
    (shared, boxed)
}
