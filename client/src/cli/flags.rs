//! The table of `gpupeek`'s own flags, in the order `--help` and gpupeek(1) list them:
//! gpustat's first, under gpustat's names, then gpupeek's. Each entry is the one
//! declaration of its flag (see [`super`]).

use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use super::{parse_codec, parse_power, parse_seconds, parse_width, set, Args};

/// Long names of the flags that may come before a command as well as after it.
pub const GLOBAL: [&str; 1] = ["shm"];

/// `--shm`, a flag of every command.
pub const SHM: Spec = Spec {
    arity: Arity::Value("NAME"),
    man: r"Shared-memory segment name, or the absolute path of a segment file such as a
pod's view (see gpupeekd(8), POD VIEWS)
(default:
.BR $GPUPEEK_SHM ,
else
.BR gpupeek ).
It may come before a command as well as after it.",
    ..Spec::switch(
        "shm",
        "shared-memory segment name, or the absolute path of a segment file such as a \
         pod's view (default: $GPUPEEK_SHM, else \"gpupeek\")",
    )
};

/// The `--output` kinds, for completion (each is checked to parse in the tests).
pub const OUTPUT_KINDS: &[&str] = &[
    "text",
    "waybar",
    "polybar",
    "tmux",
    "i3blocks",
    "i3status-rust",
    "bash",
    "zsh",
    "fish",
    "starship",
    "p10k",
];

/// `gpupeek` without a command.
pub const MAIN: Command<Args> = Command {
    name: "gpupeek",
    usage: "gpupeek [-cupfFaV] [-e [CODEC]] [-P [WHAT]] [-i [SECS]] [options]\n       \
            gpupeek [--format TEMPLATE | -o KIND] [--follow] [options]\n       \
            gpupeek query|metrics|serve [options]",
    about: "gpupeek: show NVIDIA GPU status from gpupeekd's shared memory, gpustat-style, \
            without a single driver call.",
    flags: FLAGS,
    after: "",
};

const FLAGS: &[Flag<Args>] = &[
    Flag {
        spec: Spec {
            short: Some('c'),
            ..Spec::switch("show-cmd", "show the command name of each process")
        },
        apply: set!(show_cmd),
    },
    Flag {
        spec: Spec {
            short: Some('u'),
            ..Spec::switch("show-user", "show the user name of each process")
        },
        apply: set!(show_user),
    },
    Flag {
        spec: Spec {
            short: Some('p'),
            ..Spec::switch("show-pid", "show the pid of each process")
        },
        apply: set!(show_pid),
    },
    Flag {
        spec: Spec {
            short: Some('F'),
            aliases: &["show-fan"],
            ..Spec::switch("show-fan-speed", "show fan speed")
        },
        apply: set!(show_fan_speed),
    },
    Flag {
        spec: Spec {
            short: Some('f'),
            aliases: &["full-process-info"],
            ..Spec::switch(
                "show-full-cmd",
                "show a line per process with its CPU use, host memory and full command \
                 line",
            )
        },
        apply: set!(show_full_cmd),
    },
    Flag {
        spec: Spec {
            man: BY_USER,
            ..Spec::switch(
                "by-user",
                "show GPUs, processes, GPU memory and utilisation per user instead of per GPU",
            )
        },
        apply: set!(by_user),
    },
    Flag {
        spec: Spec {
            man: BY_CONTAINER,
            ..Spec::switch(
                "by-container",
                "show GPUs, processes, GPU memory and utilisation per container (docker, \
                 containerd, CRI-O, podman, lxc, Kubernetes pod) instead of per GPU; \
                 processes in no container are the \"host\" row",
            )
        },
        apply: set!(by_container),
    },
    Flag {
        spec: Spec {
            short: Some('V'),
            man: VERDICT,
            ..Spec::switch(
                "verdict",
                "after the utilisation, say whether the GPU is really working: thermal, \
                 power-capped, hw-slowdown, starved, idle-holding or healthy (thresholds: \
                 $GPUPEEK_VERDICT_THRESHOLDS, e.g. \"busy=80,starved=30,idle=300,idle_mem=1024\")",
            )
        },
        apply: set!(verdict),
    },
    Flag {
        spec: Spec {
            short: Some('e'),
            arity: Arity::Optional("CODEC", "enc,dec"),
            values: Values::Choices(&["enc", "dec", "enc,dec"]),
            man: r"Show encoder and/or decoder utilisation:
.BR enc ,
.B dec
or
.B enc,dec
(a bare
.B \-e
means both; an empty value, none), as gpustat takes them.",
            ..Spec::switch(
                "show-codec",
                "show encoder/decoder utilisation: enc, dec or enc,dec (bare: both)",
            )
        },
        apply: |a, v| {
            a.show_codec = parse_codec(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('P'),
            arity: Arity::Optional("WHAT", "draw,limit"),
            values: Values::Choices(&["draw", "limit", "draw,limit", "limit,draw"]),
            man: r"Show power draw, and the limit:
.B draw
alone, or
.BR limit ,
.B draw,limit
or
.B limit,draw
for both (a bare
.B \-P
means both; an empty value, none), as gpustat takes them.",
            ..Spec::switch(
                "show-power",
                "show power draw, and the limit: draw, or limit, draw,limit or \
                 limit,draw for both (bare: both)",
            )
        },
        apply: |a, v| {
            a.show_power = parse_power(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('a'),
            man: r"Show everything:
.BR \-c\ \-u\ \-p\ \-F\ \-e\ \-P .",
            ..Spec::switch("show-all", "show everything: -c -u -p -F -e -P")
        },
        apply: set!(show_all),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("IDS"),
            man: r"Only these GPUs, by index, in this order, e.g.
.BR \-\-id\ 0,2 .
An entry may also name a MIG GPU instance,
.B 0.gi13
(GPU instance 13 of GPU 0), or a MIG device by its UUID
.RB ( MIG\-... ):
.B \-\-format
and the status-bar outputs then show that instance as a GPU of its own (its own
memory and processes, its GPU's temperature, power and clocks, no utilisation);
the table and
.B \-\-json
show its GPU.",
            ..Spec::switch(
                "id",
                "only these GPUs, by index, in this order, e.g. --id 0,2; 0.gi13 or a MIG-... \
                 UUID names a MIG instance (shown on its own by --format and the bars)",
            )
        },
        apply: |a, v| {
            a.id = Some(crate::select::parse(v)?);
            Ok(())
        },
    },
    Flag {
        spec: Spec::switch("no-header", "do not print the header line"),
        apply: set!(no_header),
    },
    Flag {
        spec: Spec::switch("no-processes", "do not print processes"),
        apply: set!(no_processes),
    },
    Flag {
        spec: Spec {
            man: r"Print gpustat-compatible JSON; see
.BR JSON .",
            ..Spec::switch("json", "print gpustat-compatible JSON")
        },
        apply: set!(json),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("N"),
            ..Spec::switch(
                "gpuname-width",
                "width of the GPU name column, 0 to 1000 (default: the longest name)",
            )
        },
        apply: |a, v| {
            a.gpuname_width = Some(parse_width(v)?);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            aliases: &["color"],
            ..Spec::switch(
                "force-color",
                "colour even when stdout is not a terminal or $NO_COLOR is set",
            )
        },
        apply: set!(color),
    },
    Flag {
        spec: Spec {
            man: r"Never colour.
Not allowed with
.BR \-\-force\-color ,
as in gpustat.",
            ..Spec::switch("no-color", "never colour")
        },
        apply: set!(no_color),
    },
    Flag {
        spec: SHM,
        apply: |a, v| {
            a.shm = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('i'),
            aliases: &["interval"],
            arity: Arity::Optional("SECS", "1"),
            man: WATCH,
            ..Spec::switch(
                "watch",
                "redraw every SECS seconds (0.01 to 86400; bare: 1) with utilisation \
                 sparklines, until q or Ctrl-C",
            )
        },
        apply: |a, v| {
            a.watch = Some(parse_seconds(v)?);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("TEMPLATE"),
            man: r#"Print one line from
.I template
(see
.BR "FORMAT TEMPLATES" )
instead of the table."#,
            ..Spec::switch(
                "format",
                "print one line from this template instead of the table (see below)",
            )
        },
        apply: |a, v| {
            a.format = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('o'),
            arity: Arity::Value("KIND"),
            values: Values::Choices(OUTPUT_KINDS),
            man: OUTPUT,
            ..Spec::switch(
                "output",
                "print a line for a status bar or prompt: text, waybar, polybar, tmux, \
                 i3blocks, i3status-rust, bash, zsh, fish, starship or p10k",
            )
        },
        apply: |a, v| {
            a.output = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            man: FOLLOW,
            ..Spec::switch(
                "follow",
                "keep running and print a line at each daemon update (streaming bar modules)",
            )
        },
        apply: set!(follow),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("TEXT"),
            man: r#"Text shown when every selected GPU is asleep (default "GPU asleep";
prompts print nothing)."#,
            ..Spec::switch(
                "asleep",
                "text shown when every selected GPU is asleep (default: \"GPU asleep\" in \
                 bars, nothing in prompts)",
            )
        },
        apply: |a, v| {
            a.asleep = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: gpupeek_flags::complete::PRINT_COMPLETION,
        apply: |a, v| {
            a.print_completion = Some(gpupeek_flags::complete::Shell::parse(v)?);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            short: Some('v'),
            ..Spec::switch("version", "print the version and exit")
        },
        apply: set!(version),
    },
];

const BY_USER: &str = r"Show GPUs, processes, GPU memory and utilisation per user instead of per GPU.
A process on two GPUs counts as two processes; its CPU use and host memory
count once.
GPU processes no user row can count (all of them when the daemon publishes no
process details, see
.BR gpupeekd (8),
or those beyond the process table) are counted in a last line, and in the JSON
document's
.BR processes_not_shown .
GPUs whose processes cannot be read at all (lost, failing, or the driver not
responding) are named in another line, and in
.BR gpus_not_counted .";

const BY_CONTAINER: &str = r"Show GPUs, processes, GPU memory and utilisation per container instead of per
GPU, with the columns of
.BR \-\-by\-user .
A container is named
.IB runtime : id
(the id's first 12 characters; the JSON document has the whole id and the
Kubernetes pod uid), as
.BR gpupeekd (8)
read it from each process's cgroup: docker, containerd, CRI\-O, podman, lxc,
or a Kubernetes pod's container whose runtime the cgroup does not name
.RB ( kubepods ).
A
.B POD
column (the pod uid) appears when some container is in a pod.
Processes in no container are counted in the
.B host
row; processes whose details the daemon does not publish (its process policy is
not
.BR full )
cannot be placed and are counted in a
.B ?
row.";

const VERDICT: &str = r"After the utilisation, say whether the GPU is really working, the first that
applies:
.B thermal
(a thermal slowdown clock event reason),
.B power\-capped
(software power cap or hardware power brake),
.B hw\-slowdown
(hardware slowdown alone),
.B starved
(utilisation at least
.I busy
% but GPM SM activity below
.I starved
%),
.B idle\-holding
(0 % utilisation for at least
.I idle
seconds with at least
.I idle_mem
MiB in use) or
.BR healthy .
No verdict is shown when an input is missing, e.g. a busy GPU without GPM
metrics (GPM needs Hopper or newer). Without
.B \-V
the table is gpustat's.";

const WATCH: &str = r#"Redraw every
.I secs
seconds (0.01 to 86400; default 1; gpustat's
.BR \-i ,
also spelled
.BR \-\-interval )
on the alternate screen, with a utilisation and memory sparkline per GPU
under the
table.
The sparklines come from the daemon's history rings (one sample per
max(period, 1 s), see
.BR gpupeek\-shm (5)),
so they show the last 40 samples from the first frame on (fewer when the
terminal is narrower).
Each frame fits the terminal, asked for its size at every redraw and at once
on a resize: a line too wide is cut (ending in \[u2026]), and a frame too tall
keeps its top and ends in
.RI "\[u2026] " N " more" .
A daemon that is not up (yet, or any more) is a line saying why, and
.B \-i
waits for it rather than exiting (see
.BR "EXIT STATUS" ).
.B q
or Ctrl-C quits and restores the terminal."#;

const OUTPUT: &str = r#"Print a line in a host program's protocol:
.B text
(ANSI colours on a terminal),
.B waybar
(JSON with text, tooltip, class, percentage, alt; the tooltip has a line
per GPU, only its state for one that is asleep, lost or in error;
percentage is the mean utilisation of the GPUs that report it, as {util}),
.B polybar
(%{F#rrggbb} colours),
.B tmux
(#[fg=...] colours),
.B i3blocks
(i3bar JSON),
.B i3status-rust
(custom block JSON),
.BR bash ,
.BR zsh ,
.BR fish ,
.B starship
or
.BR p10k .
The class is ok, warning or critical from the template's thresholds,
suspended when
every selected GPU sleeps, not_responding (critical) when the driver does not
answer for a selected GPU (the line then ends in
.RB \(dq [GPU\ 1\ not\ responding] \(dq,
or is
.RB \(dq "GPU not responding" \(dq
when no selected GPU is awake, in prompts too), released (grey, text
.RB \(dq "GPU: released" \(dq)
when the daemon has let go of the driver on request, stopped when the daemon
is not running or not
responding,
error otherwise; with any kind but text a daemon that is down is such a line
and exit
status 0."#;

const FOLLOW: &str = r"Keep running and print a line at each daemon update, sleeping on a futex the
daemon
wakes (no polling). Prints the stopped line when the daemon stops or dies,
and follows
a restarted one.
.B \-\-json ,
.B \-\-by\-user
and
.B \-\-watch
print the table's view, so they are a usage error (exit status 2) with
.BR \-\-format ,
.B \-\-output
or
.BR \-\-follow .";
