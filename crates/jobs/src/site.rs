//! A site's data store (Ko et al.'s per-site data server): the splits its workers have read,
//! kept in a folder the site's workers share, the least recently used evicted past a
//! capacity. Workers report the evictions with their next poll, so that the coordinator's
//! table of what each site holds stays true.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One site's store.
#[derive(Clone, Debug)]
pub struct SiteStore {
    dir: PathBuf,
    capacity: u64,
}

impl SiteStore {
    /// The store in `dir` (created if need be), holding at most `capacity` bytes.
    pub fn open(dir: &Path, capacity: u64) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { dir: dir.to_path_buf(), capacity })
    }

    fn path(&self, id: u32) -> PathBuf {
        self.dir.join(format!("{id:08x}.split"))
    }

    /// The split `id`, if the store holds it (and it is then the most recently used).
    pub fn get(&self, id: u32) -> Option<Vec<u8>> {
        let path = self.path(id);
        // Another worker of the site may evict it at any moment: a failed read is a miss.
        let data = std::fs::read(&path).ok()?;
        if let Ok(f) = std::fs::File::options().write(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(data)
    }

    /// Keeps split `id`, then evicts the least recently used others until the store fits its
    /// capacity; returns what it evicted.
    pub fn put(&self, id: u32, data: &[u8]) -> io::Result<Vec<u32>> {
        // Written aside and renamed, so a worker of the site never reads half a split.
        let tmp = self.dir.join(format!(".{id:08x}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, self.path(id))?;
        let mut held: Vec<(SystemTime, u64, u32)> = Vec::new();
        for entry in std::fs::read_dir(&self.dir)?.flatten() {
            let name = entry.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_suffix(".split")) else { continue };
            let (Ok(other), Ok(meta)) = (u32::from_str_radix(hex, 16), entry.metadata()) else { continue };
            held.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), other));
        }
        held.sort();
        let mut total: u64 = held.iter().map(|h| h.1).sum();
        let mut evicted = Vec::new();
        for (_, len, other) in held {
            if total <= self.capacity {
                break;
            }
            if other != id && std::fs::remove_file(self.path(other)).is_ok() {
                total -= len;
                evicted.push(other);
            }
        }
        Ok(evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_are_reported() {
        let dir = std::env::temp_dir().join(format!("switchyard-site-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = SiteStore::open(&dir, 250).unwrap();
        assert_eq!(s.put(1, &[0; 100]).unwrap(), Vec::<u32>::new());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(s.put(2, &[0; 100]).unwrap(), Vec::<u32>::new());
        std::thread::sleep(std::time::Duration::from_millis(20));
        // 1 read again: 2 is now the least recently used.
        assert_eq!(s.get(1).unwrap().len(), 100);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(s.put(3, &[0; 100]).unwrap(), vec![2]);
        assert!(s.get(2).is_none() && s.get(1).is_some() && s.get(3).is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
