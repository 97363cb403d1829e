//! A published claim set beside ours, for the reproductions that compare ratios (Guo's
//! chapters in the simulator).

/// A published claim beside ours.
#[derive(Clone, Debug)]
pub struct Claim {
    /// What is claimed.
    pub claim: &'static str,
    /// Where.
    pub source: &'static str,
    /// The published figure as a ratio, if the source gives a number.
    pub published: Option<f64>,
    /// The published figure as the source words it.
    pub published_text: &'static str,
    /// Ours as a ratio, if we model it.
    pub ours: Option<f64>,
    /// Why ours differs.
    pub why: &'static str,
    /// Whether the figures are gains, printed as `+x%` (else as the ratio itself, e.g. a share).
    pub gain: bool,
}

impl Claim {
    /// Ours over published, minus one, when both are numbers.
    pub fn difference(&self) -> Option<f64> {
        Some(self.ours? / self.published? - 1.0)
    }

    /// Ours as printed: `+x%` for a gain, the ratio for a share, or "not modelled".
    pub fn ours_text(&self) -> String {
        match self.ours {
            None => "not modelled".into(),
            Some(o) if self.gain => format!("{:+.1}%", (o - 1.0) * 100.0),
            Some(o) => format!("{o:.3}"),
        }
    }
}
