//! `gpupeek fleet`'s flag table.

use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use crate::fleet::{self, GroupBy};

/// `gpupeek fleet`.
pub const FLEET: Command<fleet::Args> = Command {
    name: "gpupeek fleet",
    usage: "gpupeek fleet (--host HOST[:PORT]... | --hostfile FILE | --prometheus URL) \
            [--group-by host|user|pod|job] [--json] [-i [SECS]] [--timeout SECS] [options]",
    about: "One table of the GPUs of many machines, read from their gpupeek serve \
            (/snapshot) or from a Prometheus server that scrapes them; free GPUs first, \
            idle allocations flagged, unreachable hosts shown with the reason.",
    flags: &[
        value_flag!(
            Spec {
                arity: Arity::Value("HOST[:PORT]"),
                man: HOST_MAN,
                ..Spec::switch(
                    "host",
                    "a gpupeek serve to ask (repeatable): HOST, HOST:PORT (default port 9477) \
                     or an http:// or https:// URL",
                )
            },
            push hosts
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "hostfile",
                    "read hosts from FILE, one a line as --host takes them (# starts a \
                     comment; repeatable)",
                )
            },
            push hostfiles
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("URL"),
                man: PROMETHEUS_MAN,
                ..Spec::switch(
                    "prometheus",
                    "read the fleet from this Prometheus-compatible query API (e.g. \
                     http://prometheus:9090) instead of asking each host",
                )
            },
            prometheus
        ),
        Flag {
            spec: Spec {
                arity: Arity::Value("WHAT"),
                values: Values::Choices(&GroupBy::VALUES),
                man: GROUP_BY_MAN,
                ..Spec::switch(
                    "group-by",
                    "host (default: a block per host), user, pod or job (a Slurm job, else a user's command)",
                )
            },
            apply: |a, v| {
                a.group_by = fleet::parse_group_by(v)?;
                Ok(())
            },
        },
        switch!(
            Spec::switch(
                "json",
                "print a JSON document instead: each host with its GPUs or its error",
            ),
            json
        ),
        Flag {
            spec: Spec {
                short: Some('i'),
                aliases: &["interval"],
                arity: Arity::Optional("SECS", "2"),
                ..Spec::switch(
                    "watch",
                    "redraw every SECS seconds (bare: 2) until Ctrl-C; a GPU whose memory is \
                     held at 0 % utilisation over the last three rounds is flagged idle",
                )
            },
            apply: |a, v| {
                a.watch = Some(fleet::parse_seconds("watch", v)?);
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("SECS"),
                ..Spec::switch(
                    "timeout",
                    "the round's deadline (default 2): a host that has not answered within \
                     SECS of the round's start is shown as timed out",
                )
            },
            apply: |a, v| {
                let secs = fleet::parse_seconds("timeout", v)?;
                a.timeout = std::time::Duration::from_secs_f64(secs);
                Ok(())
            },
        },
        Flag {
            spec: Spec {
                arity: Arity::Value("N"),
                ..Spec::switch(
                    "jobs",
                    "ask at most N hosts at once (default 64, 1 to 1024)",
                )
            },
            apply: |a, v| {
                a.jobs = match v.parse::<usize>() {
                    Ok(n) if (1..=1024).contains(&n) => n,
                    _ => return Err(format!("bad --jobs {v:?}: use a number from 1 to 1024")),
                };
                Ok(())
            },
        },
        value_flag!(
            Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "tls-ca",
                    "trust the certificates in this PEM file for https:// hosts (instead of \
                     the built-in web roots)",
                )
            },
            tls_ca
        ),
        switch!(
            Spec::switch(
                "insecure",
                "do not verify https:// hosts' certificates (the traffic is still encrypted)",
            ),
            insecure
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("USER"),
                ..Spec::switch(
                    "user",
                    "basic authentication's user name (the serve's web configuration's \
                     basic_auth_users; needs --password-file)",
                )
            },
            user
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "password-file",
                    "basic authentication's password: this file's first line",
                )
            },
            password_file
        ),
        switch!(
            Spec {
                aliases: &["no-colour"],
                ..Spec::switch("no-color", "no colours (also when NO_COLOR is set)")
            },
            no_color
        ),
    ],
    after: "It runs gpupeek-fleet, installed next to gpupeek. Exit status 0 when every host \
            answered with a live daemon, 13 when some did not (they are in the table with \
            the reason), 2 for bad usage.",
};

const HOST_MAN: &str = r"A host running
.B gpupeek serve
to ask for its
.B /snapshot
(repeatable):
.IR HOST ,
.I HOST:PORT
(port 9477 when left out), or an
.B http://
or
.B https://
URL, of which only the scheme, host and port count.
Each host is asked once per round over its own connection; at most
.B \-\-jobs
at once, all within
.BR \-\-timeout .";

const PROMETHEUS_MAN: &str = r#"Read the fleet from a Prometheus server (or anything that
answers Prometheus's HTTP API:
.BR /api/v1/query ,
.BR /api/v1/targets )
that scrapes the hosts'
.BR "gpupeek serve" :
one instant query of gpupeek's own metric names (gpupeek_gpu_info,
gpupeek_gpu_state, gpupeek_gpu_utilization_ratio,
gpupeek_gpu_memory_used_bytes and _total_bytes, gpupeek_gpu_verdict,
gpupeek_user_gpu_memory_bytes, gpupeek_process_gpu_memory_bytes,
gpupeek_daemon_state, gpupeek_heartbeat_age_seconds, and up) and one of its
targets, so the view costs the nodes nothing.
A host is a target
.RB ( instance
label) of a scrape job that has gpupeek series; a target whose scrape fails
is shown with Prometheus's last scrape error.
Prometheus's numbers are as old as its last scrape.
Users need the exporters'
.BR \-\-per\-user ,
pods and jobs their
.BR \-\-per\-process ."#;

const GROUP_BY_MAN: &str = r"How rows are grouped:
.B host
(the default: a block per host, free GPUs first, then its busy ones),
.B user
(a row per user: hosts, GPUs, processes and memory),
.B pod
(a row per Kubernetes pod, by the pod uid a process's cgroup gives, or the
pod label Prometheus has) or
.B job
(a row per Slurm job, by the job id a process's cgroup gives or the
\fIcontainer_id\fP label \fBslurm://\fP\fIid\fP Prometheus has; outside Slurm a
row per user and command: the same program run by the same user on several
hosts is one job).";
