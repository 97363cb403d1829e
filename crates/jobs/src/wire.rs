//! What coordinator, workers and submitters say to each other over HTTP: the JSON bodies, and
//! the framing of a map's result (one part per reduce partition).
//!
//! Routes (every one needs `Authorization: Bearer TOKEN`):
//!
//! | route | who | what |
//! |---|---|---|
//! | `POST /v1/apps?name=…&program=…&arg=…&reduces=R&deadline=SECS&split=BYTES` | submitter | body: the input; answers [`Submitted`] |
//! | `GET /v1/apps`, `GET /v1/apps/{id}` | submitter | [`AppView`]s |
//! | `GET /v1/apps/{id}/output` | submitter | the output, once done |
//! | `POST /v1/apps/{id}/cancel` | submitter | cancels it; answers its [`AppView`] |
//! | `GET /v1/workers` | submitter | [`WorkerView`]s |
//! | `POST /v1/poll` | worker | body [`Poll`]; answers [`Grant`], or 204 when there is nothing |
//! | `GET /v1/attempts/{id}/input?worker=W` | worker | the task's input |
//! | `POST /v1/attempts/{id}/result?worker=W` | worker | body: the result ([`encode_parts`]) |
//! | `POST /v1/attempts/{id}/failed?worker=W` | worker | body: why, as text |
//! | `GET /metrics` | Prometheus | counters and gauges |

use serde::{Deserialize, Serialize};

/// A worker's poll.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Poll {
    /// Its name, unique among the workers (a restarted worker keeps its name).
    pub worker: String,
    /// Its site, whose data store it shares with the site's other workers (Ko et al.).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Splits its site's store evicted since its last poll.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<u32>,
    /// The programs it can run: the built-in ones it has and `exec:NAME` for each command its
    /// operator allow-listed. Only applications of these are handed to it. Absent (a worker
    /// from before this field): the built-in programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs: Option<Vec<String>>,
}

/// A task handed to a worker.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Grant {
    /// The attempt, which every later request names.
    pub attempt: u64,
    /// The application.
    pub app: u32,
    /// `map` or `reduce`.
    pub phase: String,
    /// The task's number in its phase.
    pub index: u32,
    /// The program's name ([`crate::programs::Program::parse`]).
    pub program: String,
    /// Its argument.
    pub arg: String,
    /// The application's reduce partitions (0: map-only).
    pub reduces: u32,
    /// A map's split, by the hash of its bytes: a site's store may hold it already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<u32>,
}

/// The answer to a submission.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Submitted {
    /// The application's number.
    pub app: u32,
    /// Map tasks (splits of the input).
    pub maps: u32,
    /// Reduce tasks.
    pub reduces: u32,
    /// Why it cannot go ahead yet, if no live worker can run its program (it waits for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// An application as a submitter sees it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AppView {
    /// Its number.
    pub app: u32,
    /// Its name.
    pub name: String,
    /// Its program.
    pub program: String,
    /// Maps done, of how many.
    pub maps: (u32, u32),
    /// Reduces done, of how many.
    pub reduces: (u32, u32),
    /// Attempts out now.
    pub running: u32,
    /// Attempts handed out in all, and of those repeats (replicas or re-issues).
    pub attempts: u64,
    /// Attempts that repeated a task already out.
    pub repeats: u64,
    /// Results refused because another attempt had done the task.
    pub duplicates: u64,
    /// Seconds left before its deadline (negative: past it).
    pub to_deadline: f64,
    /// Its laxity now (Dou Eq. 3.9), seconds; absent once done.
    pub laxity: Option<f64>,
    /// Seconds from submission to its last task done, once done.
    pub took: Option<f64>,
    /// `running`, `met` or `missed`; or `failed` (a task failed the same way too many times
    /// in a row) or `cancelled`.
    pub verdict: String,
    /// Why: what the failing task's workers said, or, while it runs, why no live worker can
    /// run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A worker as the coordinator sees it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkerView {
    /// Its name.
    pub name: String,
    /// The attempt it holds, if any.
    pub holding: Option<u64>,
    /// Presumed failed (it held an attempt far past its expected time), not heard from since.
    pub presumed: bool,
    /// Its estimated failure rate, per second (Dou §3.4.2).
    pub rate: f64,
    /// Its estimated recovery time, seconds.
    pub recovery: f64,
}

/// Why a body of parts cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("result body: {0}")]
pub struct PartsError(pub String);

/// A map's result: for each part, its length (u64, little-endian) and its bytes.
pub fn encode_parts(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// Reads [`encode_parts`]' framing: exactly `count` parts, nothing after them.
pub fn decode_parts(body: &[u8], count: usize) -> Result<Vec<&[u8]>, PartsError> {
    let mut parts = Vec::with_capacity(count);
    let mut rest = body;
    for i in 0..count {
        let Some((len, tail)) = rest.split_first_chunk::<8>() else {
            return Err(PartsError(format!("part {i} of {count} is missing its length")));
        };
        let len = u64::from_le_bytes(*len);
        if len > tail.len() as u64 {
            return Err(PartsError(format!("part {i} says {len} bytes, {} remain", tail.len())));
        }
        let (part, tail) = tail.split_at(len as usize);
        parts.push(part);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(PartsError(format!("{} bytes after the last of {count} parts", rest.len())));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip_and_bad_framing_is_refused() {
        let parts = vec![b"a\t1\n".to_vec(), Vec::new(), b"zz".to_vec()];
        let body = encode_parts(&parts);
        let back: Vec<Vec<u8>> = decode_parts(&body, 3).unwrap().into_iter().map(<[u8]>::to_vec).collect();
        assert_eq!(back, parts);
        assert!(decode_parts(&body, 2).is_err());
        assert!(decode_parts(&body, 4).is_err());
        assert!(decode_parts(&body[..body.len() - 1], 3).is_err());
        assert!(decode_parts(&[0xff; 8], 1).is_err());
    }
}
