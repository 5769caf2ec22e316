//! Drawing: the title, the daemon's state when it is not live, the GPU panel, the host
//! line, the process table and the bottom line, and the dialogs over them. Every piece
//! of text is cut and padded to its cell in terminal columns first ([`crate::text`]), so
//! nothing is cut mid-character at any width; below [`FULL_GPU_LINES`] rows for the GPUs
//! each GPU takes one line instead of two.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::app::{App, Column, Dialog, GpuRow, ProcRow};
use crate::text::{self, bar, bytes, cut, left, right, spark};

/// Table rows kept visible under the GPU panel when the terminal is tall enough.
const MIN_TABLE_ROWS: usize = 3;

/// Lines per GPU in the full layout.
pub const FULL_GPU_LINES: usize = 2;

/// The keys, as the help shows them.
pub const HELP: &[(&str, &str)] = &[
    ("q Esc Ctrl-C", "quit"),
    ("? h F1", "this help (any key closes it)"),
    ("Up Down j k", "select a process"),
    ("PgUp PgDn", "a page up or down"),
    ("Home End", "first or last process"),
    ("mouse", "click selects, the wheel scrolls"),
    ("< >", "sort by the column to the left or right"),
    ("r", "reverse the sort"),
    (
        "/",
        "filter by user, command or pid (Enter keeps it, Esc clears it)",
    ),
    ("u", "only my processes (again: everyone's)"),
    ("t", "process tree (again: flat)"),
    ("g G", "only the next or previous GPU (then all again)"),
    (
        "Enter",
        "the process's detail: command line, memory and SM history",
    ),
    (
        "K F9",
        "send TERM, INT or KILL to the process, after you confirm",
    ),
];

/// Styles, or none of them when colours are off (NO_COLOR, --no-color).
struct Paint {
    color: bool,
}

impl Paint {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    fn pct(&self, p: Option<f64>) -> Style {
        match p {
            Some(p) if p >= 80.0 => self.fg(Color::Red),
            Some(p) if p >= 50.0 => self.fg(Color::Yellow),
            Some(_) => self.fg(Color::Green),
            None => Style::default(),
        }
    }

    fn bad(&self) -> Style {
        if self.color {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    let w = usize::from(area.width);
    let h = usize::from(area.height);
    if w == 0 || h == 0 {
        return;
    }
    let paint = Paint { color: app.color };
    let mut lines: Vec<Line> = Vec::new();
    lines.push(title(app, w, &paint));
    if let Some(down) = &app.down {
        let what = if app.seen_any {
            format!("{down} (showing the last update)")
        } else {
            down.clone()
        };
        for part in word_wrap(&what, w).into_iter().take(3) {
            lines.push(Line::styled(
                left(&part, w),
                paint.bad().add_modifier(Modifier::REVERSED),
            ));
        }
    }
    // Rows left for the GPUs: all but the host line, the table header, the bottom line
    // and a few table rows.
    let fixed = lines.len() + 3;
    let room = h.saturating_sub(fixed + MIN_TABLE_ROWS.min(h.saturating_sub(fixed)));
    let gpus: Vec<&GpuRow> = app
        .gpus
        .iter()
        .filter(|g| app.gpu_filter.is_none_or(|i| i == g.index))
        .collect();
    let stale = app.down.is_some();
    if app.seen_any && gpus.is_empty() {
        lines.push(Line::raw(left("no GPUs", w)));
    } else if gpus.len() * FULL_GPU_LINES <= room {
        for g in &gpus {
            lines.extend(gpu_full(g, w, &paint, stale));
        }
    } else {
        let fit = if gpus.len() <= room {
            gpus.len()
        } else {
            room.saturating_sub(1)
        };
        for g in gpus.iter().take(fit) {
            lines.push(gpu_compact(g, w, &paint, stale));
        }
        if fit < gpus.len() && room > 0 {
            let more = format!(
                "… {} more GPUs (g shows one GPU at a time)",
                gpus.len() - fit
            );
            lines.push(Line::raw(left(&more, w)));
        }
    }
    if lines.len() < h {
        lines.push(host_line(app, w));
    }
    let widths = column_widths(w);
    if lines.len() < h {
        lines.push(table_header(app, &widths, w));
    }
    let top = lines.len();
    let page = h.saturating_sub(top + 1);
    app.page = page.max(1);
    app.table_top = top as u16;
    // Keep the selection in view at this size.
    if app.selected >= app.scroll + app.page {
        app.scroll = app.selected + 1 - app.page;
    }
    if app.selected < app.scroll {
        app.scroll = app.selected;
    }
    if !app.seen_any && page > 0 {
        lines.push(Line::raw(left("waiting for gpupeekd to publish…", w)));
    } else if app.rows.is_empty() && page > 0 {
        let why = if app.all.is_empty() {
            "no processes on the GPUs"
        } else {
            "no process matches (/ filter, u mine, g GPU)"
        };
        lines.push(Line::raw(left(why, w)));
    }
    for (i, row) in app.rows.iter().enumerate().skip(app.scroll).take(page) {
        let mut line = proc_line(row, &widths, w, &paint);
        if i == app.selected {
            line = line.style(Style::default().add_modifier(Modifier::REVERSED));
        }
        lines.push(line);
    }
    while lines.len() + 1 < h {
        lines.push(Line::raw(""));
    }
    if lines.len() < h {
        lines.push(bottom_line(app, w, &paint));
    }
    lines.truncate(h);
    f.render_widget(Paragraph::new(lines), area);
    match &app.dialog {
        Dialog::None => {}
        Dialog::Help => dialog(f, "keys", &help_lines(), &paint),
        Dialog::Detail => {
            if let Some(row) = app.current() {
                let body = detail_lines(app, row, usize::from(area.width).saturating_sub(4));
                dialog(f, "process", &body, &paint);
            }
        }
        Dialog::Signal(pid, row) => {
            let body = vec![
                format!("Send a signal to pid {pid} of {}?", row.user),
                cut(&row.command, 70),
                String::new(),
                "t or Enter: TERM    i: INT    k: KILL    Esc: cancel".to_owned(),
            ];
            dialog(f, "signal", &body, &paint);
        }
    }
}

fn title<'a>(app: &App, w: usize, paint: &Paint) -> Line<'a> {
    let time = if app.published_unix_ns > 0 {
        let t = chrono::DateTime::from_timestamp(
            (app.published_unix_ns / 1_000_000_000) as i64,
            (app.published_unix_ns % 1_000_000_000) as u32,
        )
        .unwrap_or_default()
        .with_timezone(&chrono::Local);
        t.format("%H:%M:%S").to_string()
    } else {
        String::new()
    };
    let head = format!("gpupeek top  {}  {}", app.hostname, app.versions);
    let tail = format!("{time}  ? help");
    let tw = text::width(&tail);
    if w > tw + 1 {
        Line::from(vec![
            Span::styled(
                left(&head, w - tw),
                paint.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            ),
            Span::raw(tail),
        ])
    } else {
        Line::raw(left(&head, w))
    }
}

/// Pieces of a line put side by side while they fit in `w` columns; later ones are
/// dropped first.
fn fit_spans<'a>(pieces: Vec<(String, Style)>, w: usize) -> Line<'a> {
    let mut used = 0;
    let mut spans = Vec::new();
    for (s, style) in pieces {
        let sw = text::width(&s);
        if used + sw > w {
            break;
        }
        used += sw;
        spans.push(Span::styled(s, style));
    }
    spans.push(Span::raw(" ".repeat(w - used)));
    Line::from(spans)
}

/// `name` without its "NVIDIA " when the whole does not fit in `cols` (as nvitop does).
fn short_name(name: &str, cols: usize) -> &str {
    match name.strip_prefix("NVIDIA ") {
        Some(rest) if text::width(name) > cols => rest,
        _ => name,
    }
}

fn pct_text(p: Option<f64>) -> String {
    p.map_or("--".to_owned(), |p| format!("{p:.0}%"))
}

fn temp_text(g: &GpuRow) -> String {
    g.temp.map_or("--°C".to_owned(), |t| format!("{t}°C"))
}

fn mem_pct(g: &GpuRow) -> Option<f64> {
    g.mem.map(|(u, t)| 100.0 * u as f64 / t.max(1) as f64)
}

fn verdict_style(v: &str, paint: &Paint) -> Style {
    match v {
        "healthy" => paint.fg(Color::Green),
        "idle-holding" | "starved" => paint.fg(Color::Yellow),
        _ => paint.fg(Color::Red),
    }
}

/// Two lines: identity and readings; bars and the daemon's history.
fn gpu_full<'a>(g: &GpuRow, w: usize, paint: &Paint, stale: bool) -> Vec<Line<'a>> {
    let dim = if stale {
        Style::default().add_modifier(Modifier::DIM)
    } else {
        Style::default()
    };
    // At 80 columns the name leaves room for the longest verdict ("power-capped").
    let name_w = w.saturating_sub(59).clamp(12, 32).min(w.saturating_sub(4));
    let mut first = vec![
        (format!("{:>2} ", g.index), dim.add_modifier(Modifier::BOLD)),
        (left(short_name(&g.name, name_w), name_w), dim),
    ];
    if let Some(trouble) = g.trouble() {
        first.push((format!(" {}", trouble.to_uppercase()), paint.bad()));
    } else {
        let hot = g.temp.is_some_and(|t| t >= 80);
        first.push((
            format!(" {:>5}", temp_text(g)),
            if hot { paint.bad() } else { dim },
        ));
        first.push((
            format!(" fan {:>4}", g.fan.map_or("--".into(), |f| format!("{f}%"))),
            dim,
        ));
        first.push((
            format!(" P{:<2}", g.pstate.map_or("-".into(), |p| p.to_string())),
            dim,
        ));
        let power = match (g.power, g.power_limit) {
            (Some(p), Some(l)) => format!("{p:.0}/{l:.0}W"),
            (Some(p), None) => format!("{p:.0}W"),
            _ => "--W".to_owned(),
        };
        first.push((format!(" {power:>8}"), dim));
        let clk = |c: Option<u64>| c.map_or("--".into(), |c| c.to_string());
        first.push((format!(" {}/{}MHz", clk(g.clocks.0), clk(g.clocks.1)), dim));
        if let Some(v) = g.verdict {
            first.push((format!(" {v}"), verdict_style(v, paint)));
        }
    }
    let mut second = vec![("   ".to_owned(), Style::default())];
    let bar_w = if w >= 120 { 20 } else { 10 };
    if g.trouble().is_some() {
        second.push((left("no current values", 2 * bar_w + 24), paint.bad()));
    } else {
        let util = g.util.map(f64::from);
        second.push(("UTIL ".into(), dim));
        second.push((bar(util, bar_w), paint.pct(util)));
        second.push((format!(" {:>4}  ", pct_text(util)), dim));
        let mp = mem_pct(g);
        second.push(("MEM ".into(), dim));
        second.push((bar(mp, bar_w), paint.pct(mp)));
        let mem = g.mem.map_or("--".to_owned(), |(u, t)| {
            format!("{}/{}", bytes(u), bytes(t))
        });
        second.push((format!(" {:>13} ", mem), dim));
    }
    let used: usize = second.iter().map(|(s, _)| text::width(s)).sum();
    if w > used + 6 {
        second.push((spark(&g.util_history, w - used - 1), paint.fg(Color::Cyan)));
    }
    vec![fit_spans(first, w), fit_spans(second, w)]
}

/// One line: index, name, temperature, power, utilisation and memory, history.
fn gpu_compact<'a>(g: &GpuRow, w: usize, paint: &Paint, stale: bool) -> Line<'a> {
    let dim = if stale {
        Style::default().add_modifier(Modifier::DIM)
    } else {
        Style::default()
    };
    let mut pieces = vec![
        (format!("{:>2} ", g.index), dim.add_modifier(Modifier::BOLD)),
        (
            left(short_name(&g.name, 14), 14.min(w.saturating_sub(4))),
            dim,
        ),
    ];
    if let Some(trouble) = g.trouble() {
        pieces.push((
            format!(" {}", left(&trouble.to_uppercase(), 40)),
            paint.bad(),
        ));
    } else {
        pieces.push((format!(" {:>5}", temp_text(g)), dim));
        pieces.push((
            format!(
                " {:>5}",
                g.power.map_or("--W".into(), |p| format!("{p:.0}W"))
            ),
            dim,
        ));
        let util = g.util.map(f64::from);
        pieces.push((" U".into(), dim));
        pieces.push((bar(util, 6), paint.pct(util)));
        pieces.push((format!("{:>5}", pct_text(util)), dim));
        let mp = mem_pct(g);
        pieces.push((" M".into(), dim));
        pieces.push((bar(mp, 6), paint.pct(mp)));
        pieces.push((format!("{:>5}", pct_text(mp)), dim));
        if let Some(v) = g.verdict {
            pieces.push((format!(" {}", left(v, 12)), verdict_style(v, paint)));
        }
    }
    let used: usize = pieces.iter().map(|(s, _)| text::width(s)).sum();
    if w > used + 4 {
        pieces.push((
            format!(" {}", spark(&g.util_history, w - used - 1)),
            paint.fg(Color::Cyan),
        ));
    }
    fit_spans(pieces, w)
}

fn host_line<'a>(app: &App, w: usize) -> Line<'a> {
    let h = &app.host;
    let cpu = h.cpu_pct.map_or("--".into(), |p| format!("{p:.1}%"));
    let mem = h.mem.map_or("--".into(), |(total, avail)| {
        format!("{}/{}", bytes(total.saturating_sub(avail)), bytes(total))
    });
    let load = h.load.map_or("--".into(), |l| {
        format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
    });
    let shown = if app.rows.len() == app.all.len() {
        format!("{} GPU processes", app.all.len())
    } else {
        format!("{} of {} GPU processes", app.rows.len(), app.all.len())
    };
    let s = format!("CPU {cpu} of {}  MEM {mem}  LOAD {load}  {shown}", h.cpus);
    Line::styled(left(&s, w), Style::default().add_modifier(Modifier::BOLD))
}

/// Widths of the columns shown at width `w` (0: left out), COMMAND taking the rest.
fn column_widths(w: usize) -> Vec<(Column, usize)> {
    let mut cols: Vec<(Column, usize)> = vec![
        (Column::Pid, 7),
        (Column::User, 8),
        (Column::Gpu, 4),
        (Column::GpuMem, 8),
        (Column::Sm, 4),
        (Column::Cpu, 6),
        (Column::HostMem, 9),
        (Column::Time, 8),
    ];
    // Narrow terminals lose the least needed columns first, keeping 12 for COMMAND.
    for drop in [
        Column::Time,
        Column::HostMem,
        Column::Cpu,
        Column::User,
        Column::Sm,
    ] {
        let used: usize = cols.iter().map(|(_, n)| n + 1).sum();
        if used + 12 <= w {
            break;
        }
        cols.retain(|(c, _)| *c != drop);
    }
    let used: usize = cols.iter().map(|(_, n)| n + 1).sum();
    cols.push((Column::Command, w.saturating_sub(used)));
    cols
}

fn cell(col: Column, s: &str, width: usize) -> String {
    match col {
        Column::User | Column::Command => left(s, width),
        _ => right(s, width),
    }
}

fn table_header<'a>(app: &App, widths: &[(Column, usize)], w: usize) -> Line<'a> {
    let mut s = String::new();
    for (i, (col, n)) in widths.iter().enumerate() {
        let mark = if *col == app.sort {
            let desc = matches!(
                col,
                Column::GpuMem | Column::Sm | Column::Cpu | Column::HostMem | Column::Time
            ) != app.reverse;
            if desc {
                "▼"
            } else {
                "▲"
            }
        } else {
            ""
        };
        let title = format!("{}{mark}", col.title());
        s.push_str(&cell(*col, &title, *n));
        if i + 1 < widths.len() {
            s.push(' ');
        }
    }
    Line::styled(
        left(&s, w),
        Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
    )
}

fn proc_line<'a>(p: &ProcRow, widths: &[(Column, usize)], w: usize, paint: &Paint) -> Line<'a> {
    let mut spans = Vec::new();
    for (i, (col, n)) in widths.iter().enumerate() {
        let value = match col {
            Column::Pid => p.pid.to_string(),
            Column::User => p.user.clone(),
            Column::Gpu => p.gpu.to_string(),
            Column::GpuMem => p.gpu_mem.map_or("--".into(), bytes),
            Column::Sm => p.sm.map_or("--".into(), |s| s.to_string()),
            Column::Cpu => p.cpu.map_or("--".into(), |c| format!("{c:.1}")),
            Column::HostMem => p.host_mem.map_or("--".into(), bytes),
            Column::Time => p.running.map_or("--".into(), text::duration),
            Column::Command => {
                let branch = if p.depth == 0 {
                    String::new()
                } else {
                    format!(
                        "{}{}",
                        "  ".repeat(p.depth - 1),
                        if p.last_child { "└─ " } else { "├─ " }
                    )
                };
                format!("{branch}{}", p.command)
            }
        };
        let style = match col {
            Column::Sm => paint.pct(p.sm.map(f64::from)),
            Column::User => paint.fg(Color::Cyan),
            _ => Style::default(),
        };
        let mut s = cell(*col, &value, *n);
        if i + 1 < widths.len() {
            s.push(' ');
        }
        spans.push(Span::styled(s, style));
    }
    let used: usize = widths
        .iter()
        .map(|(_, n)| n + 1)
        .sum::<usize>()
        .saturating_sub(1);
    spans.push(Span::raw(" ".repeat(w.saturating_sub(used))));
    Line::from(spans)
}

fn bottom_line<'a>(app: &App, w: usize, paint: &Paint) -> Line<'a> {
    if app.editing {
        let s = format!(
            "filter (user, command, pid): {}█  Enter keeps, Esc clears",
            app.filter
        );
        return Line::styled(left(&s, w), Style::default().add_modifier(Modifier::BOLD));
    }
    if let Some(m) = &app.message {
        let style = if m.error {
            paint.bad()
        } else {
            paint.fg(Color::Green)
        };
        return Line::styled(left(&m.text, w), style);
    }
    let mut modes = Vec::new();
    if !app.filter.is_empty() {
        modes.push(format!("filter:{}", app.filter));
    }
    if app.only_mine {
        modes.push("mine".into());
    }
    if app.tree {
        modes.push("tree".into());
    }
    if let Some(g) = app.gpu_filter {
        modes.push(format!("GPU {g}"));
    }
    let mut s = modes.join(" ");
    if !s.is_empty() {
        s.push_str(" | ");
    }
    s.push_str("q quit ? help / filter u mine t tree g GPU <> sort r rev K signal");
    Line::styled(left(&s, w), paint.fg(Color::Cyan))
}

fn help_lines() -> Vec<String> {
    HELP.iter().map(|(k, v)| format!("{k:<13} {v}")).collect()
}

fn detail_lines(app: &App, p: &ProcRow, w: usize) -> Vec<String> {
    let mut out = vec![
        format!(
            "pid {}{}  user {}{}  {}",
            p.pid,
            if p.pid != p.host_pid {
                format!(" (host {})", p.host_pid)
            } else {
                String::new()
            },
            p.user,
            p.uid.map_or(String::new(), |u| format!(" (uid {u})")),
            p.kind
        ),
        format!(
            "GPU {} {}",
            p.gpu,
            app.gpus
                .iter()
                .find(|g| g.index == p.gpu)
                .map_or("", |g| g.name.as_str())
        ),
        format!(
            "GPU memory {}  SM {}  CPU {}  host memory {}  running {}",
            p.gpu_mem.map_or("--".into(), bytes),
            p.sm.map_or("--".into(), |s| format!("{s}%")),
            p.cpu.map_or("--".into(), |c| format!("{c:.1}%")),
            p.host_mem.map_or("--".into(), bytes),
            p.running.map_or("--".into(), text::duration),
        ),
    ];
    if let Some(c) = &p.container {
        out.push(format!("container {c}"));
    }
    out.push("command line:".into());
    let cmd = if p.argv.is_empty() {
        p.command.clone()
    } else {
        p.argv.join(" ")
    };
    out.extend(
        wrap(&cmd, w.clamp(10, 100))
            .into_iter()
            .take(6)
            .map(|l| format!("  {l}")),
    );
    let ring = app.proc_history.get(&(p.host_pid, p.gpu));
    let graph_w = w.saturating_sub(22).clamp(4, 60);
    if let Some(ring) = ring {
        let max = ring.iter().filter_map(|s| s.0).max().unwrap_or(0).max(1);
        let mem: Vec<Option<f64>> = ring
            .iter()
            .map(|s| s.0.map(|m| 100.0 * m as f64 / max as f64))
            .collect();
        let sm: Vec<Option<f64>> = ring.iter().map(|s| s.1.map(f64::from)).collect();
        out.push(format!("GPU memory (max {})", bytes(max << 20)));
        out.push(format!("  {}", spark(&mem, graph_w)));
        out.push("SM % (0-100)".into());
        out.push(format!("  {}", spark(&sm, graph_w)));
        out.push(format!(
            "({} samples since gpupeek-top started)",
            ring.len()
        ));
    }
    if let Some(g) = app.gpus.iter().find(|g| g.index == p.gpu) {
        out.push(format!("GPU {} utilisation, the daemon's history", g.index));
        out.push(format!("  {}", spark(&g.util_history, graph_w)));
        out.push(format!("GPU {} memory used, the daemon's history", g.index));
        out.push(format!("  {}", spark(&g.mem_history, graph_w)));
    }
    out.push("any key closes".into());
    out
}

/// `s` in lines of at most `w` columns, broken between words where it can be.
fn word_wrap(s: &str, w: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split(' ') {
        let need = text::width(&line) + usize::from(!line.is_empty()) + text::width(word);
        if !line.is_empty() && need > w {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.into_iter().flat_map(|l| wrap(&l, w.max(1))).collect()
}

/// `s` in lines of at most `w` columns, cut at character boundaries.
fn wrap(s: &str, w: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut used = 0;
    for c in s.chars() {
        let cw = text::width(c.encode_utf8(&mut [0; 4]));
        if used + cw > w {
            lines.push(String::new());
            used = 0;
        }
        lines.last_mut().unwrap_or(&mut String::new()).push(c);
        used += cw;
    }
    lines
}

/// A box in the middle of the screen holding `body`, cut to fit.
fn dialog(f: &mut Frame, title: &str, body: &[String], paint: &Paint) {
    let area = f.area();
    let want_w = body.iter().map(|l| text::width(l)).max().unwrap_or(0) + 4;
    let w = want_w.min(usize::from(area.width)) as u16;
    let h = (body.len() + 2).min(usize::from(area.height)) as u16;
    if w < 4 || h < 3 {
        return;
    }
    let rect = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let inner = usize::from(w - 4);
    let lines: Vec<Line> = body
        .iter()
        .map(|l| Line::raw(format!(" {} ", left(l, inner))))
        .collect();
    f.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(cut(title, inner))
        .border_style(paint.fg(Color::Cyan));
    f.render_widget(Paragraph::new(lines).block(block), rect);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::App;
    use gpupeek_model::GpuState;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn gpu(index: u32, name: &str) -> GpuRow {
        GpuRow {
            index,
            name: name.into(),
            state: Some(GpuState::Ok),
            util: Some(45),
            mem: Some((20 << 30, 80 << 30)),
            temp: Some(41),
            fan: Some(30),
            power: Some(250.0),
            power_limit: Some(700.0),
            clocks: (Some(1980), Some(2619)),
            pstate: Some(0),
            verdict: Some("healthy"),
            util_history: (0..100).map(|i| Some(f64::from(i % 100))).collect(),
            mem_history: vec![Some(25.0); 100],
        }
    }

    fn proc(pid: u32, user: &str, command: &str) -> ProcRow {
        ProcRow {
            pid,
            host_pid: pid,
            signal_pid: Some(pid),
            uid: Some(1000),
            user: user.into(),
            gpu: 0,
            gpu_mem: Some(3 << 30),
            sm: Some(40),
            cpu: Some(99.5),
            host_mem: Some(2 << 30),
            running: Some(3725),
            command: command.into(),
            argv: command.split(' ').map(String::from).collect(),
            kind: "compute",
            ..ProcRow::default()
        }
    }

    fn app(gpus: Vec<GpuRow>, procs: Vec<ProcRow>) -> App {
        let mut app = App::new("host".into(), 1000, true);
        app.seen_any = true;
        app.versions = "driver 550.54.15  CUDA 12.4".into();
        app.gpus = gpus;
        app.all = procs;
        app.refresh();
        app
    }

    /// The screen as lines of text, a wide character once (its second cell skipped).
    fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|f| draw(f, app)).unwrap();
        let buf = term.backend().buffer().clone();
        let mut lines = Vec::new();
        for y in 0..h {
            let mut line = String::new();
            let mut skip = 0;
            for x in 0..w {
                let sym = buf[(x, y)].symbol();
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                skip = text::width(sym).saturating_sub(1);
                line.push_str(sym);
            }
            // Nothing cut mid-cell: every line is exactly the terminal's width.
            assert_eq!(text::width(&line), usize::from(w), "line {y}: {line:?}");
            lines.push(line);
        }
        lines
    }

    fn find<'a>(lines: &'a [String], what: &str) -> &'a String {
        lines
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what:?} not on screen:\n{}", lines.join("\n")))
    }

    #[test]
    fn fits_80x24_with_long_cjk_and_emoji_names() {
        let mut a = app(
            vec![gpu(
                0,
                "NVIDIA H100 80GB HBM3 with a very long product name indeed",
            )],
            vec![
                proc(
                    101,
                    "a_user_with_a_very_long_name",
                    "python train.py --epochs 100 --config big.yaml",
                ),
                proc(102, "研究者", "python 训练任务.py 🚀🚀🚀 数据"),
                proc(103, "🦀rust", "🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀"),
            ],
        );
        let lines = screen(&mut a, 80, 24);
        find(&lines, "gpupeek top");
        find(&lines, "0 H100 80GB HBM3 with …");
        find(&lines, "41°C");
        find(&lines, "healthy");
        find(&lines, "PID");
        find(&lines, "a_user_…");
        find(&lines, "研究者");
        find(&lines, "1:02:05");
        // Whatever the widths, the table's columns line up: COMMAND starts in the
        // same column on every row.
        let header = find(&lines, "COMMAND");
        let col = text::width(&header[..header.find("COMMAND").unwrap()]);
        for pid in ["101", "102", "103"] {
            let row = find(&lines, &format!(" {pid} "));
            let mut w = 0;
            let mut at = None;
            for (i, c) in row.char_indices() {
                if w == col {
                    at = Some(i);
                    break;
                }
                w += text::width(&c.to_string());
            }
            let cmd = &row[at.expect("a character starts the COMMAND column")..];
            assert!(
                cmd.starts_with("python") || cmd.starts_with('🦀'),
                "row {pid}: {row:?}"
            );
        }
        find(&lines, "q quit");
    }

    #[test]
    fn the_longest_verdict_and_the_clocks_fit_80_columns() {
        let mut g = gpu(0, "NVIDIA H100 80GB HBM3");
        g.verdict = Some("power-capped");
        g.power = Some(699.0);
        g.fan = Some(100);
        let mut a = app(vec![g], vec![]);
        let lines = screen(&mut a, 80, 24);
        let row = find(&lines, "power-capped");
        assert!(
            row.contains("1980/2619MHz") && row.contains("699/700W") && row.contains("100%"),
            "{row}"
        );
    }

    #[test]
    fn wide_terminal_shows_every_column_and_the_history() {
        let mut a = app(
            vec![gpu(0, "NVIDIA H100"), gpu(1, "NVIDIA H100")],
            vec![proc(1, "u", "c")],
        );
        let lines = screen(&mut a, 200, 60);
        let header = find(&lines, "COMMAND");
        for col in Column::ALL {
            assert!(header.contains(col.title()), "{header}");
        }
        let bars = find(&lines, "UTIL");
        assert!(
            bars.contains("▁") && bars.contains("█"),
            "history graph: {bars}"
        );
        find(&lines, "fan  30%");
        find(&lines, "1980/2619MHz");
        find(&lines, "250/700W");
    }

    #[test]
    fn sixty_four_gpus_leave_room_for_the_processes() {
        let gpus = (0..64).map(|i| gpu(i, "NVIDIA A100-SXM4-80GB")).collect();
        let mut a = app(gpus, vec![proc(7, "u", "job")]);
        let lines = screen(&mut a, 80, 24);
        find(&lines, "more GPUs");
        find(&lines, "COMMAND");
        find(&lines, " job");
        // A tall one shows all 64, one line each.
        let lines = screen(&mut a, 120, 100);
        find(&lines, "63 A100-SXM4-80GB");
        find(&lines, " job");
    }

    #[test]
    fn no_gpus_and_no_daemon_are_said() {
        let mut a = app(vec![], vec![]);
        let lines = screen(&mut a, 80, 24);
        find(&lines, "no GPUs");
        find(&lines, "no processes on the GPUs");
        let mut fresh = App::new("h".into(), 0, false);
        fresh.down = Some("segment 'x' not found; waiting for gpupeekd".into());
        let lines = screen(&mut fresh, 80, 24);
        find(&lines, "not found; waiting for gpupeekd");
        find(&lines, "waiting for gpupeekd to publish");
    }

    #[test]
    fn a_lost_gpu_is_never_drawn_full() {
        let mut lost = gpu(1, "NVIDIA H100");
        lost.state = Some(GpuState::Lost);
        lost.util = None;
        lost.mem = None;
        lost.temp = None;
        lost.util_history = vec![None; 100];
        let mut asleep = gpu(2, "NVIDIA H100");
        asleep.state = Some(GpuState::Suspended);
        let mut hung = gpu(3, "NVIDIA H100");
        hung.state = Some(GpuState::NotResponding);
        for (w, h) in [(80, 24), (80, 10)] {
            let mut a = app(
                vec![
                    gpu(0, "NVIDIA H100"),
                    lost.clone(),
                    asleep.clone(),
                    hung.clone(),
                ],
                vec![],
            );
            let lines = screen(&mut a, w, h);
            let row = find(&lines, " 1 NVIDIA");
            assert!(row.contains("GPU LOST"), "{row}");
            assert!(
                !row.contains('█') && !row.contains('▇'),
                "lost drawn full: {row}"
            );
            if h == 24 {
                find(&lines, "ASLEEP (SUSPENDED)");
                find(&lines, "DRIVER NOT RESPONDING");
            }
        }
    }

    #[test]
    fn a_stale_daemon_is_shown_over_the_last_update() {
        let mut a = app(vec![gpu(0, "NVIDIA H100")], vec![]);
        a.down = Some("gpupeekd on segment 'g' is not responding: last update 9.0s ago".into());
        let lines = screen(&mut a, 80, 24);
        find(&lines, "not responding: last update 9.0s ago");
        find(&lines, "last update)");
    }

    #[test]
    fn help_and_dialogs_fit_80x24() {
        let mut a = app(
            vec![gpu(0, "G")],
            vec![proc(5, "me", "python a_rather_long_script_name.py --flag")],
        );
        a.dialog = Dialog::Help;
        let lines = screen(&mut a, 80, 24);
        for (keys, _) in HELP {
            find(&lines, keys);
        }
        a.dialog = Dialog::Detail;
        let lines = screen(&mut a, 80, 24);
        find(&lines, "command line:");
        find(&lines, "a_rather_long_script_name.py");
        a.dialog = Dialog::Signal(5, Box::new(a.rows[0].clone()));
        let lines = screen(&mut a, 80, 24);
        find(&lines, "Send a signal to pid 5 of me?");
        // And a tiny terminal draws without a panic.
        for (w, h) in [(1, 1), (10, 3), (20, 5), (40, 10)] {
            screen(&mut a, w, h);
        }
    }

    #[test]
    fn no_color_draws_no_colour() {
        let mut a = app(vec![gpu(0, "G")], vec![proc(5, "me", "x")]);
        a.color = false;
        let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
        term.draw(|f| draw(f, &mut a)).unwrap();
        let buf = term.backend().buffer();
        for cell in buf.content() {
            assert_eq!(cell.fg, Color::Reset, "a coloured cell {cell:?}");
            assert_eq!(cell.bg, Color::Reset);
        }
    }
}
