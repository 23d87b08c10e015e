//! The chart's geometry (pixels), colours and font.

pub(super) const WIDTH: f64 = 1100.0;
pub(super) const LEFT: f64 = 90.0;
pub(super) const RIGHT: f64 = 30.0;
pub(super) const PANEL_H: f64 = 200.0;
pub(super) const GAP: f64 = 80.0;
pub(super) const COLD: &str = "#3b6fb6";
pub(super) const WARM: &str = "#e08a2c";
pub(super) const SIZE: &str = "#5a9e6f";
pub(super) const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
