//! The flag tables of `gpupeek history` and `gpupeek plot`, which read the same window
//! of the daemon's history: `--since`, `-i/--id` and `--metric` are declared once here
//! and shared by both.

use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use crate::cli::flags::SHM;
use crate::{history, plot};

/// `--since` of `history` and `plot`.
const SINCE: Spec = Spec {
    arity: Arity::Value("DURATION"),
    man: r"How far back the window goes from the daemon's last update: a whole number
and a unit,
.BR s ,
.BR m ,
.B h
or
.B d
(default
.BR 10m ;
e.g.
.BR 90s ,
.BR 6h ,
.BR 7d ).
The window holds what the daemon kept of that time, the finest it has for each
part: the last 600 samples of each GPU (10 minutes at one a second, longer when
the daemon's period is), then 10\-second buckets for 6 hours, then 1\-minute
buckets for 7 days; gaps where a GPU was asleep, lost or not answering.",
    ..Spec::switch("since", "how far back, e.g. 90s, 10m (the default), 6h, 7d")
};

/// `-i/--id` of `history` and `plot`.
const ID: Spec = Spec {
    short: Some('i'),
    arity: Arity::Value("IDS"),
    ..Spec::switch(
        "id",
        "only these GPUs, in this order: comma-separated indices, 0.gi13 or MIG-... UUIDs \
         (a MIG instance names its GPU)",
    )
};

/// `--metric` of `history` and `plot`.
const METRIC: Spec = Spec {
    arity: Arity::Value("METRICS"),
    man: r"Comma-separated metrics:
.B util
(GPU utilisation, %),
.B mem_used
(memory used, MiB),
.B power
(power draw, W),
.B temp
(temperature, \(deC),
.B sm_clock
(SM clock, MHz) and
.B sm_active
(SM activity, %).
.B history
exports all of them by default;
.B plot
draws a panel for each metric the window has a value of.",
    ..Spec::switch(
        "metric",
        "comma-separated metrics: util, mem_used, power, temp, sm_clock, sm_active",
    )
};

/// `--since`, `-i/--id` and `--metric`, for a table whose arguments have `since`, `id`
/// and `metrics` (a macro: each table's `apply` takes its own arguments type).
macro_rules! window_flag {
    (since) => {
        Flag {
            spec: SINCE,
            apply: |a, v| {
                a.since = history::parse_since(v)?;
                Ok(())
            },
        }
    };
    (id) => {
        Flag {
            spec: ID,
            apply: |a, v| {
                a.id = Some(crate::select::parse(v)?);
                Ok(())
            },
        }
    };
    (metric) => {
        Flag {
            spec: METRIC,
            apply: |a, v| {
                a.metrics = Some(history::parse_metrics(v)?);
                Ok(())
            },
        }
    };
}

/// `gpupeek history`.
pub const HISTORY: Command<history::Args> = Command {
    name: "gpupeek history",
    usage: "gpupeek history (--csv | --json) [--since DURATION] [-i IDS] [--metric METRICS] \
            [--shm NAME]",
    about: "Export the daemon's history of the GPUs over a window, as CSV or JSON: a row \
            (or object) per GPU and point with the minimum, mean and maximum of each \
            metric, empty (null) where the GPU had no value.",
    flags: &[
        Flag {
            spec: Spec::switch(
                "csv",
                "CSV: time, unix_ns, gpu, uuid, span_ns, samples, then METRIC_min, \
                 METRIC_mean, METRIC_max per metric",
            ),
            apply: |a, _| {
                a.format = Some(history::Format::Csv);
                Ok(())
            },
        },
        Flag {
            spec: Spec::switch(
                "json",
                "JSON: the window, its metrics and each GPU's points",
            ),
            apply: |a, _| {
                a.format = Some(history::Format::Json);
                Ok(())
            },
        },
        window_flag!(since),
        window_flag!(id),
        window_flag!(metric),
        shm_flag!(),
    ],
    after: "Example: gpupeek history --since 6h --metric util,power --csv > gpus.csv\n\n\
            Columns, keys and units are listed in gpupeek(1), COMMANDS, history. Exit status 12: the \
            window holds no sample of the selected GPUs.",
};

/// `gpupeek plot`.
pub const PLOT: Command<plot::Args> = Command {
    name: "gpupeek plot",
    usage: "gpupeek plot [-o FILE.png|FILE.svg | --term] [--since DURATION] [-i IDS] \
            [--metric METRICS] [--width N] [--height N] [--no-color] [--shm NAME]",
    about: "Chart the daemon's history of the GPUs: a panel per metric, a line per GPU, \
            gaps where a GPU had no value and a band from minimum to maximum where a point \
            sums up several samples; as a PNG or SVG file, or in the terminal.",
    flags: &[
        Flag {
            spec: Spec {
                short: Some('o'),
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "output",
                    "write the chart to FILE, a PNG or an SVG image by its extension",
                )
            },
            apply: |a, v| {
                a.output = Some((v.to_owned(), plot::Image::of(v)?));
                Ok(())
            },
        },
        Flag {
            spec: Spec::switch(
                "term",
                "draw the chart in the terminal with braille characters (the default \
                 without -o)",
            ),
            apply: |a, _| {
                a.term = true;
                Ok(())
            },
        },
        window_flag!(since),
        window_flag!(id),
        window_flag!(metric),
        Flag {
            spec: Spec {
                arity: Arity::Value("N"),
                ..Spec::switch(
                    "width",
                    "width in pixels (default 1200) or, in the terminal, columns (default: \
                     the terminal's, else 80)",
                )
            },
            apply: |a, v| {
                a.width = Some(plot::parse_size(v)?);
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("N"),
                ..Spec::switch(
                    "height",
                    "height in pixels (default 100 plus 260 per panel) or, in the terminal, \
                     lines (default 2 plus 10 per panel)",
                )
            },
            apply: |a, v| {
                a.height = Some(plot::parse_size(v)?);
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                aliases: &["no-colour"],
                ..Spec::switch(
                    "no-color",
                    "terminal chart without colours, GPUs told apart by dashed and dotted \
                     lines (also when NO_COLOR is set and not empty, or off a terminal)",
                )
            },
            apply: |a, _| {
                a.no_color = true;
                Ok(())
            },
        },
        shm_flag!(),
    ],
    after: "Examples:\n  gpupeek plot\n  gpupeek plot --since 6h -o gpus.png\n  \
            gpupeek plot -i 0,1 --metric util,mem_used -o gpus.svg --width 1600\n\n\
            It runs gpupeek-plot, installed next to gpupeek. Exit status 12: the window \
            holds no sample of the selected GPUs.",
};
