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

/// `help` without its closing full stop: prometheus_client ends every HELP line with one of its
/// own, so a help text written as a sentence would be rendered ending in "..".
fn sentence(help: &str) -> &str {
    help.trim_end_matches('.')
}

/// A registry and its text rendering.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// A counter named `name` (rendered `name_total`).
    pub(crate) fn count(&mut self, name: &str, help: &str) -> Count {
        let c = Count::default();
        self.registry.register(name, sentence(help), c.clone());
        c
    }

    /// A fractional counter named `name` (rendered `name_total`).
    pub(crate) fn amount(&mut self, name: &str, help: &str) -> Amount {
        let c = Amount::default();
        self.registry.register(name, sentence(help), c.clone());
        c
    }

    /// A gauge named `name`.
    pub(crate) fn level(&mut self, name: &str, help: &str) -> Level {
        let g = Level::default();
        self.registry.register(name, sentence(help), g.clone());
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
        self.registry.register(name, sentence(help), f.clone());
        f
    }

    /// The text a scraper reads.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lines_end_in_one_full_stop() {
        let mut m = Metrics::default();
        m.count("reads", "Reads made.").inc();
        m.level("held", "Bytes held");
        let text = m.render();
        assert!(text.contains("# HELP reads Reads made.\n"), "{text}");
        assert!(text.contains("# HELP held Bytes held.\n"), "{text}");
        assert!(!text.contains(".."), "{text}");
    }
}
