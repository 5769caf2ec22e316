//! gpustat's default text output, column for column: a header line (host, time,
//! driver), then one line per GPU: `[index] name | temp, util | used / total MB | procs`.
//! Unknown values print as `??`; a GPU that cannot be sampled prints as gpustat's
//! "invalid GPU" (`((GPU is lost))` and `?` everywhere). A GPU the daemon lets sleep
//! prints its name (or PCI bus id) and `suspended` or `idle` instead of any value.
//! With `-V` a verdict column follows the utilisation (see `verdict.rs`); without it the
//! line is gpustat's, byte for byte.
//!
//! A MIG-enabled GPU (gpustat has no such thing) is followed by a line per MIG device:
//! ` ├─ MIG 3g.40gb (1/0) |  SM 42 % |  9216 / 40192 MB | alice(9000M)`, its profile, GPU
//! and compute instance ids, GPM SM activity (`??` without GPM), memory and the
//! processes running in it; the GPU's own line then lists only processes outside every
//! MIG device, and its utilisation, which NVML does not report under MIG, is `??`.

use std::fmt::Write;

use gpupeek_shm::ProcPolicy;

use crate::cli::{Args, Power};
use crate::style::{self as s, Painter};
use crate::verdict::Verdict;
use crate::view::{GpuView, MigView, ProcView, View};

/// Name column width when none is known (gpustat's default).
const DEFAULT_NAME_WIDTH: usize = 16;

/// The width of the GPU name column: `--gpuname-width`, else the longest name (as
/// gpustat); the header's host name is padded to match.
pub fn name_width(view: &View, args: &Args) -> usize {
    args.gpuname_width.unwrap_or_else(|| {
        view.gpus
            .iter()
            .map(|g| display_name(g).chars().count())
            .max()
            .unwrap_or(0)
    })
}

/// Renders the table; `hostname` and `time` come from the caller so tests are exact.
pub fn render(view: &View, args: &Args, paint: Painter, hostname: &str, time: &str) -> String {
    let name_width = name_width(view, args);
    let mut out = String::new();
    if !args.no_header {
        out.push_str(&header(view, name_width, paint, hostname, time));
    }
    if view.gpus.is_empty() {
        out.push_str(&paint.paint(s::YELLOW, "(No GPUs are available)"));
        out.push('\n');
    }
    // `-V`: verdicts in a column as wide as the longest one shown (none: no column).
    let verdict_width = view
        .gpus
        .iter()
        .filter(|_| args.verdict)
        .filter_map(|g| g.verdict.map(|v| v.name().len()))
        .max()
        .unwrap_or(0);
    for gpu in &view.gpus {
        let widths = (name_width, verdict_width);
        gpu_line(&mut out, gpu, args, paint, widths, view.proc_policy);
        out.push('\n');
        if gpu.asleep().is_none() {
            for (n, mig) in gpu.mig.iter().enumerate() {
                let last = n + 1 == gpu.mig.len();
                mig_line(&mut out, gpu, mig, last, args, paint, name_width);
                out.push('\n');
            }
        }
        if args.show_full_cmd && !args.no_processes && gpu.is_healthy() {
            full_process_lines(&mut out, gpu, paint);
        }
    }
    out
}

/// gpustat's `-f` lines under a GPU, ` ├─ pid (cpu%, host memory): command line`, byte
/// for byte, colours included (each part opened with gpustat's `normal`, as its
/// `full_process_info` writes them). The running time and the SM utilisation are in
/// `--json` (`running_time`, `sm_utilization`) and `gpupeek top`.
fn full_process_lines(out: &mut String, g: &GpuView, p: Painter) {
    let list = g.processes.as_deref().unwrap_or_default();
    let normal = p.code(s::NORMAL);
    for (i, proc) in list.iter().enumerate() {
        let branch = if i + 1 == list.len() {
            "└─"
        } else {
            "├─"
        };
        let cpu = proc
            .cpu_percent
            .map_or("  --".to_owned(), |c| format!("{c:4.0}"));
        let mem = proc.host_mem_bytes.map_or("--".to_owned(), bytes2human);
        let _ = writeln!(
            out,
            "{normal} {branch} {:>6} {normal}({}{cpu}%{normal}, {}{mem:>6}{normal}){normal}: {}{}{normal}",
            proc.pid,
            p.code(s::GREEN),
            p.code(s::YELLOW),
            p.code(s::DIM_BLUE),
            command_line(proc, p),
        );
    }
}

/// gpustat's `prettify_commandline`: the command line in its dark blue, the command's
/// base name in cyan.
fn command_line(proc: &ProcView, p: Painter) -> String {
    let Some(argv) = proc.full_command.as_ref().filter(|a| !a.is_empty()) else {
        return proc.command.clone().unwrap_or_else(|| "?".to_owned());
    };
    let (dir, base) = match argv[0].rfind('/') {
        Some(at) => argv[0].split_at(at + 1),
        None => ("", argv[0].as_str()),
    };
    let (text, command) = (p.code(s::DIM_BLUE), p.code(s::CYAN));
    let mut line = format!("{text}{dir}{command}{base}{text}");
    for arg in &argv[1..] {
        line.push(' ');
        line.push_str(arg);
    }
    line
}

/// gpustat's `bytes2human`: at most four digits, in B, KB, MB, GB, TB or PB (powers of 1024).
pub fn bytes2human(bytes: u64) -> String {
    const SUFFIXES: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut value = bytes;
    let mut suffix = 0;
    while value > 9999 && suffix + 1 < SUFFIXES.len() {
        value >>= 10;
        suffix += 1;
    }
    format!("{value}{}", SUFFIXES[suffix])
}

/// gpustat's header line: host, time of the data, driver version.
pub fn header(
    view: &View,
    name_width: usize,
    paint: Painter,
    hostname: &str,
    time: &str,
) -> String {
    let width = if name_width == 0 {
        DEFAULT_NAME_WIDTH
    } else {
        name_width
    } + 3;
    let host = paint.paint(s::BOLD_WHITE, format!("{hostname:width$}"));
    let driver = paint.paint(
        s::BOLD_BLACK,
        view.driver_version.as_deref().unwrap_or("None"),
    );
    let mut line = format!("{host}  {time}  {driver}").trim().to_owned();
    line.push('\n');
    line
}

fn display_name(g: &GpuView) -> &str {
    g.problem()
        .or(g.name.as_deref())
        .or(g.pci_bus_id.as_deref())
        .unwrap_or("??")
}

/// A value, `??` when unknown, or `?` on a GPU that could not be sampled.
fn val<T: ToString>(g: &GpuView, v: Option<T>) -> String {
    match v {
        _ if !g.is_healthy() => "?".into(),
        Some(v) => v.to_string(),
        None => "??".into(),
    }
}

/// `high` when `v >= threshold`, `low` below it, grey when unknown.
fn level(
    g: &GpuView,
    v: Option<f64>,
    threshold: f64,
    low: &'static str,
    high: &'static str,
) -> &'static str {
    match v {
        Some(v) if g.is_healthy() => {
            if v < threshold {
                low
            } else {
                high
            }
        }
        _ => s::BOLD_BLACK,
    }
}

fn gpu_line(
    out: &mut String,
    g: &GpuView,
    args: &Args,
    p: Painter,
    (name_width, verdict_width): (usize, usize),
    policy: Option<ProcPolicy>,
) {
    let f = |v: Option<u32>| v.map(f64::from);
    let _ = write!(out, "{} ", p.paint(s::CYAN, format!("[{}]", g.index)));
    if name_width != 0 {
        let name_style = if g.problem().is_none() {
            s::BLUE
        } else {
            s::RED
        };
        let name = shorten_left(display_name(g), name_width);
        let _ = write!(
            out,
            "{} |",
            p.paint(name_style, format!("{name:name_width$}"))
        );
    }
    if let Some(asleep) = g.asleep() {
        if name_width != 0 {
            out.push(' ');
        }
        out.push_str(&p.paint(s::BOLD_BLACK, asleep));
        return;
    }
    let temp = level(g, g.temperature_c.map(f64::from), 50.0, s::RED, s::BOLD_RED);
    let _ = write!(
        out,
        "{}, ",
        p.paint(temp, format!("{:>3}°C", val(g, g.temperature_c)))
    );
    if args.show_fan_speed {
        let fan = level(g, f(g.fan_pct), 30.0, s::CYAN, s::BOLD_CYAN);
        let _ = write!(
            out,
            "{}, ",
            p.paint(fan, format!("{:>3} %", val(g, g.fan_pct)))
        );
    }
    let util = level(g, f(g.util_pct), 30.0, s::GREEN, s::BOLD_GREEN);
    let _ = write!(
        out,
        "{}",
        p.paint(util, format!("{:>3} %", val(g, g.util_pct)))
    );
    if verdict_width > 0 {
        let word = g.verdict.map_or("", |v| v.name());
        let style = match g.verdict {
            Some(Verdict::Healthy) | None => s::BOLD_BLACK,
            Some(_) => s::BOLD_RED,
        };
        let _ = write!(out, " {}", p.paint(style, format!("{word:verdict_width$}")));
    }
    if let Some(codec) = args.show_codec.filter(|c| c.enc || c.dec) {
        let mut parts = Vec::new();
        for (on, label, value) in [(codec.enc, "E: ", g.enc_pct), (codec.dec, "D: ", g.dec_pct)] {
            if on {
                let style = level(g, f(value), 50.0, s::GREEN, s::BOLD_GREEN);
                let shown = p.paint(style, format!("{:>3} %", val(g, value)));
                parts.push(format!("{}{shown}", p.paint(s::BOLD, label)));
            }
        }
        let _ = write!(out, " ({})", parts.join("  "));
    }
    if let Some(power) = args.show_power {
        power_columns(out, g, power, p);
    }
    let (used_style, total_style) = if g.is_healthy() {
        (s::BOLD_YELLOW, s::YELLOW)
    } else {
        (s::BOLD_BLACK, s::BOLD_BLACK)
    };
    // gpustat opens the used figure with cyan and then its own style (`%(C1)s%(CMemU)s`).
    let used = p.paint(
        &format!("{}{used_style}", s::CYAN),
        format!("{:>5}", val(g, g.mem_used_mib)),
    );
    let total = p.paint(total_style, format!("{:>5}", val(g, g.mem_total_mib)));
    let _ = write!(out, " | {used} / {total} MB");
    if !args.no_processes {
        out.push_str(" |");
        processes(out, g, args, p, policy);
    }
}

/// One MIG device's line, under its GPU's; `last` draws the tree's corner.
fn mig_line(
    out: &mut String,
    g: &GpuView,
    mig: &MigView,
    last: bool,
    args: &Args,
    p: Painter,
    name_width: usize,
) {
    let branch = if last { "└─" } else { "├─" };
    let profile = mig.profile.as_deref().unwrap_or("??");
    let label = format!("MIG {profile} ({}/{})", mig.ids.0, mig.ids.1);
    // Under the GPU's `[index] name`, as wide as it.
    let width = format!("[{}]", g.index).len() + 1 + name_width;
    let label = shorten_left(&label, width.saturating_sub(4).max(8));
    let pad = width.saturating_sub(4 + label.chars().count());
    let _ = write!(out, " {branch} {}{:pad$} |", p.paint(s::BLUE, &label), "");
    let sm = mig
        .gpm
        .and_then(|gpm| gpm.sm_activity)
        .map(|a| a.pct().round() as u32);
    let sm_style = level(g, sm.map(f64::from), 30.0, s::GREEN, s::BOLD_GREEN);
    let _ = write!(
        out,
        " {}",
        p.paint(sm_style, format!("SM {:>3} %", val(g, sm)))
    );
    if args.verdict {
        if let Some(v) = mig.verdict {
            let style = match v {
                Verdict::Healthy => s::BOLD_BLACK,
                _ => s::BOLD_RED,
            };
            let _ = write!(out, " {}", p.paint(style, v.name()));
        }
    }
    let used = p.paint(s::BOLD_YELLOW, format!("{:>5}", val(g, mig.mem_used_mib)));
    let total = p.paint(s::YELLOW, format!("{:>5}", val(g, mig.mem_total_mib)));
    let _ = write!(out, " | {used} / {total} MB");
    if !args.no_processes && g.is_healthy() {
        out.push_str(" |");
        for proc in g.processes_in(mig) {
            out.push(' ');
            out.push_str(&process(proc, args, p));
        }
    }
}

fn power_columns(out: &mut String, g: &GpuView, power: Power, p: Painter) {
    let draw_style = match (g.power_draw_w, g.power_limit_w) {
        _ if !g.is_healthy() => s::BOLD_BLACK,
        (Some(draw), Some(limit)) if limit > 0 && (draw as f64) / (limit as f64) < 0.4 => {
            s::MAGENTA
        }
        (None, Some(_)) => s::BOLD_BLACK,
        _ => s::BOLD_MAGENTA,
    };
    let _ = write!(
        out,
        ",  {} ",
        p.paint(draw_style, format!("{:>3}", val(g, g.power_draw_w)))
    );
    match power {
        Power::DrawLimit => {
            let limit = p.paint(s::MAGENTA, format!("{:>3}", val(g, g.power_limit_w)));
            let _ = write!(out, "/ {limit} {}", p.paint(s::MAGENTA, "W"));
        }
        Power::Draw => out.push_str(&p.paint(draw_style, "W")),
    }
}

fn processes(out: &mut String, g: &GpuView, args: &Args, p: Painter, policy: Option<ProcPolicy>) {
    if g.processes.is_none() || !g.is_healthy() {
        out.push_str(" (Not Supported)");
        return;
    }
    if policy == Some(ProcPolicy::None) {
        if g.processes_not_shown > 0 {
            let _ = write!(out, " ({} hidden)", g.processes_not_shown);
        }
        return;
    }
    for proc in g.processes_outside_mig() {
        out.push(' ');
        out.push_str(&process(proc, args, p));
    }
    if g.processes_not_shown > 0 {
        let _ = write!(out, " +{} more", g.processes_not_shown);
    }
}

fn process(proc: &ProcView, args: &Args, p: Painter) -> String {
    let mut r = String::new();
    if !args.show_cmd || args.show_user {
        r.push_str(&p.paint(s::BOLD_BLACK, proc.user.as_deref().unwrap_or("--")));
    }
    if args.show_cmd {
        if !r.is_empty() {
            r.push(':');
        }
        r.push_str(&p.paint(s::CYAN, proc.command.as_deref().unwrap_or("--")));
    }
    if args.show_pid {
        let _ = write!(r, "/{}", proc.pid);
    }
    let mem = proc.gpu_mem_mib.map_or("?".to_owned(), |m| m.to_string());
    let _ = write!(r, "({})", p.paint(s::YELLOW, format!("{mem}M")));
    r
}

/// gpustat's `shorten_left`: keep the end of a name that does not fit, marked with `…`.
fn shorten_left(name: &str, width: usize) -> String {
    let len = name.chars().count();
    if len <= width {
        return name.to_owned();
    }
    let keep: String = name.chars().skip(len - (width - 1)).collect();
    format!("…{keep}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_gpustat() {
        assert_eq!(bytes2human(9999), "9999B");
        assert_eq!(bytes2human(10_000), "9KB");
        assert_eq!(bytes2human(2 << 30), "2048MB");
        assert_eq!(bytes2human(u64::MAX), "16383PB");
    }

    #[test]
    fn long_names_keep_their_end() {
        assert_eq!(shorten_left("NVIDIA H100 80GB HBM3", 8), "…GB HBM3");
        assert_eq!(shorten_left("A100", 8), "A100");
        assert_eq!(shorten_left("A100", 1), "…");
    }

    #[test]
    fn a_gpu_whose_driver_is_not_responding_shows_its_problem_and_no_value() {
        use gpupeek_shm::layout::{gpu_valid as v, GpuState};
        use gpupeek_shm::{text, GpuRecord};
        let gpu = |index: u32, state: GpuState| {
            let mut g = GpuRecord {
                index,
                state: state as u32,
                valid: v::NAME | v::UTILIZATION | v::TEMPERATURE | v::MEMORY | v::PROCESSES,
                util_gpu_pct: 97,
                temp_gpu_c: 63,
                mem_used_bytes: 1 << 30,
                mem_total_bytes: 80 << 30,
                ..GpuRecord::default()
            };
            text::encode(&mut g.name, "H100");
            g
        };
        let snap = crate::testing::live_snapshot(vec![
            gpu(0, GpuState::Ok),
            gpu(1, GpuState::NotResponding),
        ]);
        let view = View::new(&snap, None, &Default::default()).unwrap();
        let plain = Painter::new(false, true, false);
        for flags in [&[][..], &["-a"], &["-c", "-u", "-p", "-f"]] {
            let argv: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            let mut args = crate::cli::parse_args(&argv).unwrap();
            args.expand_show_all();
            let table = render(&view, &args, plain, "host", "now");
            let lines: Vec<&str> = table.lines().collect();
            assert!(lines[1].starts_with("[0] H100"), "{flags:?}: {table}");
            assert!(lines[1].contains("97 %"), "{flags:?}: {table}");
            let hung = lines[2];
            assert!(
                hung.starts_with("[1] ((Driver not responding))"),
                "{flags:?}: {table}"
            );
            assert!(
                !hung.contains("97") && !hung.contains("63") && hung.contains("  ? %"),
                "no old value is shown: {flags:?}: {table}"
            );
        }
    }
}
