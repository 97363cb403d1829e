//! Worker identities and weights, and the validated member list every placer keeps.

use std::fmt;

use crate::place::PlaceError;

/// A worker (core, hardware thread, connection, back-end): a dense small number chosen by the
/// driver. Load views are indexed by it, so drivers number workers from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub u32);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w{}", self.0)
    }
}

/// A worker's share weight: finite and greater than zero.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Weight(f64);

impl Weight {
    /// Weight 1, the default.
    pub const ONE: Self = Self(1.0);

    /// Checks a weight for `worker`: it must be finite and greater than zero.
    pub fn new(worker: WorkerId, w: f64) -> Result<Self, PlaceError> {
        if w.is_finite() && w > 0.0 { Ok(Self(w)) } else { Err(PlaceError::BadWeight { worker, weight: w }) }
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// One member of a placer's worker set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    /// Who.
    pub id: WorkerId,
    /// Share weight.
    pub weight: Weight,
}

/// A placer's workers: never empty, no duplicates, kept sorted by id so that every derived
/// structure (and so every placement) is independent of the order changes arrived in.
#[derive(Clone, Debug, PartialEq)]
pub struct Members {
    list: Vec<Member>,
}

impl Members {
    /// Workers with weight 1.
    pub fn new(ids: &[WorkerId]) -> Result<Self, PlaceError> {
        Self::weighted(ids.iter().map(|&id| (id, Weight::ONE)))
    }

    /// Workers with the given weights.
    pub fn weighted(it: impl IntoIterator<Item = (WorkerId, Weight)>) -> Result<Self, PlaceError> {
        let mut list: Vec<Member> = it.into_iter().map(|(id, weight)| Member { id, weight }).collect();
        if list.is_empty() {
            return Err(PlaceError::NoWorkers);
        }
        list.sort_by_key(|m| m.id);
        if let Some(w) = list.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(PlaceError::DuplicateWorker(w[0].id));
        }
        Ok(Self { list })
    }

    /// The members in id order.
    pub fn as_slice(&self) -> &[Member] {
        &self.list
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Always false: a member set is never empty. (Present for API symmetry with `len`.)
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The member's position in id order, if present.
    pub fn index_of(&self, id: WorkerId) -> Option<usize> {
        self.list.binary_search_by_key(&id, |m| m.id).ok()
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: WorkerId) -> bool {
        self.index_of(id).is_some()
    }

    /// The `i`-th member's id (in id order).
    pub fn id(&self, i: usize) -> WorkerId {
        self.list[i].id
    }

    /// Sum of weights.
    pub fn total_weight(&self) -> f64 {
        self.list.iter().map(|m| m.weight.get()).sum()
    }

    pub(crate) fn add(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError> {
        match self.list.binary_search_by_key(&id, |m| m.id) {
            Ok(_) => Err(PlaceError::DuplicateWorker(id)),
            Err(pos) => {
                self.list.insert(pos, Member { id, weight });
                Ok(())
            }
        }
    }

    pub(crate) fn remove(&mut self, id: WorkerId) -> Result<(), PlaceError> {
        let pos = self.index_of(id).ok_or(PlaceError::UnknownWorker(id))?;
        if self.list.len() == 1 {
            return Err(PlaceError::LastWorker(id));
        }
        self.list.remove(pos);
        Ok(())
    }

    pub(crate) fn set_weight(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError> {
        let pos = self.index_of(id).ok_or(PlaceError::UnknownWorker(id))?;
        self.list[pos].weight = weight;
        Ok(())
    }
}
