//! Where the coordinator's state lives: a database holding the log of what happened
//! (submissions, polls and their answers, the programs each worker runs, uploads, failures and
//! the applications they gave up, cancellations) and the data (splits, map
//! outputs, reduce outputs) — SQLite embedded by default, or PostgreSQL through the same
//! calls, for several coordinators sharing one database.
//!
//! The board is rebuilt by replaying the log (`Board::replay_poll` and the same uploads), so
//! the log, not a snapshot, is the truth. Each change is one transaction taken with the write
//! lock first (SQLite's `BEGIN IMMEDIATE`; a transaction-scoped advisory lock in PostgreSQL):
//! a coordinator reads whatever others appended since it last looked, applies it, decides,
//! appends, and commits, so two coordinators on one database never decide on stale state, and
//! an attempt is handed out once.
//!
//! SQLite runs in WAL mode with `synchronous=NORMAL` by default: a killed coordinator loses
//! nothing it answered (the WAL is written before the answer), and a power cut may lose the
//! last transactions; `--sync full` makes every commit durable. PostgreSQL commits as its
//! server is configured.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The PostgreSQL advisory lock every change takes (any number; the same for every
/// coordinator of one database).
const PG_LOCK: i64 = 0x5357_4A4F_4253; // "SWJOBS"
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
        /// Each split's id (a hash of its bytes), for sites' stores.
        #[serde(default)]
        splits: Vec<u32>,
    },
    /// A worker said which site it is at.
    Site {
        /// The worker.
        worker: u32,
        /// The site's number.
        site: u32,
        /// The site's name.
        name: String,
    },
    /// A site's store evicted splits.
    Evicted {
        /// The site.
        site: u32,
        /// The splits.
        files: Vec<u32>,
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
        /// The board gave the application up with it (its task had failed the same way too
        /// many times in a row). Logged, so that a replay gives up exactly where this did.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        gave_up: bool,
    },
    /// The programs a worker says it runs (logged when it first says, and when its list
    /// changes).
    Programs {
        /// The worker.
        worker: u32,
        /// The programs, by name (`wordcount`, `exec:NAME`, …).
        programs: Vec<String>,
    },
    /// A submitter cancelled an application.
    Cancel {
        /// The application.
        app: u32,
        /// When, ns since the Unix epoch.
        at: u64,
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
    /// The database said no.
    #[error("database {db}: {why}")]
    Db {
        /// Which database (a path, or a URL without its password).
        db: String,
        /// What it said.
        why: String,
    },
    /// A log entry that does not read (written by another version, or damaged).
    #[error("database {db}: log entry {seq} does not read: {why}")]
    Corrupt {
        /// Which database.
        db: String,
        /// The entry.
        seq: u64,
        /// Why.
        why: String,
    },
    /// A `--db` that names no database this build knows.
    #[error("--db {0:?}: give sqlite:PATH or postgres://USER@HOST:PORT/DATABASE")]
    Url(String),
}

/// How hard SQLite pushes commits to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Sync {
    /// WAL with `synchronous=NORMAL`: nothing is lost when the process dies.
    #[default]
    Normal,
    /// `synchronous=FULL`: nothing is lost when the machine does.
    Full,
}

/// Where the state is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL.
    Postgres(String),
}

impl Location {
    /// Reads `sqlite:PATH` or `postgres://…` (also `postgresql://…`).
    pub fn parse(db: &str) -> Result<Self, StoreError> {
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            return Ok(Self::Postgres(db.to_string()));
        }
        match db.strip_prefix("sqlite:") {
            Some(p) if !p.is_empty() => Ok(Self::Sqlite(PathBuf::from(p))),
            _ => Err(StoreError::Url(db.to_string())),
        }
    }

    /// How it is named in messages: a URL loses its password.
    pub fn name(&self) -> String {
        match self {
            Self::Sqlite(p) => p.display().to_string(),
            Self::Postgres(url) => match (url.find("://"), url.rfind('@')) {
                (Some(s), Some(at)) if at > s => {
                    let user = &url[s + 3..at];
                    let user = user.split(':').next().unwrap_or("");
                    format!("{}{user}@{}", &url[..s + 3], &url[at + 1..])
                }
                _ => url.clone(),
            },
        }
    }
}

enum Conn {
    Sqlite(Connection),
    Postgres(Pg),
}

/// A PostgreSQL client that is safe to drop anywhere.
///
/// PostgreSQL's blocking client closes its connection by blocking on a runtime of its own,
/// which panics on a thread that drives a tokio runtime (and aborts the process if that thread
/// was already unwinding). Whichever thread drops the last handle of a store (the server's, a
/// connection task's, a test's), a client dropped inside a runtime is closed on a thread of its
/// own. The jobs server's `serve` put its own last handle on the blocking pool, but a
/// connection task could still hold the router, and with it the store, after `serve` returned:
/// a CI run aborted there (`tests/postgres.rs`, a tokio-rt-worker dropping the router).
struct Pg(Option<Box<postgres::Client>>);

impl std::ops::Deref for Pg {
    type Target = postgres::Client;
    fn deref(&self) -> &postgres::Client {
        self.0.as_deref().expect("taken only when dropped")
    }
}

impl std::ops::DerefMut for Pg {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        self.0.as_deref_mut().expect("taken only when dropped")
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        if let Some(client) = self.0.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            // Joined, so the connection is closed when the drop returns, as elsewhere.
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}

/// The database.
pub struct Store {
    at: Location,
    db: String,
    write: Conn,
    read: Reader,
    sync: Sync,
    /// The last log entry this coordinator has applied.
    seen: u64,
}

const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    app INTEGER NOT NULL, kind INTEGER NOT NULL, idx INTEGER NOT NULL, part INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (app, kind, idx, part)
);
";

const PG_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (seq BIGSERIAL PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    app INTEGER NOT NULL, kind INTEGER NOT NULL, idx INTEGER NOT NULL, part INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (app, kind, idx, part)
);
";

fn db_err(db: &str) -> impl Fn(&dyn std::fmt::Display) -> StoreError + '_ {
    move |e| StoreError::Db { db: db.to_string(), why: e.to_string() }
}

fn connect(at: &Location, sync: Sync) -> Result<Conn, StoreError> {
    let err = db_err_owned(at.name());
    match at {
        Location::Sqlite(path) => {
            let open = || -> Result<Connection, rusqlite::Error> {
                let c = Connection::open(path)?;
                c.busy_timeout(std::time::Duration::from_secs(30))?;
                c.pragma_update(None, "journal_mode", "WAL")?;
                c.pragma_update(None, "synchronous", if sync == Sync::Full { "FULL" } else { "NORMAL" })?;
                Ok(c)
            };
            open().map(Conn::Sqlite).map_err(|e| err(&e))
        }
        Location::Postgres(url) => postgres::Client::connect(url, postgres::NoTls)
            .map(|c| Conn::Postgres(Pg(Some(Box::new(c)))))
            .map_err(|e| err(&e)),
    }
}

fn db_err_owned(db: String) -> impl Fn(&dyn std::fmt::Display) -> StoreError {
    move |e| StoreError::Db { db: db.clone(), why: e.to_string() }
}

impl Store {
    /// Opens (creating if need be) the SQLite database at `path`.
    pub fn open(path: &Path, sync: Sync) -> Result<Self, StoreError> {
        Self::connect(&Location::Sqlite(path.to_path_buf()), sync)
    }

    /// Opens the database at `at`, creating its tables if need be.
    pub fn connect(at: &Location, sync: Sync) -> Result<Self, StoreError> {
        let db = at.name();
        let err = db_err_owned(db.clone());
        let mut write = connect(at, sync)?;
        match &mut write {
            Conn::Sqlite(c) => c.execute_batch(SQLITE_SCHEMA).map_err(|e| err(&e))?,
            Conn::Postgres(c) => {
                // Two coordinators creating the tables at once would collide in the catalogue.
                let mut tx = c.transaction().map_err(|e| err(&e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PG_LOCK]).map_err(|e| err(&e))?;
                tx.batch_execute(PG_SCHEMA).map_err(|e| err(&e))?;
                tx.commit().map_err(|e| err(&e))?;
            }
        }
        let read = Reader { db: db.clone(), conn: connect(at, sync)? };
        Ok(Self { at: at.clone(), db, write, read, sync, seen: 0 })
    }

    /// This store's reader of blobs.
    pub fn reader(&mut self) -> &mut Reader {
        &mut self.read
    }

    /// Another reader of blobs, with a connection of its own, so that large reads need not
    /// wait for (or hold up) the coordinator's changes.
    pub fn open_reader(&self) -> Result<Reader, StoreError> {
        Ok(Reader { db: self.db.clone(), conn: connect(&self.at, self.sync)? })
    }

    /// The database, as named in messages.
    pub fn name(&self) -> &str {
        &self.db
    }

    /// Runs one change: takes the write lock, hands `f` the log entries others appended since
    /// this store last looked, and commits the entries and blobs `f` returns. When `f` fails,
    /// nothing is written.
    pub fn change<R, E>(
        &mut self,
        f: impl FnOnce(Vec<Event>) -> Result<(R, Vec<Event>, Vec<Blob>), E>,
    ) -> Result<Result<R, E>, StoreError> {
        let err = db_err(&self.db);
        match &mut self.write {
            Conn::Sqlite(c) => {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(&e))?;
                let news = sqlite_since(&tx, &self.db, self.seen)?;
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
                    let mut put = tx.prepare_cached("INSERT INTO events (body) VALUES (?1)").map_err(|e| err(&e))?;
                    for e in &events {
                        let body = serde_json::to_string(e).expect("events serialise");
                        put.execute(params![body]).map_err(|e| err(&e))?;
                        seen = tx.last_insert_rowid() as u64;
                    }
                    let mut blob = tx
                        .prepare_cached(
                            "INSERT OR REPLACE INTO blobs (app, kind, idx, part, data) VALUES (?1, ?2, ?3, ?4, ?5)",
                        )
                        .map_err(|e| err(&e))?;
                    for b in &blobs {
                        blob.execute(params![b.app, b.kind as u8, b.index, b.part, b.data]).map_err(|e| err(&e))?;
                    }
                }
                tx.commit().map_err(|e| err(&e))?;
                self.seen = seen;
                Ok(Ok(r))
            }
            Conn::Postgres(c) => {
                let mut tx = c.transaction().map_err(|e| err(&e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PG_LOCK]).map_err(|e| err(&e))?;
                let news = pg_since(&mut tx, &self.db, self.seen)?;
                let mut seen = news.last().map_or(self.seen, |n| n.0);
                let (r, events, blobs) = match f(news.into_iter().map(|n| n.1).collect()) {
                    Ok(x) => x,
                    Err(e) => {
                        self.seen = seen;
                        return Ok(Err(e));
                    }
                };
                for e in &events {
                    let body = serde_json::to_string(e).expect("events serialise");
                    let row = tx
                        .query_one("INSERT INTO events (body) VALUES ($1) RETURNING seq", &[&body])
                        .map_err(|e| err(&e))?;
                    seen = row.get::<_, i64>(0) as u64;
                }
                for b in &blobs {
                    tx.execute(
                        "INSERT INTO blobs (app, kind, idx, part, data) VALUES ($1, $2, $3, $4, $5) \
                         ON CONFLICT (app, kind, idx, part) DO UPDATE SET data = EXCLUDED.data",
                        &[&(b.app as i32), &(b.kind as i32), &(b.index as i32), &(b.part as i32), &b.data],
                    )
                    .map_err(|e| err(&e))?;
                }
                tx.commit().map_err(|e| err(&e))?;
                self.seen = seen;
                Ok(Ok(r))
            }
        }
    }

    /// Every log entry, from the first, for a coordinator starting up.
    pub fn replay(&mut self) -> Result<Vec<Event>, StoreError> {
        self.seen = 0;
        self.catch_up()
    }

    /// The log entries appended (by any coordinator) since this store last looked, without
    /// taking the write lock: what a read must apply to answer with the database's state.
    pub fn catch_up(&mut self) -> Result<Vec<Event>, StoreError> {
        let news = match &mut self.write {
            Conn::Sqlite(c) => sqlite_since(c, &self.db, self.seen)?,
            Conn::Postgres(c) => pg_since(&mut **c, &self.db, self.seen)?,
        };
        self.seen = news.last().map_or(self.seen, |n| n.0);
        Ok(news.into_iter().map(|n| n.1).collect())
    }
}

fn decode(db: &str, seq: u64, body: &str) -> Result<(u64, Event), StoreError> {
    serde_json::from_str(body).map(|e| (seq, e)).map_err(|e| StoreError::Corrupt {
        db: db.to_string(),
        seq,
        why: e.to_string(),
    })
}

fn sqlite_since(c: &Connection, db: &str, after: u64) -> Result<Vec<(u64, Event)>, StoreError> {
    let err = db_err(db);
    let mut q = c.prepare_cached("SELECT seq, body FROM events WHERE seq > ?1 ORDER BY seq").map_err(|e| err(&e))?;
    let rows = q
        .query_map(params![after as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)))
        .map_err(|e| err(&e))?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, body) = row.map_err(|e| err(&e))?;
        out.push(decode(db, seq, &body)?);
    }
    Ok(out)
}

fn pg_since(c: &mut impl postgres::GenericClient, db: &str, after: u64) -> Result<Vec<(u64, Event)>, StoreError> {
    let err = db_err(db);
    let rows =
        c.query("SELECT seq, body FROM events WHERE seq > $1 ORDER BY seq", &[&(after as i64)]).map_err(|e| err(&e))?;
    rows.iter().map(|r| decode(db, r.get::<_, i64>(0) as u64, r.get::<_, &str>(1))).collect()
}

/// A connection that reads blobs.
pub struct Reader {
    db: String,
    conn: Conn,
}

impl Reader {
    /// One blob, if it is there.
    pub fn blob(&mut self, app: u32, kind: Kind, index: u32, part: u32) -> Result<Option<Vec<u8>>, StoreError> {
        let err = db_err(&self.db);
        match &mut self.conn {
            Conn::Sqlite(c) => c
                .prepare_cached("SELECT data FROM blobs WHERE app = ?1 AND kind = ?2 AND idx = ?3 AND part = ?4")
                .and_then(|mut q| q.query_row(params![app, kind as u8, index, part], |r| r.get(0)).optional())
                .map_err(|e| err(&e)),
            Conn::Postgres(c) => c
                .query_opt(
                    "SELECT data FROM blobs WHERE app = $1 AND kind = $2 AND idx = $3 AND part = $4",
                    &[&(app as i32), &(kind as i32), &(index as i32), &(part as i32)],
                )
                .map(|r| r.map(|r| r.get::<_, Vec<u8>>(0)))
                .map_err(|e| err(&e)),
        }
    }

    /// Every blob of one kind and part of an application, in index order (a reduce's input:
    /// its partition of every map's output).
    pub fn blobs(&mut self, app: u32, kind: Kind, part: u32) -> Result<Vec<Vec<u8>>, StoreError> {
        let err = db_err(&self.db);
        match &mut self.conn {
            Conn::Sqlite(c) => {
                let mut q = c
                    .prepare_cached("SELECT data FROM blobs WHERE app = ?1 AND kind = ?2 AND part = ?3 ORDER BY idx")
                    .map_err(|e| err(&e))?;
                let rows = q.query_map(params![app, kind as u8, part], |r| r.get(0)).map_err(|e| err(&e))?;
                rows.collect::<Result<_, _>>().map_err(|e| err(&e))
            }
            Conn::Postgres(c) => c
                .query(
                    "SELECT data FROM blobs WHERE app = $1 AND kind = $2 AND part = $3 ORDER BY idx",
                    &[&(app as i32), &(kind as i32), &(part as i32)],
                )
                .map(|rows| rows.iter().map(|r| r.get::<_, Vec<u8>>(0)).collect())
                .map_err(|e| err(&e)),
        }
    }
}
