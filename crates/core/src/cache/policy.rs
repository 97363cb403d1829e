//! The seven lookup policies of Yates §5.2 (notes 000 §3.5), and when an entry is fresh enough.

use std::fmt;
use std::str::FromStr;

use crate::Nanos;

/// How a query is answered: from the cache, from neighbouring locations' entries, by waiting on
/// a read already under way, or by reading the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lookup {
    /// T = ∞: an entry, once loaded, is never refreshed. A bound, not a practical policy; the
    /// thesis assumes every location already has one (a driver may preload them).
    AllHits,
    /// T = 0: nothing is kept; every query reads the source. The same as no cache.
    AllMisses,
    /// Only the queried key; a miss reads the source, even if a read of the same key is already
    /// under way (no blocking).
    Simple,
    /// As [`Lookup::Simple`], but a query for a key whose read is under way waits for that read
    /// (request coalescing).
    Piggyback,
    /// The key, then its neighbours: the neighbour entry sensed most recently answers.
    GreedyAge,
    /// The key, then its neighbours: the nearest neighbour entry answers.
    GreedyDistance,
    /// The key, then its neighbours: the median of three neighbour entries drawn at random (one
    /// drawn at random if there are only one or two).
    MedianOf3,
}

impl Lookup {
    /// The seven, in the order of the thesis's tables.
    pub const ALL: [Self; 7] = [
        Self::AllHits,
        Self::AllMisses,
        Self::Simple,
        Self::GreedyAge,
        Self::GreedyDistance,
        Self::MedianOf3,
        Self::Piggyback,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::AllHits => "all-hits",
            Self::AllMisses => "all-misses",
            Self::Simple => "simple",
            Self::Piggyback => "piggyback",
            Self::GreedyAge => "greedy-age",
            Self::GreedyDistance => "greedy-distance",
            Self::MedianOf3 => "median-of-3",
        }
    }

    /// Whether a query waits on a read already under way instead of starting another. Yates
    /// Eq 5.1: for these, a key is read at most once per T, so the source sees at most |N|/T
    /// reads a second.
    pub fn coalesces(self) -> bool {
        !matches!(self, Self::Simple | Self::AllMisses)
    }

    /// Whether neighbours' entries may answer.
    pub fn approximates(self) -> bool {
        matches!(self, Self::GreedyAge | Self::GreedyDistance | Self::MedianOf3)
    }
}

impl fmt::Display for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of the seven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no lookup policy `{0}`; there are: all-hits, all-misses, simple, piggyback, greedy-age, greedy-distance, median-of-3"
)]
pub struct UnknownLookup(pub String);

impl FromStr for Lookup {
    type Err = UnknownLookup;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|l| l.name() == s).ok_or_else(|| UnknownLookup(s.to_owned()))
    }
}

/// Where an entry's age is counted from.
///
/// Yates §5.2 keeps an entry "for T seconds" once loaded, which reads as age from the load
/// time ([`AgeFrom::Load`], the default). Notes 000 §5.4 finds the smallest-T table fits
/// better if age counted from the sensor's timestamp ([`AgeFrom::Sensor`]): a value that spent
/// a second reaching the gateway then lives a second less.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgeFrom {
    /// From when the entry was loaded into the cache.
    #[default]
    Load,
    /// From when the sensor (or origin) produced the value.
    Sensor,
}

impl FromStr for AgeFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "load" => Ok(Self::Load),
            "sensor" => Ok(Self::Sensor),
            _ => Err(format!(
                "age from `{s}`: say `load` (when the gateway loaded the value) or `sensor` (when it was sensed)"
            )),
        }
    }
}

/// How long a value stays fresh: the cache's T, and where its age counts from. (A reader's own
/// bound is on the age since sensing; see `Cache::query`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// The cache's T; `None` for never stale ([`Lookup::AllHits`]).
    pub ttl: Option<Nanos>,
    /// Where age is counted from.
    pub age_from: AgeFrom,
}
