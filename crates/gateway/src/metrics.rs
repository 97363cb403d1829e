//! Counters served at `/metrics` in the Prometheus (OpenMetrics) text format.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A whole-number counter.
pub(crate) type Count = Counter;
/// A counter of fractional amounts (cost, deviation).
pub(crate) type Amount = Counter<f64, AtomicU64>;
/// A whole number that goes up and down.
pub(crate) type Level = Gauge;

/// A registry and its text rendering.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// A counter named `name` (rendered `name_total`).
    pub(crate) fn count(&mut self, name: &str, help: &str) -> Count {
        let c = Count::default();
        self.registry.register(name, help, c.clone());
        c
    }

    /// A fractional counter named `name` (rendered `name_total`).
    pub(crate) fn amount(&mut self, name: &str, help: &str) -> Amount {
        let c = Amount::default();
        self.registry.register(name, help, c.clone());
        c
    }

    /// A gauge named `name`.
    pub(crate) fn level(&mut self, name: &str, help: &str) -> Level {
        let g = Level::default();
        self.registry.register(name, help, g.clone());
        g
    }

    /// A family of metrics of kind `M` told apart by labels (e.g. one per origin).
    pub(crate) fn family<M>(&mut self, name: &str, help: &str) -> Family<Vec<(String, String)>, M>
    where
        M: prometheus_client::metrics::TypedMetric
            + prometheus_client::encoding::EncodeMetric
            + Default
            + Clone
            + Send
            + Sync
            + std::fmt::Debug
            + 'static,
    {
        let f = Family::<Vec<(String, String)>, M>::default();
        self.registry.register(name, help, f.clone());
        f
    }

    /// The text a scraper reads.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
