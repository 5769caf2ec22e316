//! `gpupeek fleet`'s flags: the view of many machines is a program of its own,
//! `gpupeek-fleet` (fleet/), which `gpupeek fleet` runs in its place
//! ([`crate::companion`]), so the one-shot `gpupeek` links no HTTP client. `gpupeek`
//! keeps only its flag table ([`crate::commands::FLEET`]); `gpupeek-fleet` parses the
//! same table with [`command_line`].

use std::time::Duration;

use gpupeek_flags::Parser;

use crate::{commands, Exit, EXIT_USAGE};

/// The fleet view's program, installed next to `gpupeek`.
pub const PROGRAM: &str = "gpupeek-fleet";

/// `--namespace`'s default: contrib/kubernetes's namespace.
pub const DEFAULT_NAMESPACE: &str = "gpupeek";
/// `--service`'s default: contrib/kubernetes's headless Service.
pub const DEFAULT_SERVICE: &str = "gpupeek";

/// How the table's rows are grouped (`--group-by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroupBy {
    /// A block per host, its GPUs under it.
    #[default]
    Host,
    /// A row per user.
    User,
    /// A row per Kubernetes pod.
    Pod,
    /// A row per job: a user's command, wherever it runs.
    Job,
}

impl GroupBy {
    /// The words `--group-by` takes.
    pub const VALUES: [&'static str; 4] = ["host", "user", "pod", "job"];

    fn parse(s: &str) -> Result<GroupBy, String> {
        match s {
            "host" => Ok(GroupBy::Host),
            "user" => Ok(GroupBy::User),
            "pod" => Ok(GroupBy::Pod),
            "job" => Ok(GroupBy::Job),
            _ => Err(format!("expected host, user, pod or job, not {s:?}")),
        }
    }
}

/// The flags of `gpupeek fleet` (their table is `crate::commands::FLEET`).
#[derive(Debug)]
pub struct Args {
    /// `--host`, in order.
    pub hosts: Vec<String>,
    /// `--hostfile`, in order.
    pub hostfiles: Vec<String>,
    /// `--prometheus`.
    pub prometheus: Option<String>,
    /// `--kubernetes`: the serves are the endpoints of a Service, from the API server.
    pub kubernetes: bool,
    /// `--kubeconfig`.
    pub kubeconfig: Option<String>,
    /// `--context`: the kubeconfig's context instead of its current-context.
    pub context: Option<String>,
    /// `--namespace`: the Service's namespace ([`DEFAULT_NAMESPACE`] when `None`).
    pub namespace: Option<String>,
    /// `--service`: the Service whose endpoints are the serves ([`DEFAULT_SERVICE`]
    /// when `None`).
    pub service: Option<String>,
    /// `--timeout`: each host's deadline.
    pub timeout: Duration,
    /// `--jobs`: hosts asked at once.
    pub jobs: usize,
    /// `--tls-ca`.
    pub tls_ca: Option<String>,
    /// `--insecure`.
    pub insecure: bool,
    /// `--user`.
    pub user: Option<String>,
    /// `--password-file`.
    pub password_file: Option<String>,
    /// `--group-by`.
    pub group_by: GroupBy,
    /// `--json`.
    pub json: bool,
    /// `-i/--watch`: seconds between redraws.
    pub watch: Option<f64>,
    /// `--no-color`.
    pub no_color: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            hosts: Vec::new(),
            hostfiles: Vec::new(),
            prometheus: None,
            kubernetes: false,
            kubeconfig: None,
            context: None,
            namespace: None,
            service: None,
            timeout: Duration::from_secs(2),
            jobs: 64,
            tls_ca: None,
            insecure: false,
            user: None,
            password_file: None,
            group_by: GroupBy::Host,
            json: false,
            watch: None,
            no_color: false,
        }
    }
}

/// `--group-by`'s value.
pub fn parse_group_by(s: &str) -> Result<GroupBy, String> {
    GroupBy::parse(s)
}

/// Seconds from 0.01 to 86400, for `--timeout` and `--watch`.
pub fn parse_seconds(flag: &str, s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if (0.01..=86400.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "bad --{flag} {s:?}: use a number of seconds from 0.01 to 86400"
        )),
    }
}

/// Parses `fleet`'s arguments (what follows `fleet`): the flags, or `Err` of the help
/// text for `--help`; `Err` outside for bad usage.
pub fn parse(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    let args = crate::cli::sub(&mut Parser::new(argv), &commands::FLEET, Args::default())?;
    if let Ok(a) = &args {
        let hosts = !(a.hosts.is_empty() && a.hostfiles.is_empty());
        let sources = [hosts, a.prometheus.is_some(), a.kubernetes];
        match sources.iter().filter(|&&s| s).count() {
            0 => {
                return Err(
                    "fleet needs --host, --hostfile, --prometheus or --kubernetes \
                            (see gpupeek fleet --help)"
                        .into(),
                )
            }
            1 => {}
            _ => {
                return Err(
                    "--host/--hostfile, --prometheus and --kubernetes are three sources: \
                     choose one"
                        .into(),
                )
            }
        }
        let kube_only = [
            ("--kubeconfig", a.kubeconfig.is_some()),
            ("--context", a.context.is_some()),
            ("--namespace", a.namespace.is_some()),
            ("--service", a.service.is_some()),
        ];
        if let Some((flag, _)) = kube_only.iter().find(|(_, set)| *set && !a.kubernetes) {
            return Err(format!("{flag} goes with --kubernetes"));
        }
    }
    Ok(args)
}

/// `gpupeek-fleet`'s command line: its flags, or `None` once `--help` is printed.
pub fn command_line() -> Result<Option<Args>, Exit> {
    let argv = crate::utf8_args()?;
    match parse(argv).map_err(|e| Exit::new(EXIT_USAGE, e))? {
        Ok(args) => Ok(Some(args)),
        Err(help) => crate::write_stdout(&help).map(|()| None),
    }
}
