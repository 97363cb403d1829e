//! The blocklog driver against real files: every durable record read back once, in its
//! stream's order, under every policy; and a writer killed mid-run loses nothing it
//! acknowledged.

mod corpus;
mod crash;
mod overwrite;
mod policies;

use std::path::PathBuf;

/// A fresh directory under the system's temp dir (ext4 here, so O_DIRECT is exercised).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blocklog-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
