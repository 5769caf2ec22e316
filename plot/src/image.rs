//! The chart as an image, drawn with plotters: a title (host and time range), a legend
//! (a colour swatch per GPU), then a panel per metric, one under the other, sharing the
//! time axis. In a panel each GPU's mean is a line, broken where the GPU had no value,
//! over a translucent band from its minimum to its maximum where points sum up several
//! samples; a run of one point is a dot.
//!
//! Text is drawn with DejaVu Sans compiled into the program (plotters' `ab_glyph`
//! feature), so the PNG needs no fontconfig and no installed font; the SVG names the font
//! family and lets the viewer draw the text.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use gpupeek::plotting::Window;

use crate::shape::{self, Panel};

/// The GPUs' colours, in the window's order (matplotlib's "tab10"), repeated past ten.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the GPU at `i` in the window.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Height of the title and legend, pixels.
const HEADER: u32 = 64;

/// The default size for `panels` panels.
pub fn default_size(panels: usize) -> (u32, u32) {
    (1200, 100 + 260 * panels.max(1) as u32)
}

/// Makes "sans-serif" the compiled-in DejaVu Sans (once).
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error would mean the font bytes are not a font: text is then left out.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The chart as an SVG document.
pub fn svg(window: &Window, panels: &[Panel], size: (u32, u32)) -> Result<String, String> {
    register_font();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        draw(&root, window, panels).map_err(|e| format!("cannot draw the chart: {e}"))?;
        root.present()
            .map_err(|e| format!("cannot draw the chart: {e}"))?;
    }
    Ok(out)
}

/// The chart as a PNG file's bytes (8-bit RGB).
pub fn png(window: &Window, panels: &[Panel], size: (u32, u32)) -> Result<Vec<u8>, String> {
    register_font();
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        draw(&root, window, panels).map_err(|e| format!("cannot draw the chart: {e}"))?;
        root.present()
            .map_err(|e| format!("cannot draw the chart: {e}"))?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut w| w.write_image_data(&rgb))
        .map_err(|e| format!("cannot encode the PNG: {e}"))?;
    Ok(out)
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    window: &Window,
    panels: &[Panel],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER);
    // The title in 20 px, smaller when that would not fit the width.
    let title = format!("gpupeek — {}", shape::title(window));
    let room = header.dim_in_pixel().0.saturating_sub(24);
    let mut size = 20;
    while size > 10
        && header
            .estimate_text_size(&title, &("sans-serif", size).into_font().color(&BLACK))?
            .0
            > room
    {
        size -= 1;
    }
    header.draw(&Text::new(
        title,
        (12, 8),
        ("sans-serif", size).into_font().color(&BLACK),
    ))?;
    legend(&header, window)?;
    if panels.is_empty() {
        return Ok(());
    }
    for (panel, area) in panels.iter().zip(body.split_evenly((panels.len(), 1))) {
        draw_panel(&area, window, panel)?;
    }
    Ok(())
}

/// A swatch and a label per GPU, in a row under the title.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, window: &Window) -> DrawResult<DB> {
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    let (mut x, mut y) = (14i32, 38i32);
    let width = area.dim_in_pixel().0 as i32;
    for (i, s) in window.series.iter().enumerate() {
        let label = shape::label(s);
        let w = area.estimate_text_size(&label, &font)?.0 as i32 + 44;
        if x + w > width && x > 14 {
            (x, y) = (14, y + 18);
        }
        area.draw(&Rectangle::new(
            [(x, y + 6), (x + 22, y + 10)],
            color(i).filled(),
        ))?;
        area.draw(&Text::new(label, (x + 28, y), font.clone()))?;
        x += w;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    window: &Window,
    panel: &Panel,
) -> DrawResult<DB> {
    let (from, to) = shape::x_range(window);
    let width = area.dim_in_pixel().0 as usize;
    let ticks = shape::time_ticks(from, to, (width / 110).max(2));
    let mut chart = ChartBuilder::on(area)
        .margin_left(12)
        .margin_right(24)
        .margin_bottom(6)
        .caption(panel.caption(), ("sans-serif", 17).into_font())
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(from..to, panel.y.0..panel.y.1)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(215, 215, 215))
        // Round local times, not plotters' round numbers of seconds: drawn below.
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(6)
        .y_label_formatter(&|v| shape::value_label(*v))
        .y_desc(panel.metric.unit())
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    let (lo, hi) = panel.y;
    let base = area.get_base_pixel();
    let style = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (t, label) in &ticks {
        chart.draw_series(LineSeries::new(
            [(*t, lo), (*t, hi)],
            RGBColor(215, 215, 215),
        ))?;
        let (x, y) = chart.backend_coord(&(*t, lo));
        area.draw(&Text::new(
            label.clone(),
            (x - base.0, y - base.1 + 6),
            style.clone(),
        ))?;
    }
    for line in &panel.lines {
        let c = color(line.series);
        for run in &line.runs {
            if run.iter().any(|p| p.is_band()) {
                let edge: Vec<(f64, f64)> = run
                    .iter()
                    .map(|p| (p.t, p.stat.max))
                    .chain(run.iter().rev().map(|p| (p.t, p.stat.min)))
                    .collect();
                chart.draw_series(std::iter::once(Polygon::new(edge, c.mix(0.22).filled())))?;
            }
        }
    }
    for line in &panel.lines {
        let c = color(line.series);
        for run in &line.runs {
            if let [only] = run[..] {
                chart.draw_series(std::iter::once(Circle::new(
                    (only.t, only.stat.mean),
                    2,
                    c.filled(),
                )))?;
            } else {
                chart.draw_series(LineSeries::new(
                    run.iter().map(|p| (p.t, p.stat.mean)),
                    c.stroke_width(2),
                ))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::two_gpus;
    use gpupeek_model::history::Metric;

    fn stroke(i: usize) -> String {
        let RGBColor(r, g, b) = color(i);
        format!("stroke=\"#{r:02X}{g:02X}{b:02X}\"")
    }

    #[test]
    fn svg_has_a_panel_per_metric_a_line_per_run_and_a_band_per_bucket_run() {
        let w = two_gpus();
        let metrics = [Metric::Utilization, Metric::PowerDraw];
        let panels = shape::panels(&w, &metrics);
        let svg = svg(&w, &panels, (900, 600)).unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
            .map(|(text, _)| text.trim())
            .collect();
        for caption in [
            "GPU utilisation (%)",
            "Power draw (W)",
            "[0] NVIDIA H100 80GB HBM3",
        ] {
            assert_eq!(
                texts.iter().filter(|t| **t == caption).count(),
                1,
                "{caption}"
            );
        }
        assert!(
            texts[0].starts_with("gpupeek — node1 — 2025-11-25"),
            "{texts:?}"
        );
        assert!(
            texts.contains(&"100") && texts.contains(&"06:41:00"),
            "{texts:?}"
        );
        let polylines = |i| {
            svg.lines()
                .filter(|l| l.contains("<polyline") && l.contains(&stroke(i)))
                .count()
        };
        assert_eq!(
            polylines(0),
            2 * 2,
            "GPU 0: two runs (a gap) in each of two panels"
        );
        assert_eq!(polylines(1), 2, "GPU 1: one run per panel");
        assert_eq!(
            svg.matches("<polygon").count(),
            2,
            "GPU 1's band in each panel"
        );
    }

    #[test]
    fn png_is_the_requested_size_and_draws_the_lines() {
        let w = two_gpus();
        let panels = shape::panels(&w, &[Metric::Utilization]);
        let bytes = png(&w, &panels, (640, 360)).unwrap();
        if let Some(dir) = std::env::var_os("PLOT_DUMP") {
            let all = shape::panels(&w, &Metric::ALL[..4]);
            let big = png(&w, &all, default_size(4)).unwrap();
            std::fs::write(std::path::Path::new(&dir).join("unit.png"), big).unwrap();
        }
        let decoder = png::Decoder::new(&bytes[..]);
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (640, 360));
        let RGBColor(r, g, b) = color(0);
        let gpu0 = buf.chunks(3).filter(|p| p == &[r, g, b]).count();
        assert!(gpu0 > 200, "GPU 0's line: {gpu0} pixels");
        let dark = buf.chunks(3).filter(|p| p.iter().all(|&c| c < 80)).count();
        assert!(dark > 500, "text and axes: {dark} pixels");
    }
}
