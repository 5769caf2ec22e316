//! The chart in a terminal: braille characters (2 × 4 dots a cell), a panel per metric,
//! every line fitted to the width asked (the terminal's by default).
//!
//! With colour each GPU has its own (the 16 basic ones, so 16- and 256-colour terminals
//! show the same), and a band from minimum to maximum is drawn dim under the mean
//! where points sum up several samples. Without colour (`--no-color`, `NO_COLOR`, or off
//! a terminal) GPUs are told apart by their pen: solid, dashed, dotted; bands are left
//! out, so that they are not read as lines. A cell crossed by two GPUs shows the one
//! drawn last.
//!
//! A panel: its caption, its rows with the y axis's labels at the top, middle and
//! bottom, then the time axis (`┬` at each round time) and the times under it.

use gpupeek::plotting::Window;

use crate::shape::{self, Panel, Pt};

/// How to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Columns of every line.
    pub width: usize,
    /// Lines of the whole chart.
    pub height: usize,
    /// ANSI colours.
    pub color: bool,
}

/// Lines above the panels: the title and the legend.
const HEADER: usize = 2;
/// Lines of a panel besides its rows: caption, axis, times.
const PANEL_EXTRA: usize = 3;

/// The default height for `panels` panels: 7 rows each.
pub fn default_height(panels: usize) -> usize {
    HEADER + panels.max(1) * (PANEL_EXTRA + 7)
}

/// The GPUs' colours (SGR foreground codes), in the window's order, repeated.
const COLORS: [u8; 8] = [34, 33, 32, 31, 35, 36, 94, 92];

/// Dots of a braille cell: `DOTS[row][column]`.
const DOTS: [[u8; 2]; 4] = [[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]];

/// Whether a GPU's pen sets the dot at column `x`, without colour: solid, dashed
/// (two dots on, two off), dotted (one in three).
fn pen(series: usize, x: usize, color: bool) -> bool {
    color
        || match series % 3 {
            0 => true,
            1 => x % 4 < 2,
            _ => x % 3 == 0,
        }
}

fn paint(color: bool, sgr: &str, text: &str) -> String {
    if color {
        format!("\x1b[{sgr}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// A cell's dots and who drew them.
#[derive(Clone, Copy, Default)]
struct Cell {
    line: u8,
    line_by: usize,
    band: u8,
    band_by: usize,
}

/// A grid of braille cells with dot coordinates: `x` to the right, `y` down.
struct Canvas {
    cols: usize,
    rows: usize,
    cells: Vec<Cell>,
}

impl Canvas {
    fn new(cols: usize, rows: usize) -> Canvas {
        Canvas {
            cols,
            rows,
            cells: vec![Cell::default(); cols * rows],
        }
    }

    fn set(&mut self, x: usize, y: usize, series: usize, band: bool) {
        if x >= self.cols * 2 || y >= self.rows * 4 {
            return;
        }
        let cell = &mut self.cells[y / 4 * self.cols + x / 2];
        let dot = DOTS[y % 4][x % 2];
        if band {
            cell.band |= dot;
            cell.band_by = series;
        } else {
            cell.line |= dot;
            cell.line_by = series;
        }
    }

    /// A straight line of dots from `a` to `b` (Bresenham).
    fn line(&mut self, a: (i64, i64), b: (i64, i64), series: usize, color: bool) {
        let (dx, dy) = ((b.0 - a.0).abs(), -(b.1 - a.1).abs());
        let (sx, sy) = ((b.0 - a.0).signum(), (b.1 - a.1).signum());
        let (mut x, mut y, mut err) = (a.0, a.1, dx + dy);
        loop {
            if x >= 0 && y >= 0 && pen(series, x as usize, color) {
                self.set(x as usize, y as usize, series, false);
            }
            if (x, y) == b {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Row `row` as text.
    fn row(&self, row: usize, color: bool) -> String {
        let mut out = String::new();
        for cell in &self.cells[row * self.cols..(row + 1) * self.cols] {
            let (bits, sgr) = match (cell.line, cell.band) {
                (0, 0) => (0, String::new()),
                (0, band) => (band, format!("2;{}", COLORS[cell.band_by % COLORS.len()])),
                (line, band) => (line | band, COLORS[cell.line_by % COLORS.len()].to_string()),
            };
            if bits == 0 {
                out.push(' ');
            } else {
                let c = char::from_u32(0x2800 + u32::from(bits)).unwrap_or(' ');
                out += &paint(color, &sgr, &c.to_string());
            }
        }
        out
    }
}

/// Cuts `s` (no escape sequences) to `width` characters.
fn cut(s: &str, width: usize) -> String {
    s.chars().take(width).collect()
}

/// The legend: a sample of each GPU's pen and its label, wrapped to `width`.
fn legend(window: &Window, opts: Options) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut used = 0;
    for (i, s) in window.series.iter().enumerate() {
        let mut sample = Canvas::new(2, 1);
        sample.line((0, 2), (3, 2), i, opts.color);
        let label = cut(&shape::label(s), opts.width.saturating_sub(4));
        let w = 2 + 1 + label.chars().count() + 2;
        if used > 0 && used + w > opts.width {
            lines.push(String::new());
            used = 0;
        }
        let last = lines.last_mut().expect("a line");
        *last += &format!("{} {label}  ", sample.row(0, opts.color));
        used += w;
    }
    lines.into_iter().map(|l| l.trim_end().to_owned()).collect()
}

/// The chart of `panels` over `window`, every line at most `opts.width` columns.
pub fn render(window: &Window, panels: &[Panel], opts: Options) -> String {
    let mut out = vec![cut(
        &format!("gpupeek — {}", shape::title(window)),
        opts.width,
    )];
    out.extend(legend(window, opts));
    let room = opts.height.saturating_sub(out.len()) / panels.len().max(1);
    let rows = room.saturating_sub(PANEL_EXTRA).max(2);
    for panel in panels {
        out.extend(render_panel(window, panel, rows, opts));
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

fn render_panel(window: &Window, panel: &Panel, rows: usize, opts: Options) -> Vec<String> {
    let (lo, hi) = panel.y;
    let labels = [hi, (lo + hi) / 2.0, lo].map(shape::value_label);
    let label_w = labels.iter().map(String::len).max().unwrap_or(1);
    // The label, a space and the axis; at least two columns of plot.
    let cols = opts.width.saturating_sub(label_w + 2).max(2);
    let (from, to) = shape::x_range(window);
    let x_of = |t: f64| ((t - from) / (to - from).max(1e-9) * (cols * 2 - 1) as f64).round() as i64;
    let dots_y = (rows * 4 - 1) as f64;
    let y_of = |v: f64| {
        let f = ((v - lo) / (hi - lo).max(1e-9)).clamp(0.0, 1.0);
        ((1.0 - f) * dots_y).round() as i64
    };
    let mut canvas = Canvas::new(cols, rows);
    if opts.color {
        for line in &panel.lines {
            for p in line.runs.iter().flatten().filter(|p| p.is_band()) {
                let x = x_of(p.t).max(0) as usize;
                for y in y_of(p.stat.max)..=y_of(p.stat.min) {
                    canvas.set(x, y as usize, line.series, true);
                }
            }
        }
    }
    for line in &panel.lines {
        for run in &line.runs {
            let at = |p: &Pt| (x_of(p.t), y_of(p.stat.mean));
            match &run[..] {
                [only] => canvas.line(at(only), at(only), line.series, true),
                _ => run
                    .windows(2)
                    .for_each(|w| canvas.line(at(&w[0]), at(&w[1]), line.series, opts.color)),
            }
        }
    }
    let mut out = vec![cut(&panel.caption(), opts.width)];
    for r in 0..rows {
        let label = match r {
            0 => &labels[0],
            _ if r == rows - 1 => &labels[2],
            _ if r == (rows - 1) / 2 && rows > 4 => &labels[1],
            _ => "",
        };
        let axis = if label.is_empty() { '│' } else { '┤' };
        out.push(format!(
            "{label:>label_w$} {axis}{}",
            canvas.row(r, opts.color)
        ));
    }
    out.extend(time_axis(from, to, cols, label_w));
    out
}

/// The time axis under a panel and the times under it.
fn time_axis(from: f64, to: f64, cols: usize, label_w: usize) -> [String; 2] {
    let mut axis: Vec<char> = std::iter::once('└')
        .chain(std::iter::repeat_n('─', cols))
        .collect();
    let mut times: Vec<char> = vec![' '; cols + 1];
    let mut free = 0;
    for (t, text) in shape::time_ticks(from, to, (cols / 12).max(2)) {
        let col = 1 + ((t - from) / (to - from).max(1e-9) * (cols - 1) as f64).round() as usize;
        let len = text.chars().count();
        let start = col.saturating_sub(len / 2).max(free);
        if col >= axis.len() || start + len > times.len() {
            continue;
        }
        axis[col] = '┬';
        times.splice(start..start + len, text.chars());
        free = start + len + 1;
    }
    let pad = " ".repeat(label_w + 1);
    [
        format!("{pad}{}", axis.into_iter().collect::<String>()),
        format!("{pad}{}", times.into_iter().collect::<String>())
            .trim_end()
            .to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::two_gpus;
    use gpupeek_model::history::Metric;

    fn chart(width: usize, color: bool) -> String {
        let w = two_gpus();
        let panels = shape::panels(&w, &[Metric::Utilization, Metric::MemoryUsed]);
        render(
            &w,
            &panels,
            Options {
                width,
                height: default_height(panels.len()),
                color,
            },
        )
    }

    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut esc = false;
        for c in s.chars() {
            match c {
                '\x1b' => esc = true,
                'm' if esc => esc = false,
                _ if esc => {}
                _ => out.push(c),
            }
        }
        out
    }

    #[test]
    fn every_line_fits_the_width() {
        assert_eq!(
            default_height(2),
            22,
            "2 plus 10 per panel, as --height's help says"
        );
        for width in [20, 40, 80, 200] {
            for color in [false, true] {
                let text = chart(width, color);
                for line in strip(&text).lines() {
                    assert!(line.chars().count() <= width, "{width}: {line:?}");
                }
                let lines = text.lines().count();
                assert!(lines <= default_height(2) + 1, "{width}: {text}");
                if width >= 80 {
                    assert_eq!(lines, default_height(2), "{text}");
                }
            }
        }
    }

    #[test]
    fn panels_have_captions_axes_and_braille() {
        let text = chart(80, false);
        assert!(!text.contains('\x1b'), "no colour asked");
        assert!(text.starts_with("gpupeek — node1 — "), "{text}");
        assert!(text.contains("[0] NVIDIA H100 80GB HBM3"));
        assert!(text.contains("GPU utilisation (%)\n") && text.contains("Memory used (MiB)\n"));
        assert!(text.contains("100 ┤"), "{text}");
        assert!(text.contains("┬") && text.contains("06:40"), "{text}");
        assert!(text.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)));
    }

    #[test]
    fn a_gap_breaks_the_line_and_a_band_is_dim_under_it() {
        let text = chart(200, true);
        assert!(text.contains("\x1b[2;33m"), "GPU 1's band, dim: {text}");
        // GPU 0 alone: its line has no dot in the columns of the gap at 50 s.
        let mut w = two_gpus();
        w.series.truncate(1);
        let panels = shape::panels(&w, &[Metric::Utilization]);
        let opts = Options {
            width: 130,
            height: 12,
            color: false,
        };
        let text = render(&w, &panels, opts);
        let plot: Vec<Vec<char>> = text
            .lines()
            .filter_map(|l| l.split_once(['┤', '│']))
            .map(|(_, dots)| dots.chars().collect())
            .collect();
        // 120 s over 125 columns (250 dots): 49 s is in column 61, 50 s (the gap) in 62,
        // 51 s in 63.
        let drawn = |c: usize| plot.iter().any(|r| r.get(c).is_some_and(|&ch| ch != ' '));
        assert!(
            drawn(61) && drawn(63),
            "points each side of the gap: {text}"
        );
        assert!(!drawn(62), "nothing at the gap: {text}");
    }
}
