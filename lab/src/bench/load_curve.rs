//! Row 5: the load factor vs insert-failure curve. A `Growth::Fixed`
//! filter is offered new keys in steps of 1% of its slots (0.25% above
//! 90%), from empty to 100% of its slots; each step records how many of its inserts failed and
//! the load reached. A failed insert leaves the filter unchanged, so the
//! run goes on past the first failure.

use super::common::{uniform_key, Layout};
use super::Config;
use koel::Growth;

/// One step of the curve.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CurvePoint {
    /// Inserts offered so far / slots.
    pub offered_load: f64,
    /// `len / slots` after the step.
    pub load: f64,
    /// Failed inserts in this step / inserts in this step.
    pub step_failure_rate: f64,
    /// Failed inserts so far / offered so far.
    pub cumulative_failure_rate: f64,
}

/// The curve of one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadCurve {
    /// The layout's name.
    pub layout: String,
    /// Tag slots of the table.
    pub slots: u64,
    /// Load at the first failed insert (`None` if none failed).
    pub first_failure_load: Option<f64>,
    /// Highest load reached.
    pub max_load: f64,
    /// One point per step.
    pub points: Vec<CurvePoint>,
}

/// Step ends, in 1/400ths of the slots: steps of 1% up to 90%, then of
/// 0.25% where the failures start.
fn step_ends() -> impl Iterator<Item = u64> {
    (1..=90).map(|p| p * 4).chain((361..=400).map(|q| q as u64))
}

/// Steps of the curve (points are one more: the empty start).
pub const STEPS: usize = 90 + 40;

/// The curve for both layouts, each on a filter sized for `items`.
///
/// # Errors
///
/// A filter cannot be allocated.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<LoadCurve>> {
    let mut curves = Vec::new();
    for layout in Layout::ALL {
        let filter = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
        let slots = filter.capacity() as u64;
        let mut offered = 0u64;
        let mut failed = 0u64;
        let mut first_failure_load = None;
        let mut points = vec![CurvePoint {
            offered_load: 0.0,
            load: 0.0,
            step_failure_rate: 0.0,
            cumulative_failure_rate: 0.0,
        }];
        for quarter in step_ends() {
            let end = slots * quarter / 400;
            let mut step_failed = 0u64;
            let step_len = end - offered;
            while offered < end {
                let key = uniform_key(cfg.seed ^ 0x10ad, offered);
                offered += 1;
                if filter.insert(&key).is_err() {
                    step_failed += 1;
                    first_failure_load.get_or_insert(filter.load_factor());
                }
            }
            failed += step_failed;
            points.push(CurvePoint {
                offered_load: offered as f64 / slots as f64,
                load: filter.load_factor(),
                step_failure_rate: step_failed as f64 / step_len.max(1) as f64,
                cumulative_failure_rate: failed as f64 / offered.max(1) as f64,
            });
        }
        curves.push(LoadCurve {
            layout: layout.name().to_string(),
            slots,
            first_failure_load,
            max_load: filter.load_factor(),
            points,
        });
    }
    Ok(curves)
}

impl LoadCurve {
    /// The point at `offered` load (the first at or past it).
    pub fn at(&self, offered: f64) -> Option<&CurvePoint> {
        self.points
            .iter()
            .find(|p| p.offered_load >= offered - 1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_rise_to_exactly_all_slots_finer_above_ninety_percent() {
        let ends: Vec<u64> = step_ends().collect();
        assert_eq!(ends.len(), STEPS);
        assert!(ends.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*ends.last().unwrap(), 400);
        assert_eq!(ends[89], 360, "1% steps up to 90%");
        assert_eq!(ends[90] - ends[89], 1, "then 0.25%");
    }
}
