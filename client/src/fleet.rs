//! `gpupeek fleet`'s flags: the view of many machines is a program of its own,
//! `gpupeek-fleet` (fleet/), which `gpupeek fleet` runs in its place
//! ([`crate::companion`]), so the one-shot `gpupeek` links no HTTP client. `gpupeek`
//! keeps only its flag table ([`crate::commands::FLEET`]); `gpupeek-fleet` parses the
//! same table with [`command_line`].

use std::time::Duration;

use gpupeek_flags::{help, Parser, Stop};

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
    /// `--api-proxy`: read each serve through the API server's pod proxy.
    pub api_proxy: bool,
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
    /// `--bearer-token-file`.
    pub bearer_token_file: Option<String>,
    /// `--header`, each as `(name, value)`, in order.
    pub headers: Vec<(String, String)>,
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
            api_proxy: false,
            timeout: Duration::from_secs(2),
            jobs: 64,
            tls_ca: None,
            insecure: false,
            user: None,
            password_file: None,
            bearer_token_file: None,
            headers: Vec::new(),
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

/// `--header`'s value, `NAME: VALUE` as curl's `-H` takes it: an HTTP field name (a
/// token) and a value without line breaks. `Authorization` is refused: it is
/// `--user`'s or `--bearer-token-file`'s.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let bad = |why: &str| format!("bad --header {s:?}: {why}");
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| bad("expected NAME: VALUE"))?;
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(bad(
            "the name must be an HTTP field name (letters, digits, - and the like)",
        ));
    }
    if value.contains(['\r', '\n', '\0']) {
        return Err(bad("the value must be on one line"));
    }
    if name.eq_ignore_ascii_case("authorization") {
        return Err(bad(
            "give credentials with --user/--password-file or --bearer-token-file",
        ));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
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

/// The flags of `fleet`, each word among them a host as `--host` takes it (`gpupeek
/// fleet node1 node2:9477`, as pdsh and clush take hosts), or `Err` of the help text.
fn hosts_and_flags(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    let mut parser = Parser::new(argv);
    let mut args = Args::default();
    loop {
        match parser.parse(&commands::FLEET, &mut args).map_err(|e| e.0)? {
            Stop::End => return Ok(Ok(args)),
            Stop::Help => return Ok(Err(help::render(&commands::FLEET))),
            Stop::Word(host) => args.hosts.push(host),
        }
    }
}

/// Parses `fleet`'s arguments (what follows `fleet`): the flags, or `Err` of the help
/// text for `--help`; `Err` outside for bad usage.
pub fn parse(argv: Vec<String>) -> Result<Result<Args, String>, String> {
    let args = hosts_and_flags(argv)?;
    if let Ok(a) = &args {
        let hosts = !(a.hosts.is_empty() && a.hostfiles.is_empty());
        let sources = [hosts, a.prometheus.is_some(), a.kubernetes];
        match sources.iter().filter(|&&s| s).count() {
            0 => {
                return Err(
                    "fleet needs hosts (HOST or --host HOST), --hostfile, --prometheus or \
                     --kubernetes (see gpupeek fleet --help)"
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
        if a.bearer_token_file.is_some() && (a.user.is_some() || a.password_file.is_some()) {
            return Err(
                "--bearer-token-file and --user/--password-file are two credentials: choose one"
                    .into(),
            );
        }
        let kube_only = [
            ("--kubeconfig", a.kubeconfig.is_some()),
            ("--context", a.context.is_some()),
            ("--namespace", a.namespace.is_some()),
            ("--service", a.service.is_some()),
            ("--api-proxy", a.api_proxy),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_among_the_flags_are_hosts() {
        let argv = ["node1", "--json", "node2:9477", "--host", "node3"];
        let args = parse(argv.map(str::to_owned).to_vec()).unwrap().unwrap();
        assert_eq!(args.hosts, ["node1", "node2:9477", "node3"]);
        assert!(args.json);
        // A bare -i takes the next word as its SECS, as argparse does: the error says so.
        let e = parse(vec!["-i".into(), "node1".into()]).unwrap_err();
        assert!(e.ends_with("give -i SECS, or the hosts first)"), "{e}");
        let help = parse(vec!["node1".into(), "--help".into()]).unwrap();
        assert!(help
            .unwrap_err()
            .starts_with("Usage: gpupeek fleet ([--host] HOST"));
    }

    #[test]
    fn a_header_is_a_field_name_and_a_value_on_one_line() {
        assert_eq!(
            parse_header("X-Scope-OrgID:  team-a ").unwrap(),
            ("X-Scope-OrgID".into(), "team-a".into())
        );
        assert_eq!(
            parse_header("X-Empty:").unwrap(),
            ("X-Empty".into(), "".into())
        );
        for (bad, says) in [
            ("X-Scope-OrgID team-a", "expected NAME: VALUE"),
            (": x", "HTTP field name"),
            ("Bad Name: x", "HTTP field name"),
            ("X-A: one\r\nX-B: two", "one line"),
            ("authorization: Bearer x", "--bearer-token-file"),
        ] {
            let e = parse_header(bad).unwrap_err();
            assert!(
                e.starts_with("bad --header ") && e.contains(says),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn headers_repeat_and_a_bearer_token_excludes_basic_authentication() {
        let argv = |extra: &[&str]| {
            let mut v = vec!["--prometheus".to_owned(), "http://p".to_owned()];
            v.extend(extra.iter().map(|s| s.to_string()));
            parse(v)
        };
        let a = argv(&[
            "--header",
            "A: 1",
            "--header=B: 2",
            "--bearer-token-file",
            "t",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            a.headers,
            [("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(a.bearer_token_file.as_deref(), Some("t"));
        let e = argv(&[
            "--bearer-token-file",
            "t",
            "--user",
            "u",
            "--password-file",
            "p",
        ])
        .unwrap_err();
        assert!(e.contains("choose one"), "{e}");
        assert!(argv(&["--header", "nope"])
            .unwrap_err()
            .contains("bad --header"));
    }
}
