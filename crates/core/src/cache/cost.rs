//! What a read of the sensor field costs, and how long its messages travel (Yates §5.3,
//! Eqs 5.5 and 5.6; notes 000 §3.6).
//!
//! Each location talks to its nearest base station, at distance r. A one-way message costs
//! `p·r²` (radio energy) and takes `q·r` seconds, with p set so the cheapest location's message
//! costs 1 unit and q so the farthest location's takes 1 s. A read is a query and a reply: two
//! messages. Base stations reach the gateway for free, at once.

use super::neighbours::Point;

/// Per-location cost and delay of reading the field.
#[derive(Clone, Debug)]
pub struct FieldCost {
    /// Each location's distance to its nearest base station.
    r: Vec<f64>,
    /// Each location's nearest base station.
    station: Vec<usize>,
    p: f64,
    q: f64,
}

impl FieldCost {
    /// The costs of `locations` served by `stations`. `None` if either is empty or a location
    /// sits on a base station (the cheapest message would cost nothing, and p cannot be set).
    pub fn new(locations: &[Point], stations: &[Point]) -> Option<Self> {
        if stations.is_empty() || locations.is_empty() {
            return None;
        }
        let (r, station): (Vec<f64>, Vec<usize>) = locations
            .iter()
            .map(|l| {
                stations
                    .iter()
                    .enumerate()
                    .map(|(i, s)| ((0..3).map(|k| (l[k] - s[k]) * (l[k] - s[k])).sum::<f64>().sqrt(), i))
                    .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                    .expect("there are stations")
            })
            .unzip();
        let min = r.iter().copied().fold(f64::INFINITY, f64::min);
        let max = r.iter().copied().fold(0.0, f64::max);
        (min > 0.0).then(|| Self { p: 1.0 / (min * min), q: 1.0 / max, r, station })
    }

    /// The base station `location` talks to.
    pub fn station(&self, location: u32) -> usize {
        self.station[location as usize]
    }

    /// Eq 5.5 for a query and its reply: `2·p·r²` units.
    pub fn read_cost(&self, location: u32) -> f64 {
        let r = self.r[location as usize];
        2.0 * self.p * r * r
    }

    /// Eq 5.6 for one message: `q·r` seconds.
    pub fn one_way_delay_s(&self, location: u32) -> f64 {
        self.q * self.r[location as usize]
    }

    /// The mean read cost over all locations: what All misses pays per query when queries are
    /// spread evenly.
    pub fn mean_read_cost(&self) -> f64 {
        (0..self.r.len() as u32).map(|l| self.read_cost(l)).sum::<f64>() / self.r.len() as f64
    }

    /// Locations covered.
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// Whether no location is covered.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cheapest_message_costs_one_and_farthest_takes_a_second() {
        let locations = [[1.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]];
        let stations = [[0.0, 0.0, 0.0], [10.0, 0.0, 0.0]];
        let c = FieldCost::new(&locations, &stations).unwrap();
        assert_eq!(c.read_cost(0), 2.0, "a query and a reply at the minimum cost of 1 each");
        assert_eq!(c.read_cost(1), 18.0);
        assert_eq!(c.one_way_delay_s(1), 1.0);
        assert!((c.one_way_delay_s(0) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.station(2), 0);
        assert!(FieldCost::new(&[[0.0; 3]], &stations).is_none(), "a location on a station");
        assert!(FieldCost::new(&locations, &[]).is_none());
    }
}
