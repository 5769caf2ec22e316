//! `nvml-latency`: how long each NVML call gpupeekd makes (or may make) takes on this
//! machine's driver, for docs/real-gpu.md.
//!
//! It loads NVML (`libnvidia-ml.so.1`, or `--nvml-lib PATH`), times loading it and
//! `nvmlInit_v2`, then for each GPU (or `--gpu N`) calls every probe of `probes.rs` once
//! per round, for `--rounds` rounds (default 20), interleaved like a daemon's ticks, and
//! prints a Markdown table: one row per call with the code of its last call
//! (`FUNCTION_NOT_FOUND` when the library lacks the symbol: reported, not fatal) and the
//! minimum, median, 90th percentile and maximum wall-clock time in microseconds. Last,
//! `--init-cycles` times (default 3) it shuts NVML down and initialises it again, timing
//! both, as gpupeekd does when it lets go of the driver and comes back.
//!
//! Only getters are called: nothing on the GPU is changed. Run by `scripts/gpu-check`
//! (section "NVML call latency"); never by `cargo test` except on the fake NVML.

mod call;
mod mig;
mod probes;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::{self as b, nvmlDevice_t, nvmlReturn_t, NvmlLib};

use call::{code_name, Probe};

const USAGE: &str =
    "usage: nvml-latency [--nvml-lib PATH] [--gpu N] [--rounds N] [--init-cycles N]";

/// The command line.
struct Args {
    lib: String,
    gpu: Option<u32>,
    rounds: usize,
    init_cycles: usize,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        lib: "libnvidia-ml.so.1".into(),
        gpu: None,
        rounds: 20,
        init_cycles: 3,
    };
    while let Some(flag) = argv.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = argv.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse()
                .map_err(|_| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--nvml-lib" => args.lib = value.clone(),
            "--gpu" => args.gpu = Some(number()?),
            "--rounds" => args.rounds = number()?.max(1) as usize,
            "--init-cycles" => args.init_cycles = number()? as usize,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("nvml-latency: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        // A closed stdout (`| head`) is a quiet end, after NVML was shut down.
        Ok(()) | Err(Stop::Closed) => ExitCode::SUCCESS,
        Err(Stop::Failed(msg)) => {
            eprintln!("nvml-latency: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Why a run ended early.
enum Stop {
    /// Stdout was closed.
    Closed,
    /// What failed.
    Failed(String),
}

impl From<String> for Stop {
    fn from(msg: String) -> Self {
        Stop::Failed(msg)
    }
}

/// Writes `text` and a newline to stdout.
fn out(text: &str) -> Result<(), Stop> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Stop::Closed),
        Err(e) => Err(Stop::Failed(format!("writing to stdout: {e}"))),
    }
}

/// One table row: a call's name, the code of its last call (or why it was not called)
/// and its timings.
struct Row {
    name: String,
    code: String,
    times: Vec<Duration>,
}

fn run(args: &Args) -> Result<(), Stop> {
    let start = Instant::now();
    // SAFETY: loading runs the library's initialisers; it is NVML (or the stand-in the
    // caller named), made to be loaded into any process.
    let lib =
        unsafe { NvmlLib::new(&args.lib) }.map_err(|e| format!("cannot load {}: {e}", args.lib))?;
    let loaded = start.elapsed();
    let init =
        call::sym(&lib.nvmlInit_v2).map_err(|_| "the library has no nvmlInit_v2".to_owned())?;
    let start = Instant::now();
    // SAFETY: nvmlInit_v2 takes no arguments.
    let code = unsafe { init() };
    let first_init = start.elapsed();

    out(&format!(
        "nvml-latency: {}, {} rounds, times in microseconds",
        args.lib, args.rounds
    ))?;
    let mut rows = vec![
        Row {
            name: "load library (dlopen, dlsym)".into(),
            code: "-".into(),
            times: vec![loaded],
        },
        Row {
            name: "nvmlInit_v2 (first)".into(),
            code: code_name(code),
            times: vec![first_init],
        },
    ];
    if code != b::nvmlReturn_enum_NVML_SUCCESS {
        out(&table(&rows))?;
        return Err(format!("nvmlInit_v2 returned {}", code_name(code)).into());
    }
    let result = measure(&lib, args, &mut rows);
    let cycles = if result.is_ok() { args.init_cycles } else { 0 };
    let (last_init, cycles_table) = reinit_cycles(&lib, cycles);
    if last_init == b::nvmlReturn_enum_NVML_SUCCESS {
        if let Ok(shutdown) = call::sym(&lib.nvmlShutdown) {
            // SAFETY: nvmlShutdown takes no arguments; it drops the reference taken by the
            // last successful nvmlInit_v2, and no probe (no handle) is alive any more.
            unsafe { shutdown() };
        }
    }
    result?;
    match cycles_table {
        Some(text) => out(&text),
        None => Ok(()),
    }
}

/// Times the system calls and every GPU's calls, printing a table for each.
fn measure(lib: &NvmlLib, args: &Args, rows: &mut Vec<Row>) -> Result<(), Stop> {
    out(&format!("driver {}", driver_version(lib)))?;
    rows.extend(time_rounds(probes::system(lib), args.rounds));
    out(&format!("\n{}", table(rows)))?;
    let count_fn = call::sym(&lib.nvmlDeviceGetCount_v2)?;
    let mut count = 0;
    // SAFETY: writes one unsigned int through the pointer.
    let code = unsafe { count_fn(&mut count) };
    if code != b::nvmlReturn_enum_NVML_SUCCESS {
        return Err(format!("nvmlDeviceGetCount_v2 returned {}", code_name(code)).into());
    }
    let gpus: Vec<u32> = match args.gpu {
        Some(g) if g < count => vec![g],
        Some(g) => return Err(format!("--gpu {g}: NVML sees {count} GPUs").into()),
        None => (0..count).collect(),
    };
    for index in gpus {
        let dev = handle(lib, index)?;
        out(&format!("\nGPU {index}: {}\n", device_name(lib, dev)))?;
        out(&table(&time_rounds(
            probes::device(lib, index, dev),
            args.rounds,
        )))?;
    }
    Ok(())
}

/// `cycles` times nvmlShutdown then nvmlInit_v2, each timed; returns the last init's
/// code (the session is held only after a success) and their table, if any cycle ran.
fn reinit_cycles(lib: &NvmlLib, cycles: usize) -> (nvmlReturn_t, Option<String>) {
    let (Ok(shutdown), Ok(init)) = (call::sym(&lib.nvmlShutdown), call::sym(&lib.nvmlInit_v2))
    else {
        return (b::nvmlReturn_enum_NVML_SUCCESS, None);
    };
    if cycles == 0 {
        return (b::nvmlReturn_enum_NVML_SUCCESS, None);
    }
    let mut down = Row {
        name: "nvmlShutdown (last reference)".into(),
        code: String::new(),
        times: vec![],
    };
    let mut up = Row {
        name: "nvmlInit_v2 (after nvmlShutdown)".into(),
        code: String::new(),
        times: vec![],
    };
    let mut last = b::nvmlReturn_enum_NVML_SUCCESS;
    for _ in 0..cycles {
        let start = Instant::now();
        // SAFETY: no arguments; drops the one reference this program holds, with no handle
        // or GPM sample of the session alive.
        down.code = code_name(unsafe { shutdown() });
        down.times.push(start.elapsed());
        let start = Instant::now();
        // SAFETY: no arguments.
        last = unsafe { init() };
        up.times.push(start.elapsed());
        up.code = code_name(last);
        if last != b::nvmlReturn_enum_NVML_SUCCESS {
            break;
        }
    }
    let title =
        format!("\nre-initialisation (nvmlShutdown, then nvmlInit_v2), cycles: {cycles}\n\n");
    (last, Some(title + &table(&[down, up])))
}

/// Calls every probe once per round, `rounds` times, and returns a row per probe.
fn time_rounds(mut probes: Vec<Probe<'_>>, rounds: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = probes
        .iter()
        .map(|p| Row {
            name: p.name.clone(),
            code: p.call.as_ref().err().cloned().unwrap_or_default(),
            times: Vec::with_capacity(rounds),
        })
        .collect();
    for _ in 0..rounds {
        for (probe, row) in probes.iter_mut().zip(&mut rows) {
            let Ok(call) = &mut probe.call else { continue };
            let start = Instant::now();
            let code = call();
            row.times.push(start.elapsed());
            row.code = code_name(code);
        }
    }
    rows
}

/// `rows` as a Markdown table (without a final newline).
fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(8);
    let line = |cells: [&str; 7]| {
        let [name, code, calls, min, median, p90, max] = cells;
        format!("| {name:width$} | {code:24} | {calls:>5} | {min:>10} | {median:>10} | {p90:>10} | {max:>10} |")
    };
    let mut text = line([
        "function",
        "last code",
        "calls",
        "min",
        "median",
        "p90",
        "max",
    ]);
    // The rule under the header: text columns plain, numeric ones right-aligned.
    let rule = |n: usize, end: &str| format!("{end:->n$}");
    let text_rules = [width + 2, 26].map(|n| rule(n, "-"));
    let numeric_rules = [7, 12, 12, 12, 12].map(|n| rule(n, ":"));
    let rules = [&text_rules[..], &numeric_rules[..]].concat();
    text += &format!("\n|{}|\n", rules.join("|"));
    for row in rows {
        let mut sorted = row.times.clone();
        sorted.sort();
        let us = |p: f64| match sorted.len() {
            0 => "-".to_owned(),
            n => {
                // Nearest rank: the smallest time with at least p of the calls at or below it.
                let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
                format!("{:.1}", sorted[rank - 1].as_secs_f64() * 1e6)
            }
        };
        let calls = sorted.len().to_string();
        let times = [0.0, 0.5, 0.9, 1.0].map(us);
        let [min, median, p90, max] = times.each_ref().map(String::as_str);
        text += &line([&row.name, &row.code, &calls, min, median, p90, max]);
        text.push('\n');
    }
    text.pop();
    text
}

/// NVML's handle for GPU `index` (valid until the session shuts down).
fn handle(lib: &NvmlLib, index: u32) -> Result<nvmlDevice_t, String> {
    let get = call::sym(&lib.nvmlDeviceGetHandleByIndex_v2)?;
    let mut dev: nvmlDevice_t = std::ptr::null_mut();
    // SAFETY: writes one handle through the pointer.
    let code = unsafe { get(index, &mut dev) };
    match code {
        b::nvmlReturn_enum_NVML_SUCCESS => Ok(dev),
        _ => Err(format!(
            "GPU {index}: nvmlDeviceGetHandleByIndex_v2 returned {}",
            code_name(code)
        )),
    }
}

/// The driver version, or the code that says why not.
fn driver_version(lib: &NvmlLib) -> String {
    let Ok(get) = call::sym(&lib.nvmlSystemGetDriverVersion) else {
        return call::MISSING.into();
    };
    let mut buf = [0; 256];
    // SAFETY: writes at most `length` bytes, the buffer's size, NUL-terminated.
    let code = unsafe { get(buf.as_mut_ptr(), 256) };
    c_string(&buf, code)
}

/// GPU `dev`'s name, or the code that says why not.
fn device_name(lib: &NvmlLib, dev: nvmlDevice_t) -> String {
    let Ok(get) = call::sym(&lib.nvmlDeviceGetName) else {
        return call::MISSING.into();
    };
    let mut buf = [0; 256];
    // SAFETY: writes at most `length` bytes, the buffer's size, NUL-terminated; `dev` is
    // a handle of the live session.
    let code = unsafe { get(dev, buf.as_mut_ptr(), 256) };
    c_string(&buf, code)
}

/// The NUL-terminated string NVML wrote into `buf` when `code` is SUCCESS.
fn c_string(buf: &[std::os::raw::c_char], code: nvmlReturn_t) -> String {
    if code != b::nvmlReturn_enum_NVML_SUCCESS {
        return code_name(code);
    }
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
