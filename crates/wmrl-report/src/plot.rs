//! PNG line and scatter plots (plotters' bitmap backend).
//!
//! Text is rendered with a font compiled into the binary (Ubuntu Light from
//! `epaint_default_fonts`), so plots work on a bare machine without fontconfig.
//! Files are written atomically like every other run artefact.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::{Error, Result};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeriesStyle {
    /// A polyline through the points (default).
    #[default]
    Line,
    /// A polyline with a marker at every point.
    LineWithMarkers,
    /// Markers only.
    Points,
    /// A thin dashed-looking grey reference line (e.g. the diagonal of a reliability plot).
    Reference,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points in drawing order; non-finite points are skipped.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn (default: [`SeriesStyle::Line`]).
    pub style: SeriesStyle,
    /// A shaded band around the series, one `(low, high)` per point (e.g.
    /// mean ± standard error over seeds); empty for none.
    pub band: Vec<(f64, f64)>,
}

impl Series {
    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            style: SeriesStyle::Line,
            band: Vec::new(),
        }
    }

    /// The same series with a shaded band, one `(low, high)` per point
    /// (points without a finite band are left out of it).
    pub fn with_band(mut self, band: Vec<(f64, f64)>) -> Self {
        self.band = band;
        self
    }

    /// The same series drawn in `style`.
    pub fn with_style(mut self, style: SeriesStyle) -> Self {
        self.style = style;
        self
    }
}

/// A chart with axes, a title, a legend and any number of series.
#[derive(Debug, Clone)]
pub struct LinePlot {
    /// Title above the chart.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Series drawn in order, coloured from a fixed palette.
    pub series: Vec<Series>,
    /// Fixed y range; `None` fits the data (default: `None`).
    pub y_range: Option<(f64, f64)>,
    /// Image size in pixels (default: 960 × 600).
    pub size: (u32, u32),
}

impl Default for LinePlot {
    fn default() -> Self {
        Self {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: Vec::new(),
            y_range: None,
            size: (960, 600),
        }
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The bytes are a valid TrueType font shipped by the crate; a
            // failure here would be a packaging bug, surfaced when drawing text.
            let _ = plotters::style::register_font(
                "sans-serif",
                style,
                epaint_default_fonts::UBUNTU_LIGHT,
            );
        }
    });
}

fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if (hi - lo).abs() < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// A tick label short enough to read: 150k rather than 150000.0, 40
/// rather than 40.0.
fn tick_label(v: &f64) -> String {
    fn trimmed(x: f64, decimals: usize) -> String {
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trimmed(v / 1e6, 2))
    } else if a >= 1e4 {
        format!("{}k", trimmed(v / 1e3, 1))
    } else if a == 0.0 || a >= 1e-2 {
        trimmed(*v, 3)
    } else {
        format!("{v:.1e}")
    }
}

impl LinePlot {
    /// Draws the plot into `path` (PNG), atomically.
    pub fn write_png(&self, path: &Path) -> Result<()> {
        register_fonts();
        let tmp = crate::atomic::temp_path(path).with_extension("png");
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
        }
        self.draw(&tmp).map_err(|message| Error::Plot {
            path: path.to_path_buf(),
            message,
        })?;
        std::fs::rename(&tmp, path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    fn draw(&self, file: &Path) -> std::result::Result<(), String> {
        let finite = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().copied())
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let (x_lo, x_hi) = finite().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (x, _)| {
            (lo.min(x), hi.max(x))
        });
        let band_ys = self.series.iter().flat_map(|s| {
            s.band
                .iter()
                .flat_map(|&(lo, hi)| [lo, hi])
                .filter(|y| y.is_finite())
        });
        let (y_lo, y_hi) = finite()
            .map(|(_, y)| y)
            .chain(band_ys)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
                (lo.min(y), hi.max(y))
            });
        let (x_lo, x_hi) = padded(x_lo, x_hi);
        let (y_lo, y_hi) = self.y_range.unwrap_or_else(|| padded(y_lo, y_hi));

        let root = BitMapBackend::new(file, self.size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 24))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 15))
            .x_label_formatter(&tick_label)
            .y_label_formatter(&tick_label)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| e.to_string())?;

        // Reference lines are grey; the others take the palette in order.
        let colours: Vec<RGBColor> = self
            .series
            .iter()
            .scan(0, |next, series| {
                Some(if series.style == SeriesStyle::Reference {
                    RGBColor(150, 150, 150)
                } else {
                    *next += 1;
                    PALETTE[(*next - 1) % PALETTE.len()]
                })
            })
            .collect();
        // Bands first, so that no band veils another series' line.
        for (series, colour) in self.series.iter().zip(&colours) {
            let band: Vec<((f64, f64), (f64, f64))> = series
                .points
                .iter()
                .zip(&series.band)
                .filter(|((x, _), (lo, hi))| x.is_finite() && lo.is_finite() && hi.is_finite())
                .map(|(&(x, _), &(lo, hi))| ((x, lo), (x, hi)))
                .collect();
            if band.len() >= 2 {
                // Upper edge left to right, lower edge back.
                let outline: Vec<(f64, f64)> = band
                    .iter()
                    .map(|&(_, hi)| hi)
                    .chain(band.iter().rev().map(|&(lo, _)| lo))
                    .collect();
                chart
                    .draw_series(std::iter::once(Polygon::new(
                        outline,
                        colour.mix(0.18).filled(),
                    )))
                    .map_err(|e| e.to_string())?;
            }
        }
        for (series, &colour) in self.series.iter().zip(&colours) {
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            let stroke = match series.style {
                SeriesStyle::Reference => colour.stroke_width(1),
                _ => colour.stroke_width(2),
            };
            let anno = match series.style {
                SeriesStyle::Points => chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                    .map_err(|e| e.to_string())?,
                SeriesStyle::LineWithMarkers => {
                    chart
                        .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                        .map_err(|e| e.to_string())?;
                    chart
                        .draw_series(LineSeries::new(points, stroke))
                        .map_err(|e| e.to_string())?
                }
                SeriesStyle::Line | SeriesStyle::Reference => chart
                    .draw_series(LineSeries::new(points, stroke))
                    .map_err(|e| e.to_string())?,
            };
            if !series.name.is_empty() {
                anno.label(series.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
                });
            }
        }
        if self.series.iter().any(|s| !s.name.is_empty()) {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png_with_ink_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.png");
        let plot = LinePlot {
            title: "loss".into(),
            x_label: "step".into(),
            y_label: "loss".into(),
            series: vec![
                Series::line(
                    "train",
                    (0..50)
                        .map(|i| (i as f64, 1.0 / (1.0 + i as f64)))
                        .collect(),
                ),
                Series::line("diag", vec![(0.0, 0.0), (49.0, 1.0)])
                    .with_style(SeriesStyle::Reference),
                Series::line("nan is skipped", vec![(1.0, f64::NAN), (2.0, 0.5)])
                    .with_style(SeriesStyle::Points),
            ],
            ..Default::default()
        };
        plot.write_png(&path).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (960, 600));
        let dark = img
            .pixels()
            .filter(|p| p.0.iter().all(|&c| c < 100))
            .count();
        assert!(dark > 500, "expected axes and text, got {dark} dark pixels");
    }

    #[test]
    fn tick_labels_are_short() {
        let cases = [
            (150_000.0, "150k"),
            (12_500.0, "12.5k"),
            (2_500_000.0, "2.5M"),
            (40.0, "40"),
            (0.25, "0.25"),
            (0.0, "0"),
            (-3.5, "-3.5"),
            (0.0004, "4.0e-4"),
        ];
        for (v, want) in cases {
            assert_eq!(tick_label(&v), want, "{v}");
        }
    }

    /// Pixels of the band's tint: the first palette colour at 18% on white.
    fn tinted_pixels(path: &Path) -> usize {
        let img = image::open(path).unwrap().to_rgb8();
        img.pixels()
            .filter(|p| {
                let [r, g, b] = p.0;
                (205..=225).contains(&r) && (222..=238).contains(&g) && (235..=248).contains(&b)
            })
            .count()
    }

    #[test]
    fn a_band_shades_the_area_around_its_series() {
        let dir = tempfile::tempdir().unwrap();
        let points: Vec<(f64, f64)> = (0..20).map(|i| (i as f64, 0.5)).collect();
        let plot = |band: Vec<(f64, f64)>, name: &str| {
            let path = dir.path().join(name);
            LinePlot {
                series: vec![Series::line("mean", points.clone()).with_band(band)],
                y_range: Some((0.0, 1.0)),
                ..Default::default()
            }
            .write_png(&path)
            .unwrap();
            tinted_pixels(&path)
        };
        let without = plot(Vec::new(), "plain.png");
        // A band of 0.5 ± 0.2 fills about 40% of the plotting area.
        let with = plot(vec![(0.3, 0.7); 20], "band.png");
        assert!(without < 100, "no band, yet {without} tinted pixels");
        assert!(
            with > 50_000,
            "expected a shaded band, got {with} tinted pixels"
        );
    }
}
