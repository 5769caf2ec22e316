//! The table of `gpupeekd`'s flags, in the order `--help` and gpupeekd(8) list them.
//! Each entry is the one declaration of its flag: parsing, `--help`, the man page's
//! OPTIONS list and the completion scripts come from it (see the gpupeek-flags crate).

use std::path::PathBuf;

use gpupeek_flags::complete::Shell;
use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use super::{
    parse_interval, parse_memory_pct, parse_power_pct, parse_release_after, parse_temp,
    parse_tracks, Args, NOTES,
};

/// `gpupeekd`.
pub const GPUPEEKD: Command<Args> = Command {
    name: "gpupeekd",
    usage: "gpupeekd [options]",
    about: "gpupeekd: sample NVIDIA GPUs through NVML and publish them in shared memory, so \
            that any number of readers (gpupeek, status bars, exporters) see them without \
            driver calls.",
    flags: FLAGS,
    after: NOTES,
};

/// A flag that sets a `bool` field.
macro_rules! set {
    ($field:ident) => {
        |a, _| {
            a.$field = true;
            Ok(())
        }
    };
}

const FLAGS: &[Flag<Args>] = &[
    Flag {
        spec: Spec {
            arity: Arity::Value("NAME"),
            man: r"Shared-memory segment name (default:
.BR $GPUPEEK_SHM ,
else
.BR gpupeek ,
that is
.IR /dev/shm/gpupeek ).",
            ..Spec::switch(
                "shm",
                "shared-memory segment name (default: $GPUPEEK_SHM, else \"gpupeek\", i.e. \
                 /dev/shm/gpupeek)",
            )
        },
        apply: |a, v| {
            a.shm = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DURATION"),
            man: r"Sampling period, e.g. 250ms, 1s, 1.5s, 60s, 2m or 1h; a bare number is seconds.
Default 1s, at least 10ms, at most 1h.",
            ..Spec::switch(
                "interval",
                "sampling period, e.g. 250ms, 1s, 1.5s, 60s (default 1s, at least 10ms)",
            )
        },
        apply: |a, v| {
            a.interval = parse_interval(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DURATION"),
            man: r"How often to sample each GPU's expensive values: process lists,
per-process utilisation and
.I /proc
details, ECC counts.
Same syntax; default 2s, and never more often than
.BR \-\-interval :
a shorter value means every tick.
The GPUs take turns: at the default 1s interval half of them list their
processes on one tick and the other half on the next; at
.B \-\-interval 10ms
each GPU still lists them once every 2 seconds.
A GPU that comes back (from sleep, an error or a driver restart) lists its
processes at once.",
            ..Spec::switch(
                "process-interval",
                "how often to sample each GPU's expensive values: process lists, \
                 per-process utilisation and /proc details, ECC counts (default 2s, the \
                 GPUs' turns spread over it; at least --interval); the process table keeps \
                 its contents in between",
            )
        },
        apply: |a, v| {
            a.process_interval = parse_interval(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("PATH"),
            values: Values::File,
            man: r"NVML library to load (default:
.I libnvidia\-ml.so.1
from the dynamic loader's path).",
            ..Spec::switch(
                "nvml-lib",
                "path of the NVML library to load (default: libnvidia-ml.so.1 from the \
                 loader path)",
            )
        },
        apply: |a, v| {
            a.nvml_lib = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DURATION"),
            man: NVML_TIMEOUT,
            ..Spec::switch(
                "nvml-timeout",
                "how long an NVML call may run before its GPU is published as \"not \
                 responding\" (the other GPUs and the heartbeat go on meanwhile; default 2s, \
                 10ms to 1h)",
            )
        },
        apply: |a, v| {
            a.nvml_timeout = parse_interval(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            man: RELEASE,
            ..Spec::switch(
                "release",
                "ask the gpupeekd running on the segment to let go of NVML, so that a GPU \
                 can be reset or its MIG mode changed (readers then say so), and wait until \
                 it has",
            )
        },
        apply: set!(release),
    },
    Flag {
        spec: Spec {
            man: r"Ask that daemon to take NVML back (SIGUSR2) and wait until it publishes again;
exit status as for
.BR \-\-release .",
            ..Spec::switch(
                "resume",
                "ask the gpupeekd running on the segment to take NVML back after --release, \
                 and wait until it publishes again",
            )
        },
        apply: set!(resume),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("CHOICE"),
            values: Values::Choices(&["auto", "full", "basic", "none"]),
            man: r#"What to publish about GPU processes, which every local user can read:
.BR auto ,
.BR full ,
.B basic
or
.BR none ;
see
.BR "PROCESS PRIVACY" ."#,
            ..Spec::switch(
                "process-info",
                "what to publish about GPU processes, which every local user can read: full \
                 (user, command line, CPU, host memory, container), basic (pid, GPU memory \
                 and utilisation only), none, or auto (default: full, but basic when /proc \
                 is mounted with hidepid, so the segment never shows more than /proc does)",
            )
        },
        apply: |a, v| {
            a.process_info = v.parse()?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DIR"),
            values: Values::Dir,
            man: r"Where the proc file system to resolve processes in is mounted (default
.IR /proc ;
e.g. the host's
.I /proc
mounted into the daemon's container).",
            ..Spec::switch(
                "proc-root",
                "where the proc filesystem to resolve processes in is mounted (default \
                 /proc; e.g. the host's /proc mounted into the daemon's container)",
            )
        },
        apply: |a, v| {
            a.proc_root = PathBuf::from(v);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            man: r"Stay in the foreground and log to standard error.
Without it the daemon detaches and logs to syslog.",
            ..Spec::switch(
                "foreground",
                "stay in the foreground and log to stderr (default: detach and log to syslog)",
            )
        },
        apply: set!(foreground),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DIR"),
            values: Values::Dir,
            man: r"Where sysfs is mounted, read for the GPUs' runtime power state (default
.IR /sys ).",
            ..Spec::switch(
                "sysfs-root",
                "where sysfs is mounted, read for the GPUs' runtime power state (default /sys)",
            )
        },
        apply: |a, v| {
            a.sysfs_root = PathBuf::from(v);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DURATION"),
            man: r"Release NVML once every GPU has been idle this long, so runtime power
management can
power the GPUs down (default 10s; 0s releases at the first idle tick; at most
1h).",
            ..Spec::switch(
                "release-after",
                "release NVML once every GPU has been idle this long, so runtime PM can \
                 power it down (default 10s; 0s releases at the first idle tick)",
            )
        },
        apply: |a, v| {
            a.release_after = parse_release_after(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec::switch(
            "no-runtime-pm",
            "ignore runtime power management: never read sysfs, always hold NVML and query \
             every GPU (for servers)",
        ),
        apply: set!(no_runtime_pm),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("CELSIUS"),
            ..Spec::switch(
                "alert-temp",
                "log an alert when a GPU reaches this temperature in °C (default 85; 0: never)",
            )
        },
        apply: |a, v| {
            a.alert_temp = parse_temp(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("PERCENT"),
            ..Spec::switch(
                "alert-memory",
                "log an alert when a GPU's memory is this percent used (default 95; 0: never)",
            )
        },
        apply: |a, v| {
            a.alert_memory = parse_memory_pct(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("PERCENT"),
            ..Spec::switch(
                "alert-power",
                "log an alert when a GPU draws this percent of its power limit (default 100; \
                 0: never)",
            )
        },
        apply: |a, v| {
            a.alert_power = parse_power_pct(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("REASONS"),
            man: r"Clock event reasons that log an alert, comma-separated:
.BR sw_power_cap ,
.BR hw_slowdown ,
.BR sw_thermal_slowdown ,
.BR hw_thermal_slowdown ,
.BR hw_power_brake_slowdown ;
or
.BR none .
Default: all but
.BR sw_power_cap ,
which is routine under load.",
            ..Spec::switch(
                "alert-throttle",
                "clock event reasons that log an alert, comma-separated: sw_power_cap, \
                 hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, \
                 hw_power_brake_slowdown; or none (default: all but sw_power_cap)",
            )
        },
        apply: |a, v| {
            a.alert_throttle = crate::alerts::parse_throttle(v)?;
            Ok(())
        },
    },
    Flag {
        spec: Spec::switch(
            "no-alerts",
            "log no alerts at all (not even for a lost GPU)",
        ),
        apply: set!(no_alerts),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("PATH"),
            values: Values::File,
            man: r#"Also write one line of text to
.I path
each tick, replaced atomically, for shell prompts to read without forking
(see
.BR "PROMPT FILE" ;
e.g.
.IR /run/gpupeek/prompt )."#,
            ..Spec::switch(
                "prompt-file",
                "also write one line of text to this file each tick, replaced atomically, \
                 for shell prompts to read without forking (e.g. /run/gpupeek/prompt; see \
                 --prompt-format)",
            )
        },
        apply: |a, v| {
            a.prompt_file = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("TEMPLATE"),
            man: PROMPT_FORMAT,
            ..Spec::switch(
                "prompt-format",
                "the template of the --prompt-file line, in gpupeek --format's language \
                 (default \"{util}% {mem_used:GiB:.1}G\"; plain text, no colours)",
            )
        },
        apply: |a, v| {
            a.prompt_format = Some(v.to_owned());
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            man: PROMPT_STOPPED,
            ..Spec::switch(
                "prompt-stopped",
                "only write \"gpupeekd stopped\" to --prompt-file and exit, touching no \
                 segment: for a service manager to run after the daemon died without a \
                 clean stop (ExecStopPost)",
            )
        },
        apply: set!(prompt_stopped),
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DIR"),
            values: Values::Dir,
            man: r"Directory of the history state file
.IR DIR / NAME .history
(NAME the segment's name): the tiered history is written there every
10 minutes and on a clean stop, atomically, and read back at start when the
segment does not hold it any more (a crash loses at most the last 10 minutes).
Created mode 0700 if missing; one that another user owns or that the group
or others can write to is not used (one log line says so).
Default
.BR $GPUPEEK_STATE_DIR ,
else
.I /var/lib/gpupeek
for root; none (history is not kept across a restart that loses the segment)
for other users.",
            ..Spec::switch(
                "state-dir",
                "directory of the history state file DIR/NAME.history, written every 10 minutes \
                 and on a clean stop, read at start (default: $GPUPEEK_STATE_DIR, else \
                 /var/lib/gpupeek for root, none otherwise)",
            )
        },
        apply: |a, v| {
            a.state_dir = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DIR"),
            values: Values::Dir,
            man: r#"Also publish one segment per Kubernetes pod on this node, as the file
.IR DIR / POD_UID /gpupeek
(see
.BR "POD VIEWS" ):
the same layout as the main segment, with only the GPUs (and MIG instances)
the pod is allocated or runs processes on, and only the pod's own processes,
their pids as the pod sees them.
A pod is known by the kubelet's pod-resources API
.RB ( \-\-kubelet\-socket )
and by the cgroups of the processes on the GPUs; a view is made when its pod
appears and removed when it goes, at most 256 of them.
Created mode 0755 if missing; one that another user owns or that the group or
others can write to is refused at start.
Default: no pod views."#,
            ..Spec::switch(
                "pod-views",
                "also publish one segment per Kubernetes pod, DIR/POD_UID/gpupeek, with \
                 only that pod's GPUs and processes (pids as the pod sees them), for the pod \
                 to mount read-only (default: none)",
            )
        },
        apply: |a, v| {
            a.pod_views = Some(PathBuf::from(v));
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("PATH"),
            values: Values::File,
            man: r"With
.BR \-\-pod\-views :
the kubelet's pod-resources socket, asked which pod each GPU is allocated to,
by a device plugin or by NVIDIA's DRA driver (read as the exporter of
.BR gpupeek (1)
reads them)
(default
.IR /var/lib/kubelet/pod\-resources/kubelet.sock ).
A kubelet that does not answer is said once in the log; pods then see the
GPUs their processes run on.",
            ..Spec::switch(
                "kubelet-socket",
                "with --pod-views: the kubelet's pod-resources socket, asked which pod each \
                 GPU is allocated to (default /var/lib/kubelet/pod-resources/kubelet.sock)",
            )
        },
        apply: |a, v| {
            a.kubelet_socket = PathBuf::from(v);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("DIR"),
            values: Values::Dir,
            man: r"With
.BR \-\-pod\-views :
the kubelet's pod log directory, whose entries
.IR NAMESPACE _ NAME _ UID
give the uid of each pod the pod-resources API names by namespace and name
(default
.IR /var/log/pods ).",
            ..Spec::switch(
                "pod-log-dir",
                "with --pod-views: the kubelet's pod log directory, whose entries \
                 NAMESPACE_NAME_UID give each allocated pod's uid (default /var/log/pods)",
            )
        },
        apply: |a, v| {
            a.pod_log_dir = PathBuf::from(v);
            Ok(())
        },
    },
    Flag {
        spec: Spec {
            arity: Arity::Value("N"),
            man: r"Tracks of tiered history in the segment: one per GPU, then one per MIG
instance, each about 700 KiB (10 minutes of samples, 6 hours of 10 s buckets,
7 days of 1 min buckets).
Default 16, at most 256; 0 keeps no tiered history.
A GPU or MIG instance beyond them has none (logged once).",
            ..Spec::switch(
                "history-tracks",
                "tracks of tiered history in the segment, one per GPU then per MIG \
                 instance, about 700 KiB each (default 16, at most 256; 0: none)",
            )
        },
        apply: |a, v| {
            a.history_tracks = parse_tracks(v)?;
            Ok(())
        },
    },
    Flag {
        spec: gpupeek_flags::complete::PRINT_COMPLETION,
        apply: |a, v| {
            a.print_completion = Some(Shell::parse(v)?);
            Ok(())
        },
    },
    Flag {
        spec: Spec::switch("version", "print the version and exit"),
        apply: set!(version),
    },
];

const NVML_TIMEOUT: &str = r"How long an NVML call may run before its GPU is published as
.B not responding
(default 2s, 10ms to 1h).
Every NVML call runs on a thread of its own GPU (or, for
.B nvmlInit
and the device count, on one more thread), never on the thread that
publishes: a tick waits for the GPUs at most three quarters of a period (or
the timeout, if shorter), then publishes each GPU's newest record.
A GPU whose call has not returned within the timeout (a GPU after an Xid, a
driver stuck in D state) keeps its name, UUID and bus id, shows no current
value, and is logged once; the other GPUs and the heartbeat go on, and it is
sampled again as soon as the call returns.
.B nvmlInit
is given 15 timeouts (it takes seconds on a large machine without persistence
mode); after that the segment says NVML error 10 (timeout), \(lqdriver not
responding\(rq, until it returns.";

const RELEASE: &str = r#"Ask the gpupeekd that writes the segment to let go of NVML (SIGUSR1), so that
a GPU can be reset
.RB ( "nvidia\-smi \-r" )
or its MIG mode changed, and wait until it has: NVML is shut down and the
segment says
.BR released ,
which readers report (gpupeek exits 10 and says how to take it back).
No NVML call is made until
.BR \-\-resume .
Exits 0 when done, 1 when the daemon did not do it in time (a call of its
has not returned), 3 when no daemon runs on the segment."#;

const PROMPT_FORMAT: &str = r#"The template of the
.B \-\-prompt\-file
line, in the language of
.BR gpupeek (1)'s
.BR \-\-format .
Default:
.BR "{util}% {mem_used:GiB:.1}G" ,
what
.BR gpupeek 's
prompt outputs show, as plain text (thresholds colour nothing here).
Sparklines
.RB ( {util:spark} )
draw the samples this daemon has appended to its history rings since it
started.
A bad template is a one-line usage error (exit status 2) before anything is
created; so is this flag without
.BR \-\-prompt\-file ."#;

const PROMPT_STOPPED: &str = r#"Only write
.B "gpupeekd stopped"
to the
.B \-\-prompt\-file
(atomically, as the daemon writes it), touch no segment, and exit: for a service
manager to run once the daemon is gone, since a daemon that was killed could not
write that line itself (the unit's
.BR ExecStopPost ).
Exit status 5, with the reason in one line, when the file cannot be written."#;
