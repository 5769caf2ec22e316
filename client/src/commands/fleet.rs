//! `gpupeek fleet`'s flag table.

use gpupeek_flags::{Arity, Command, Flag, Spec, Values};

use crate::fleet::{self, GroupBy};

/// `gpupeek fleet`.
pub const FLEET: Command<fleet::Args> = Command {
    name: "gpupeek fleet",
    usage: "gpupeek fleet ([--host] HOST[:PORT]... | --hostfile FILE | --prometheus URL | \
            --kubernetes) \
            [--group-by host|user|pod|job] [--json] [-i [SECS]] [--timeout SECS] [options]",
    about: "One table of the GPUs of many machines, read from their gpupeek serve \
            (/snapshot), from a Prometheus server that scrapes them, or from the serves a \
            Kubernetes Service lists; free GPUs first, \
            idle allocations flagged, unreachable hosts shown with the reason.",
    flags: &[
        value_flag!(
            Spec {
                arity: Arity::Value("HOST[:PORT]"),
                man: HOST_MAN,
                ..Spec::switch(
                    "host",
                    "a gpupeek serve to ask (repeatable; a word among the flags is one \
                     too): HOST, HOST:PORT (default port 9477) or an http:// or https:// URL; \
                     a Slurm hostlist (gpu[01-04,07],cpu1) stands for its hosts",
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
                    "read hosts from FILE (- for standard input), one a line as --host \
                     takes them, slots=N after a host allowed as MPI and DeepSpeed hostfiles \
                     have it (# starts a comment; repeatable)",
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
                     http://prometheus:9090) instead of asking each host: gpupeek's series, \
                     else dcgm-exporter's",
                )
            },
            prometheus
        ),
        switch!(
            Spec {
                man: KUBERNETES_MAN,
                ..Spec::switch(
                    "kubernetes",
                    "ask the serves of contrib/kubernetes's DaemonSet: the endpoints of the \
                     Service (--namespace, --service), listed by the API server of the \
                     kubeconfig's current context (or in-cluster)",
                )
            },
            kubernetes
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "kubeconfig",
                    "with --kubernetes: the kubeconfig (default: the files of $KUBECONFIG \
                     merged as kubectl merges them, else ~/.kube/config, else the pod's \
                     service account)",
                )
            },
            kubeconfig
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("NAME"),
                ..Spec::switch(
                    "context",
                    "with --kubernetes: the kubeconfig's context to use instead of its \
                     current-context",
                )
            },
            context
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("NS"),
                ..Spec::switch(
                    "namespace",
                    "with --kubernetes: the Service's namespace (default gpupeek, as in \
                     contrib/kubernetes)",
                )
            },
            namespace
        ),
        value_flag!(
            Spec {
                arity: Arity::Value("NAME"),
                ..Spec::switch(
                    "service",
                    "with --kubernetes: the Service whose endpoints are the serves (default \
                     gpupeek, as in contrib/kubernetes)",
                )
            },
            service
        ),
        switch!(
            Spec::switch(
                "api-proxy",
                "with --kubernetes: read each serve through the API server's pod proxy \
                 (from a machine without a route to the pods' IPs; the user needs get on \
                 pods/proxy in the namespace)",
            ),
            api_proxy
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
                    "redraw every SECS seconds (bare: 2) until q or Ctrl-C (at once, even in \
                     the middle of a round; a line says what the first round reads until a \
                     host answers), on a terminal fitted to its size, the hosts not read \
                     always in it below the rows that fit (with --json: a document a \
                     round); on a terminal, a round that a host holds up shows the hosts \
                     read so far, a quarter of a second into the first and when each next \
                     frame is due, one still being read as the last round found it (waiting \
                     in the first); a GPU whose memory is held at 0 % utilisation over the \
                     last three rounds is flagged idle",
                )
            },
            apply: |a, v| {
                // argparse's optional value takes the next word: a host, here.
                let host = |e: String| match v.trim().parse::<f64>() {
                    Ok(_) => e,
                    Err(_) => format!(
                        "{e} (a host right after a bare -i is read as its SECS: give -i \
                         SECS, or the hosts first)"
                    ),
                };
                a.watch = Some(fleet::parse_seconds("watch", v).map_err(host)?);
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
        value_flag!(
            Spec {
                arity: Arity::Value("FILE"),
                values: Values::File,
                ..Spec::switch(
                    "bearer-token-file",
                    "send Authorization: Bearer with this file's first line (read again at \
                     each round), e.g. for a Prometheus behind an OAuth proxy",
                )
            },
            bearer_token_file
        ),
        Flag {
            spec: Spec {
                arity: Arity::Value("'NAME: VALUE'"),
                ..Spec::switch(
                    "header",
                    "send this HTTP header with every request to the hosts or Prometheus \
                     (repeatable), e.g. 'X-Scope-OrgID: team-a' for Mimir or Cortex",
                )
            },
            apply: |a, v| {
                a.headers.push(fleet::parse_header(v)?);
                Ok(())
            },
        },
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
            the reason), 14 when the Kubernetes API server did not list the endpoints, 2 \
            for bad usage (a kubeconfig that cannot be used included).",
};

const HOST_MAN: &str = r#"A host running
.B gpupeek serve
to ask for its
.B /snapshot
(repeatable; a word among the options is a host too, as in
.BR "gpupeek fleet node1 node2:9477" ):
.IR HOST ,
.I HOST:PORT
(port 9477 when left out; an IPv6 address bare, or
.I [ADDR]:PORT
with a port), or an
.B http://
or
.B https://
URL, of which only the scheme, host and port count.
A Slurm hostlist expression stands for its hosts, as
.B pdsh \-w
takes them:
.I gpu\-[001\-004,010],cpu\-01
is five hosts (a comma outside brackets separates hosts; each bracket of
numbers and ranges multiplies, zero\-padded as its first number is), so
.B gpupeek fleet \(dq$SLURM_JOB_NODELIST\(dq
reads a job's nodes; at most 65536 hosts from one expression.
This holds in a
.B \-\-hostfile
too.
Each host is asked once per round over its own connection; at most
.B \-\-jobs
at once, all within
.BR \-\-timeout ."#;

const PROMETHEUS_MAN: &str = r#"Read the fleet from a Prometheus server (or anything that
answers Prometheus's HTTP API:
.BR /api/v1/query ,
.BR /api/v1/targets )
that scrapes the hosts'
.BR "gpupeek serve" :
instant queries of gpupeek's own metric names (gpupeek_gpu_info,
gpupeek_gpu_state, gpupeek_gpu_utilization_ratio,
gpupeek_gpu_memory_used_bytes and _total_bytes, gpupeek_gpu_verdict,
gpupeek_mig_info, gpupeek_mig_memory_used_bytes and _total_bytes,
gpupeek_mig_processes, gpupeek_mig_verdict,
gpupeek_user_gpu_memory_bytes, gpupeek_process_gpu_memory_bytes,
gpupeek_daemon_state, gpupeek_heartbeat_age_seconds and the
dcgm\-exporter names below; of the series that say a state, only those at 1),
one of
.B up
for the scrape jobs that have them or are named after gpupeek or dcgm (not
for every target the server scrapes), and, when one of those targets is down,
one of its targets for the scrape error; so the view costs the nodes nothing.
A host is a target
.RB ( instance
label, after its
.B cluster
label when it has one: CLUSTER/INSTANCE) of a scrape job that has gpupeek
series or whose name has gpupeek in it; one scraped by several jobs is one host,
down only when every job's scrape fails, and is then shown with Prometheus's
last scrape error.
A server with no such target is shown as a failed host that says so.
Prometheus's numbers are as old as its last scrape.
Thanos, Mimir, Cortex and VictoriaMetrics answer the same query; a server
without the targets API shows no scrape errors.
A tenant header (Mimir's and Cortex's X\-Scope\-OrgID) goes with
.BR \-\-header ,
a token with
.BR \-\-bearer\-token\-file ,
a user and password with
.B \-\-user
and
.B \-\-password\-file
(never in the URL, which is refused: it would show in the table and to
.BR ps ).
Users need the exporters'
.BR \-\-per\-user ,
pods and jobs their
.BR \-\-per\-process .
.IP
A target with no gpupeek GPU series is read through NVIDIA dcgm\-exporter's
(as the GPU operator deploys it, or
.BR "gpupeek serve \-\-names dcgm" ):
DCGM_FI_DEV_GPU_UTIL for a GPU's utilisation, DCGM_FI_DEV_FB_USED for its
memory used and FB_USED + FB_FREE + FB_RESERVED for the total, a MIG GPU as
its GPU instances (GPU_I_ID, GPU_I_PROFILE; compute instance 0), each free
with under 1 GiB used, no pod and no activity
(DCGM_FI_PROF_GR_ENGINE_ACTIVE, else DCGM_FI_PROF_SM_ACTIVE), the pod from its
.B namespace
and
.B pod
labels, and a host named by the target's
.B node
or
.B kubernetes_node
label, else the
.B Hostname
of its series, else its instance.
dcgm\-exporter names no process or user: those columns stay empty.
One server may scrape both, gpupeek on some nodes and dcgm\-exporter on
others: each node is shown, and a dcgm\-exporter host whose node or a GPU's
UUID gpupeek's series show too is left out, so no GPU is shown twice. A
target that is down is read as its job's other targets are, else as its job's
name says (dcgm in it, else gpupeek)."#;

const KUBERNETES_MAN: &str = r#"Ask the serves of the DaemonSet in
.IR contrib/kubernetes/ :
the endpoints of its headless Service
.RB ( \-\-service ,
default gpupeek, in
.BR \-\-namespace ,
default gpupeek), listed each round from the Kubernetes API server
(EndpointSlices labelled
.BR kubernetes.io/service\-name ,
asked in pages of 500 as kubectl asks, each page after the first by the
continue token of the one before, the list started over once when a token has
expired; or the Service's core v1 Endpoints when the server has no
EndpointSlice API).
Each endpoint is a host named by its node
.RB ( nodeName ),
asked on the Service's port named
.B metrics
(or its only port) for its
.B /snapshot
as
.B \-\-host
asks one, with the same
.BR \-\-tls\-ca ,
.BR \-\-insecure ,
.B \-\-user
and
.BR \-\-password\-file ;
over https when the port's
.B appProtocol
is https.
An endpoint that is not ready is shown as a host with the fault
.BR not_ready .
The API server and its credentials come from the kubeconfig
.RB ( \-\-kubeconfig ,
else the files of
.B $KUBECONFIG
merged as kubectl merges them (the first file to set the current context, or
to name a context, cluster or user, wins),
else
.IR ~/.kube/config )
and its current context (or
.BR \-\-context ):
the cluster's server, certificate authority (file or data) and
insecure\-skip\-tls\-verify, the user's token, tokenFile, client certificate
and key (files or data) or username and password, and whom the user acts as
(as, as\-uid, as\-groups, as\-user\-extra: kubectl's Impersonate headers);
relative file names are relative to the kubeconfig's directory.
The API server is reached through the cluster's proxy\-url (http, https or
socks5), else through the proxy of the first of
.BR ALL_PROXY ,
.B HTTPS_PROXY
and
.B HTTP_PROXY
that is set (not for the hosts of
.BR NO_PROXY ),
and its certificate is checked against the cluster's tls\-server\-name when
it has one, which is also the SNI; through a proxy as well, which is then asked
for the server's address, resolved here (CONNECT 10.0.0.1:6443, or its SOCKS5
equivalent), where kubectl asks it for the server's name.
Without a kubeconfig, inside a pod: the pod's service account
.RB ( KUBERNETES_SERVICE_HOST ,
.BR KUBERNETES_SERVICE_PORT ,
.IR /var/run/secrets/kubernetes.io/serviceaccount/ ).
A user's exec credential plugin (client.authentication.k8s.io v1 or v1beta1:
aws eks get\-token, gke\-gcloud\-auth\-plugin, kubelogin, ...) is run as
kubectl runs it, never interactively, for at most 20 s (not counted against
.BR \-\-timeout );
its token or client
certificate is kept until its expirationTimestamp, and it is run again when
the API server refuses it (401).
A plugin that fails, is not installed or answers no ExecCredential ends the
fleet with one line and exit status 14; an exec entry of another apiVersion,
one that needs a terminal (interactiveMode: Always) and an auth\-provider
plugin are usage errors (exit status 2).
With
.BR \-\-api\-proxy ,
each serve is read through the API server's pod proxy
.RI ( SERVER /api/v1/namespaces/ NS /pods/[https:] POD : PORT /proxy/snapshot )
with the kubeconfig's credential, for a machine with no route to the pods'
addresses; without it, when no serve can be reached at all, each row says so
and names
.BR \-\-api\-proxy .
The user needs list on endpointslices (and get on the Service's endpoints) in
the namespace, and get on pods/proxy for
.BR \-\-api\-proxy :
.I contrib/kubernetes/fleet\-role.yaml
is such a Role.
Each list, all its pages, is made within the round's
.BR \-\-timeout .
When the API server cannot be read, lists no endpoint at all, or gives pages
that do not end (a continue token that comes back, or more than 1000 pages),
the fleet exits 14 with one line naming the server and the reason
(with
.BR \-i ,
a later round that cannot list shows the server as a host with the fault)."#;

const GROUP_BY_MAN: &str = r"How rows are grouped:
.B host
(the default: a block per host, hosts with the most free GPUs first, then by
name with numbers in numeric order, gpu\-2 before gpu\-10; in each, free GPUs
first, then its busy ones),
.B user
(a row per user: hosts, GPUs, processes and memory; GPUS counts GPUs and MIG
devices, which the JSON names
.IB host / index
and
.IB host / index /gi id ),
.B pod
(a row per Kubernetes pod,
.IR namespace / pod ,
holding the GPUs and MIG devices the kubelet assigns it, busy or not, and the
processes on them; a process on no assigned device counts by the pod uid its
cgroup gives) or
.B job
(a row per Slurm job, by the job id a process's cgroup gives or the
\fIcontainer_id\fP label \fBslurm://\fP\fIid\fP Prometheus has; outside Slurm a
row per user and command: the same program run by the same user on several
hosts is one job).";
