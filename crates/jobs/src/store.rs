//! Where the coordinator's state lives: an embedded SQLite database holding the log of what
//! happened (submissions, polls and their answers, uploads, failures) and the data (splits,
//! map outputs, reduce outputs).
//!
//! The board is rebuilt by replaying the log (`Board::replay_poll` and the same uploads), so
//! the log, not a snapshot, is the truth. Each change is one transaction taken with the write
//! lock first (`BEGIN IMMEDIATE`): a coordinator reads whatever others appended since it last
//! looked, applies it, decides, appends, and commits, so two coordinators on one database
//! never decide on stale state, and an attempt is handed out once.
//!
//! The database runs in WAL mode with `synchronous=NORMAL` by default: a killed coordinator
//! loses nothing it answered (the WAL is written before the answer), and a power cut may lose
//! the last transactions; `--sync full` makes every commit durable.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// What kind of data a blob is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A split of the input (`index` = map, `part` = 0).
    Split = 0,
    /// A map's output for one partition (`index` = map, `part` = partition).
    MapOut = 1,
    /// A reduce's output (`index` = partition, `part` = 0).
    ReduceOut = 2,
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "e", rename_all = "snake_case")]
pub enum Event {
    /// An application was submitted.
    Submit {
        /// Its number.
        app: u32,
        /// When, ns since the Unix epoch.
        at: u64,
        /// Its name.
        name: String,
        /// Its program and argument.
        program: String,
        /// The program's argument.
        arg: String,
        /// Map tasks.
        maps: u32,
        /// Reduce tasks.
        reduces: u32,
        /// When it is due, ns since the Unix epoch.
        deadline: u64,
        /// Seconds one task is expected to take, if the submitter said.
        estimate: Option<f64>,
    },
    /// A worker was first heard from.
    Worker {
        /// The number the board knows it by.
        id: u32,
        /// Its name.
        name: String,
    },
    /// A poll and its answer.
    Poll {
        /// The worker.
        worker: u32,
        /// When.
        at: u64,
        /// The task handed out: application, phase (0 map, 1 reduce), index.
        task: Option<(u32, u8, u32)>,
    },
    /// An upload the board answered (accepted, or a duplicate).
    Upload {
        /// The worker.
        worker: u32,
        /// The attempt.
        attempt: u64,
        /// When.
        at: u64,
    },
    /// A failure a worker reported.
    Failed {
        /// The worker.
        worker: u32,
        /// The attempt.
        attempt: u64,
        /// When.
        at: u64,
        /// What it said.
        why: String,
    },
}

/// A blob to write with a transaction.
pub struct Blob {
    /// Its application.
    pub app: u32,
    /// What it is.
    pub kind: Kind,
    /// Its map or partition.
    pub index: u32,
    /// Its partition, for map outputs.
    pub part: u32,
    /// The bytes.
    pub data: Vec<u8>,
}

/// What went wrong with the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite said no.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A log entry that does not read (written by another version, or damaged).
    #[error("database {path}: log entry {seq} does not read: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The entry.
        seq: u64,
        /// Why.
        why: String,
    },
}

/// How hard commits are pushed to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Sync {
    /// WAL with `synchronous=NORMAL`: nothing is lost when the process dies.
    #[default]
    Normal,
    /// `synchronous=FULL`: nothing is lost when the machine does.
    Full,
}

/// The database.
pub struct Store {
    path: PathBuf,
    write: Connection,
    read: Reader,
    sync: Sync,
    /// The last log entry this coordinator has applied.
    seen: u64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    app INTEGER NOT NULL, kind INTEGER NOT NULL, idx INTEGER NOT NULL, part INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (app, kind, idx, part)
);
";

impl Store {
    /// Opens (creating if need be) the database at `path`.
    pub fn open(path: &Path, sync: Sync) -> Result<Self, StoreError> {
        let err = |source| StoreError::Sqlite { path: path.to_path_buf(), source };
        let write = connect(path, sync).map_err(err)?;
        write.execute_batch(SCHEMA).map_err(err)?;
        let read = Reader { path: path.to_path_buf(), conn: connect(path, sync).map_err(err)? };
        Ok(Self { path: path.to_path_buf(), write, read, sync, seen: 0 })
    }

    /// This store's reader of blobs.
    pub fn reader(&self) -> &Reader {
        &self.read
    }

    /// Another reader of blobs, with a connection of its own, so that large reads need not
    /// wait for (or hold up) the coordinator's changes.
    pub fn open_reader(&self) -> Result<Reader, StoreError> {
        let conn = connect(&self.path, self.sync).map_err(self.err())?;
        Ok(Reader { path: self.path.clone(), conn })
    }

    /// The database's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite { path: self.path.clone(), source }
    }

    /// Runs one change: takes the write lock, hands `f` the log entries others appended since
    /// this store last looked, and commits the entries and blobs `f` returns. When `f` fails,
    /// nothing is written.
    pub fn change<R, E>(
        &mut self,
        f: impl FnOnce(Vec<Event>) -> Result<(R, Vec<Event>, Vec<Blob>), E>,
    ) -> Result<Result<R, E>, StoreError> {
        let path = self.path.clone();
        let err = |source| StoreError::Sqlite { path: path.clone(), source };
        let tx = self.write.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        let news = Self::since(&tx, &path, self.seen)?;
        let mut seen = news.last().map_or(self.seen, |n| n.0);
        let (r, events, blobs) = match f(news.into_iter().map(|n| n.1).collect()) {
            Ok(x) => x,
            Err(e) => {
                // What others wrote has been applied all the same.
                self.seen = seen;
                return Ok(Err(e));
            }
        };
        {
            let mut put = tx.prepare_cached("INSERT INTO events (body) VALUES (?1)").map_err(err)?;
            for e in &events {
                let body = serde_json::to_string(e).expect("events serialise");
                put.execute(params![body]).map_err(err)?;
                seen = tx.last_insert_rowid() as u64;
            }
            let mut blob = tx
                .prepare_cached("INSERT OR REPLACE INTO blobs (app, kind, idx, part, data) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(err)?;
            for b in &blobs {
                blob.execute(params![b.app, b.kind as u8, b.index, b.part, b.data]).map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        self.seen = seen;
        Ok(Ok(r))
    }

    /// Every log entry, from the first, for a coordinator starting up.
    pub fn replay(&mut self) -> Result<Vec<Event>, StoreError> {
        let news = Self::since(&self.write, &self.path, 0)?;
        self.seen = news.last().map_or(0, |n| n.0);
        Ok(news.into_iter().map(|n| n.1).collect())
    }

    fn since(c: &Connection, path: &Path, after: u64) -> Result<Vec<(u64, Event)>, StoreError> {
        let err = |source| StoreError::Sqlite { path: path.to_path_buf(), source };
        let mut q = c.prepare_cached("SELECT seq, body FROM events WHERE seq > ?1 ORDER BY seq").map_err(err)?;
        let rows = q
            .query_map(params![after as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)))
            .map_err(err)?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body) = row.map_err(err)?;
            let e = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                path: path.to_path_buf(),
                seq,
                why: e.to_string(),
            })?;
            out.push((seq, e));
        }
        Ok(out)
    }
}

fn connect(path: &Path, sync: Sync) -> Result<Connection, rusqlite::Error> {
    let c = Connection::open(path)?;
    c.busy_timeout(std::time::Duration::from_secs(30))?;
    c.pragma_update(None, "journal_mode", "WAL")?;
    c.pragma_update(None, "synchronous", if sync == Sync::Full { "FULL" } else { "NORMAL" })?;
    Ok(c)
}

/// A connection that reads blobs.
pub struct Reader {
    path: PathBuf,
    conn: Connection,
}

impl Reader {
    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite { path: self.path.clone(), source }
    }

    /// One blob, if it is there.
    pub fn blob(&self, app: u32, kind: Kind, index: u32, part: u32) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .prepare_cached("SELECT data FROM blobs WHERE app = ?1 AND kind = ?2 AND idx = ?3 AND part = ?4")
            .and_then(|mut q| q.query_row(params![app, kind as u8, index, part], |r| r.get(0)).optional())
            .map_err(self.err())
    }

    /// Every blob of one kind and part of an application, in index order (a reduce's input:
    /// its partition of every map's output).
    pub fn blobs(&self, app: u32, kind: Kind, part: u32) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut q = self
            .conn
            .prepare_cached("SELECT data FROM blobs WHERE app = ?1 AND kind = ?2 AND part = ?3 ORDER BY idx")
            .map_err(self.err())?;
        let rows = q.query_map(params![app, kind as u8, part], |r| r.get(0)).map_err(self.err())?;
        rows.collect::<Result<_, _>>().map_err(self.err())
    }
}
