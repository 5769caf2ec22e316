//! Subcommands: `gpupeek query`, `gpupeek metrics`, `gpupeek serve`, `gpupeek top`,
//! `gpupeek history` and `gpupeek plot` (their tables in [`history`]) and `gpupeek fleet`
//! (its table in `commands/fleet.rs`), and their flag tables. [`crate::cli::parse`] reads
//! the command name and parses the rest of the line
//! with its table; `--shm` may come before the name too. nvidia-smi users write
//! `--query-gpu=...`: `--flag=value` and `--flag value` are the same.

use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use crate::cli::{flags::SHM, Invocation};
use crate::{metrics, query, serve, top};

/// The entries `metrics` and `serve` (and, for `--shm`, every command) share, declared
/// once: a macro, since each table's `apply` takes its own arguments type (every one has
/// `shm`, and `metrics` and `serve` have `options`).
macro_rules! shm_flag {
    () => {
        value_flag!(SHM, shm)
    };
}

macro_rules! names_flag {
    () => {
        Flag {
            spec: NAMES_FLAG,
            apply: |a, v| {
                a.options.names = metrics::Names::parse(v)?;
                Ok(())
            },
        }
    };
}

/// A switch that sets `FIELD` (`--json`, `--insecure`, ...; `options.per_user`...).
macro_rules! switch {
    ($spec:expr, $($field:ident).+) => {
        Flag {
            spec: $spec,
            apply: |a, _| {
                a.$($field).+ = true;
                Ok(())
            },
        }
    };
}

/// A flag whose value is kept as given: in `FIELD` (an `Option<String>`), or pushed onto
/// it with `push` (a repeatable flag's `Vec<String>`).
macro_rules! value_flag {
    ($spec:expr, $field:ident) => {
        Flag {
            spec: $spec,
            apply: |a, v| {
                a.$field = Some(v.to_owned());
                Ok(())
            },
        }
    };
    ($spec:expr, push $field:ident) => {
        Flag {
            spec: $spec,
            apply: |a, v| {
                a.$field.push(v.to_owned());
                Ok(())
            },
        }
    };
}

mod fleet;
pub use fleet::FLEET;
mod history;

pub use history::{HISTORY, PLOT};

/// The commands, by name.
pub const NAMES: [&str; 7] = [
    "query", "metrics", "serve", "top", "history", "plot", "fleet",
];

/// Appended to `gpupeek --help`: each command's usage and what it does, from its table.
pub fn help() -> String {
    let mut out = String::from(
        "\nCommands (each has its own --help; --shm may come before or after the command):\n",
    );
    for (usage, about) in [
        (QUERY.usage, QUERY.about),
        (METRICS.usage, METRICS.about),
        (SERVE.usage, SERVE.about),
        (TOP.usage, TOP.about),
        (HISTORY.usage, HISTORY.about),
        (PLOT.usage, PLOT.about),
        (FLEET.usage, FLEET.about),
    ] {
        out += &format!("  {}\n", usage.trim_start_matches("gpupeek "));
        out += &gpupeek_flags::help::wrap(about, 6);
    }
    out
}

/// `gpupeek query`.
pub const QUERY: Command<query::Args> = Command {
    name: "gpupeek query",
    usage: "gpupeek query --query-gpu=FIELDS [--format=csv[,noheader][,nounits]] [options]",
    about: "Query GPU fields by nvidia-smi's names and print them as nvidia-smi's CSV.",
    flags: &[
        Flag {
            spec: Spec {
                arity: Arity::Value("FIELDS"),
                man: QUERY_GPU,
                ..Spec::switch(
                    "query-gpu",
                    "comma-separated fields, e.g. index,name,memory.used,utilization.gpu",
                )
            },
            apply: |a, v| {
                a.query_gpu = v.to_owned();
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("FORMAT"),
                ..Spec::switch(
                    "format",
                    "csv, optionally followed by \",noheader\" and/or \",nounits\" (default csv)",
                )
            },
            apply: |a, v| {
                a.format = v.to_owned();
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                short: Some('i'),
                arity: Arity::Value("IDS"),
                ..Spec::switch(
                    "id",
                    "only these GPUs: comma-separated indices, UUIDs, PCI bus ids or board \
                     serial numbers (a MIG device's UUID names its GPU)",
                )
            },
            apply: |a, v| {
                a.id = Some(v.to_owned());
                Ok(())
            },
        },
        shm_flag!(),
        Flag {
            spec: Spec::switch(
                "help-query-gpu",
                "list every field --query-gpu takes, with what it is, as nvidia-smi does",
            ),
            apply: |a, _| {
                a.help_query_gpu = true;
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("FIELDS"),
                man: QUERY_COMPUTE_APPS,
                ..Spec::switch(
                    "query-compute-apps",
                    "a line per compute process instead: pid, process_name, used_memory, \
                     gpu_uuid, gpu_bus_id, gpu_name, gpu_serial, timestamp",
                )
            },
            apply: |a, v| {
                a.query_compute_apps = Some(v.to_owned());
                Ok(())
            },
        },
        Flag {
            spec: Spec::switch(
                "help-query-compute-apps",
                "list every field --query-compute-apps takes, as nvidia-smi does",
            ),
            apply: |a, _| {
                a.help_query_compute_apps = true;
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                short: Some('L'),
                ..Spec::switch(
                    "list-gpus",
                    "list the GPUs as nvidia-smi -L does: \"GPU 0: NAME (UUID: ...)\"",
                )
            },
            apply: |a, _| {
                a.list_gpus = true;
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                short: Some('l'),
                arity: Arity::Value("SEC"),
                man: LOOP,
                ..Spec::switch(
                    "loop",
                    "print again at each daemon update at least SEC seconds after the last",
                )
            },
            apply: |a, v| {
                a.loop_s = Some(v.to_owned());
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("MS"),
                ..Spec::switch(
                    "loop-ms",
                    "the same in milliseconds (nvidia-smi's -lms MS is accepted too)",
                )
            },
            apply: |a, v| {
                a.loop_ms = Some(v.to_owned());
                Ok(())
            },
        },
    ],
    after: query::NOTE,
};

/// `gpupeek metrics`.
pub const METRICS: Command<metrics::Args> = Command {
    name: "gpupeek metrics",
    usage: "gpupeek metrics [--names NAMES] [--per-process] [--per-user] [--pod-labels] \
            [--shm NAME]",
    about: "Print the GPUs as Prometheus metrics (text exposition format), e.g. for \
            node_exporter's textfile collector.",
    flags: &[
        names_flag!(),
        switch!(PER_PROCESS, options.per_process),
        switch!(PER_USER, options.per_user),
        switch!(POD_LABELS, options.pod_labels),
        shm_flag!(),
    ],
    after: "Example (cron or a systemd timer):\n  gpupeek metrics > \
            /var/lib/node_exporter/gpupeek.prom.tmp && mv \
            /var/lib/node_exporter/gpupeek.prom.tmp /var/lib/node_exporter/gpupeek.prom",
};

/// `gpupeek serve`.
pub const SERVE: Command<serve::Args> = Command {
    name: "gpupeek serve",
    usage: "gpupeek serve [--listen HOST:PORT] [--web.config.file FILE] \
            [--web.max-streams N] [--node-name NAME] [--names NAMES] [--per-process] \
            [--per-user] [--pod-labels] [--kubelet.pod-resources-socket PATH] [--shm NAME]",
    about: "Serve the GPUs as Prometheus metrics at http://ADDR/metrics, reading the segment \
            at each scrape; /events streams each daemon update, /-/healthy and /-/ready \
            answer probes.",
    flags: &[
        Flag {
            spec: Spec {
                arity: Arity::Value("HOST:PORT"),
                ..Spec::switch(
                    "listen",
                    "address to listen on (default 127.0.0.1:9477; port 0 picks a free one)",
                )
            },
            apply: |a, v| {
                a.listen = v.to_owned();
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                man: WEB_CONFIG_MAN,
                ..Spec::switch(
                    "web.config.file",
                    "Prometheus web configuration file: TLS, basic auth (bcrypt), headers",
                )
            },
            apply: |a, v| {
                a.web_config = Some(v.to_owned());
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("N"),
                man: MAX_STREAMS_MAN,
                ..Spec::switch(
                    "web.max-streams",
                    "/events streams open at once (default 16); one more is answered 503",
                )
            },
            apply: |a, v| {
                a.max_streams = v
                    .parse()
                    .ok()
                    .filter(|&n| (1..=1024).contains(&n))
                    .ok_or_else(|| {
                        format!("--web.max-streams {v:?}: give a number from 1 to 1024")
                    })?;
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("NAME"),
                man: NODE_NAME_MAN,
                ..Spec::switch(
                    "node-name",
                    "the node's name in /events, /snapshot and gpupeek_node_info (default the host name)",
                )
            },
            apply: |a, v| {
                if v.is_empty() || v.chars().any(char::is_control) {
                    return Err(format!("--node-name {v:?}: give a non-empty name"));
                }
                a.node_name = Some(v.to_owned());
                Ok(())
            },
        },
        names_flag!(),
        switch!(PER_PROCESS, options.per_process),
        switch!(PER_USER, options.per_user),
        switch!(POD_LABELS, options.pod_labels),
        Flag {
            spec: Spec {
                arity: Arity::Value("PATH"),
                values: Values::File,
                man: KUBELET_MAN,
                ..Spec::switch(
                    "kubelet.pod-resources-socket",
                    "name pods and containers from the kubelet's pod-resources API on this \
                     socket (usually /var/lib/kubelet/pod-resources/kubelet.sock), polled \
                     every 10 s; implies --pod-labels",
                )
            },
            apply: |a, v| {
                a.kubelet_socket = Some(v.into());
                a.options.pod_labels = true;
                Ok(())
            },
        },
        shm_flag!(),
    ],
    after: "Run it as an unprivileged user (it needs only to read /dev/shm/gpupeek); \
            contrib/systemd/gpupeek-exporter.service does. Use --listen 0.0.0.0:9477 to be \
            scraped from other hosts. Stop it with SIGTERM or SIGINT.",
};

/// `gpupeek top`.
pub const TOP: Command<top::Args> = Command {
    name: "gpupeek top",
    usage: "gpupeek top [--no-color] [--shm NAME]",
    about: "An interactive monitor of the GPUs and their processes: graphs of the daemon's \
            history, sort, filter, a process's detail, signals. Press ? in it for the keys; \
            see gpupeek-top(1).",
    flags: &[
        Flag {
            spec: Spec {
                aliases: &["no-colour"],
                man: r"No colours (bold and reverse video only); also when
.B NO_COLOR
is set and not empty.
Colours are the 16 basic ones, so 16\- and 256\-colour terminals show the same.",
                ..Spec::switch(
                    "no-color",
                    "no colours (also when NO_COLOR is set and not empty)",
                )
            },
            apply: |a, _| {
                a.no_color = true;
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                short: Some('V'),
                ..Spec::switch("version", "print the version and exit")
            },
            apply: |a, _| {
                a.version = true;
                Ok(())
            },
        },
        shm_flag!(),
    ],
    after: "It reads only the segment (no driver call) and waits, saying so, while the \
            daemon is missing, restarting or stale. It runs gpupeek-top, installed next to \
            gpupeek.",
};

/// `--pod-labels` of `metrics` and `serve`.
const POD_LABELS: Spec = Spec {
    man: POD_LABELS_MAN,
    ..Spec::switch(
        "pod-labels",
        "label per-process and per-GPU series with their container and Kubernetes pod \
         (container_id, pod_uid, and with serve's --kubelet.pod-resources-socket \
         namespace, pod, container)",
    )
};

const POD_LABELS_MAN: &str = r"Label series with the container and Kubernetes pod they are about.
Per-process series
.RB ( \-\-per\-process )
gain
.B container_id
.RI ( runtime :// id ,
as kube\-state\-metrics writes it),
.B pod_uid
(both from the process's cgroup, as
.BR gpupeekd (8)
published them), and
.BR namespace ,
.B pod
and
.BR container :
the names of the pod and container the kubelet's pod\-resources API says the
process's GPU (on a MIG GPU, its GPU instance) is assigned to
.RB ( serve
.BR \-\-kubelet.pod\-resources\-socket ).
Every per-process series has all five labels, empty when unknown.
Per-GPU series (under gpupeek's and dcgm\-exporter's names;
nvidia_gpu_exporter's have no such labels) gain, each only when known,
.BR namespace ,
.B pod
and
.B container
of the one container the GPU is assigned to, and
.B pod_uid
and
.B container_id
when every process on the GPU is in that same pod or container;
so do the MIG devices' series (gpupeek_mig_*), by their GPU instance.
With
.B \-\-names dcgm
the labels are dcgm\-exporter's:
.BR pod ,
.BR namespace ,
.B container
and
.B pod_uid
(no
.BR container_id ),
and for a device of NVIDIA's DRA driver the labels dcgm\-exporter adds when
its DRA support is on:
.BR dra_claim_name ,
.BR dra_claim_namespace ,
.BR dra_driver_name ,
.BR dra_pool_name ,
.B dra_device_name
and, for a MIG device,
.B dra_mig_profile
and
.BR dra_mig_device_uuid .
The pod\-resources API names pods but not their uids, so a process joins
its pod by the GPU it runs on: a GPU several containers share (time\-slicing,
MPS) names none of them.
Privacy: pod names come only from what the segment already shows this reader:
a process's only when the daemon publishes its owner, a GPU's only when the
daemon's process policy is
.B full
(see
.BR gpupeekd (8)).";

const KUBELET_MAN: &str = r"Ask the kubelet's pod\-resources API
.RB ( v1.PodResourcesLister/List ,
gRPC) on this unix socket, usually
.IR /var/lib/kubelet/pod\-resources/kubelet.sock ,
which pods and containers the GPUs are assigned to: at start and then every
10 s, in a thread of its own, each call given 2 s, so a scrape never waits on
the kubelet.
Device ids of NVIDIA's device plugin (GPU and MIG UUIDs, indices,
.I N:M
for MIG device M of GPU N under its index strategy,
.B ::N
sharing suffixes) and GKE's
.RB ( nvidia0 ,
.BR nvidia0/gi1 ,
.BR /vgpuN ;
N is the GPU's minor number, as in
.BR /dev/nvidiaN )
are understood, for resources named
.BR nvidia.com/ *,
and so are the devices of NVIDIA's DRA driver
.RB ( gpu.nvidia.com )
in a container's resource claims (kubelet 1.31 and later):
.B gpu\-N
for the GPU of minor number N, and its MIG devices by profile and placement
.RB ( gpu\-N\-mig\-3g40gb\-9\-0
and the forms of earlier releases; by profile alone where the daemon may not
read placements and no other GPU instance of the GPU has that profile).
.B gpupeek_kubelet_pod_resources_up
is 1 when the last call was answered; when it fails, the error is said once on
standard error and the pod names are left out until it answers again.
The socket is root's on most nodes: give the exporter's user access to it (a
group, an ACL) rather than running the exporter as root.
Implies
.BR \-\-pod\-labels .";

/// `--web.max-streams` of `serve`.
const MAX_STREAMS_MAN: &str = r"How many clients may follow
.B /events
at once (1 to 1024, default 16).
One more is answered 503 and closed.
Streams do not count against the 64 connections kept for scrapes, and are not
closed after 10 s as those are; a stream whose client leaves more than 256 KiB
unread is closed rather than buffered.";

/// `--node-name` of `serve`.
const NODE_NAME_MAN: &str = r"The name of the node this exporter runs on (default the
host name; in Kubernetes, the downward API's
.BR spec.nodeName ).
It is the
.B hostname
of every
.B /events
document, the
.B node
of
.BR /snapshot ,
and the
.B nodename
label of
.BR gpupeek_node_info ,
an info metric of its own: it is never added to the other series, whose
.B instance
and
.B node
labels are Prometheus's to set from its targets (a label the exporter set would
collide with them and be renamed
.BR exported_node ).";

/// `--names` of `metrics` and `serve`.
const NAMES_FLAG: Spec = Spec {
    arity: Arity::Value("NAMES"),
    values: Values::Choices(&["gpupeek", "dcgm", "nvidia_gpu_exporter"]),
    man: NAMES_MAN,
    ..Spec::switch(
        "names",
        "whose metric names and labels to use: gpupeek (default), dcgm (dcgm-exporter's) \
         or nvidia_gpu_exporter",
    )
};

const WEB_CONFIG_MAN: &str = r"The web configuration file Prometheus's exporters take
(prometheus/exporter-toolkit's format, as node_exporter's
.BR \-\-web.config.file ):
.B tls_server_config
(cert_file, key_file, client_auth_type NoClientCert,
VerifyClientCertIfGiven or RequireAndVerifyClientCert, client_ca_file,
min_version and max_version TLS12 or TLS13),
.B basic_auth_users
(user names and their bcrypt hashes, as htpasswd \-nBC 10 makes them)
and
.B http_server_config
headers.
Paths are relative to the file's directory.
Without the right user and password every request is answered 401 with
WWW-Authenticate.
Options rustls cannot honour (TLS 1.0 and 1.1, cipher_suites,
curve_preferences, unverified client certificates) are refused, not
ignored.";

/// `--per-process` of `metrics` and `serve`.
const PER_PROCESS: Spec = Spec::switch(
    "per-process",
    "also export each process's GPU memory (gpupeek_process_gpu_memory_bytes; at most 256 \
     series, the largest first)",
);

/// `--per-user` of `metrics` and `serve`.
const PER_USER: Spec = Spec::switch(
    "per-user",
    "also export each user's GPU memory and process count per GPU (gpupeek_user_*)",
);

const NAMES_MAN: &str = r"Whose metric names, labels and units the GPU families use:
.B gpupeek
(the default: gpupeek_gpu_*, base units),
.B dcgm
(NVIDIA dcgm-exporter's DCGM_FI_* with its gpu, UUID, pci_bus_id,
device, modelName and Hostname labels, and GPU_I_PROFILE and GPU_I_ID for
each GPU instance of a MIG GPU; memory in MiB, power in W,
energy in mJ) or
.B nvidia_gpu_exporter
(nvidia_smi_* families named after nvidia-smi's query fields,
labelled by uuid, with nvidia_smi_gpu_info),
so that dashboards and alerts written for those exporters work
unchanged.
Only values gpupeek publishes are exported; gpupeek_up and
gpupeek_daemon_state are there in every case.";

/// `--query-gpu` is required.
pub fn check_query(invocation: Invocation) -> Result<Invocation, String> {
    match &invocation {
        Invocation::Query(args) if args.help_query_gpu => {
            Ok(Invocation::Print(query::fields_help()))
        }
        Invocation::Query(args) if args.help_query_compute_apps => {
            Ok(Invocation::Print(crate::smi::COMPUTE_APPS_HELP.to_owned()))
        }
        Invocation::Query(args)
            if args.query_gpu.is_empty()
                && args.query_compute_apps.is_none()
                && !args.list_gpus =>
        {
            Err(
                "query needs --query-gpu=FIELDS, --query-compute-apps=FIELDS or -L \
                 (see gpupeek query --help)"
                    .into(),
            )
        }
        _ => Ok(invocation),
    }
}

const QUERY_COMPUTE_APPS: &str = r"Print a line per compute process of the selected GPUs
instead of a line per GPU, as nvidia-smi's
.B \-\-query\-compute\-apps
does: fields timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid,
process_name (or name: the process's argv[0] as started) and used_gpu_memory (or
used_memory, in MiB).
The header is printed even when no process runs.
The processes are as old as the daemon's process table, which
.BR gpupeekd (8)
refreshes on its process tier.";

const LOOP: &str = r"Print the header once, then the values again at each daemon update that
comes at least
.I SEC
seconds after the last printed one, until interrupted, as nvidia-smi's
.B \-l
does.
Between updates the command sleeps on the segment's update word (no timer, no
CPU); with a daemon period longer than
.IR SEC ,
it prints at every update.
It stops with the daemon's status error when the daemon stops being live.";

const QUERY_GPU: &str = r"Comma-separated fields: timestamp, driver_version and
kmd_version (both the driver's version), count, driver_model.current and
driver_model.pending ([N/A] on Linux, as nvidia-smi prints them), and the GPU
fields by the nvidia-smi names (or aliases) that
.B FIELDS
below gives each.
A value a GPU does not report prints as [N/A]; every live value of a GPU whose
driver is not responding prints as [Unknown Error] (nvidia-smi's text for a call
that failed), its name, UUID, bus id and maximum clocks as usual.";
