//! Where the fleet comes from. A [`Source`] turns one round into a [`Report`] per host
//! by a deadline, a failed host being a report with its [`Fault`], never a missing row.
//! Three sources: [`crate::hosts`] (each host's `gpupeek serve /snapshot`),
//! [`crate::prometheus`] (a Prometheus server that scrapes them) and
//! [`crate::kubernetes`] (the serves of a DaemonSet, found through the API server: it
//! lists endpoints each round and hands them to [`crate::hosts`]).
//!
//! [`http`] builds the one HTTP client the sources use to read the hosts (ureq:
//! blocking, rustls, gzip) from the command line's TLS, credential (`--user`/
//! `--password-file` or `--bearer-token-file`) and `--header` flags, and names a failed
//! request's cause ([`fault`]); [`agent_config`] its settings, [`fan_out`] the bounded,
//! deadline-bound reading of many hosts at once.

use std::time::{Duration, Instant};

use crate::model::{Fault, Report};

/// A way to read the fleet.
pub trait Source {
    /// Every host's report, sorted by host, by `deadline`; what it has so far through
    /// `progress`, when given, if the round is not over by then.
    fn round(&mut self, deadline: Instant, progress: Option<&mut Progress>) -> Vec<Report>;
    /// What a round reads, for a person (`3 hosts`, `Prometheus at URL`).
    fn what(&self) -> String;
}

/// What a round has read so far, shown before it ends (`fleet -i` on a terminal, so that
/// a host that hangs or is slow does not hold back the others): from `at`, and again
/// each `every` while hosts are still being read and more have answered since, `show`
/// gets a report per host, in the round's order, one not read yet [`Report::waiting`].
/// Nothing is shown before some host has answered.
pub struct Progress<'a> {
    /// When to show it first.
    pub at: Instant,
    /// How often to show it again.
    pub every: std::time::Duration,
    /// Shows it.
    pub show: &'a mut dyn FnMut(Vec<Report>),
}

/// The HTTP client's settings, from the command line.
pub struct Http {
    /// The client.
    pub agent: ureq::Agent,
    /// What the `Authorization` header says.
    pub authorization: Option<Credential>,
    /// `--header`'s fields, sent with every request.
    pub headers: Vec<(String, String)>,
}

/// The hosts' (or Prometheus's) credential.
pub enum Credential {
    /// A whole `Authorization` value (`--user` and `--password-file`'s `Basic`, or the
    /// API server's credential through its pod proxy), and what to check when it is
    /// refused.
    Fixed(String, &'static str),
    /// `--bearer-token-file`: read at each request (tokens are rotated).
    BearerFile(std::path::PathBuf),
}

impl Credential {
    /// The `Authorization` header's value.
    fn header(&self) -> Result<String, Fault> {
        match self {
            Credential::Fixed(value, _) => Ok(value.clone()),
            Credential::BearerFile(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Fault::new(
                        "unauthorized",
                        format!("cannot read --bearer-token-file {}: {e}", path.display()),
                    )
                })?;
                Ok(format!(
                    "Bearer {}",
                    text.lines().next().unwrap_or_default().trim()
                ))
            }
        }
    }

    /// What to check when the server refuses it.
    fn check(&self) -> &'static str {
        match self {
            Credential::Fixed(_, check) => check,
            Credential::BearerFile(_) => "--bearer-token-file",
        }
    }
}

/// Longest answer read, bytes: a `/snapshot` of the largest segment is far smaller.
pub const MAX_BODY: u64 = 64 << 20;

/// Sends `request` and reads its status and body (at most [`MAX_BODY`] bytes).
pub fn call(
    request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
) -> Result<(ureq::http::StatusCode, String), ureq::Error> {
    let mut response = request.call()?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()?;
    Ok((status, body))
}

/// The client for `args`, each request given at most `timeout`.
pub fn http(args: &gpupeek::fleetview::Args) -> Result<Http, String> {
    use ureq::tls::{RootCerts, TlsConfig};
    let mut tls = TlsConfig::builder().disable_verification(args.insecure);
    if let Some(path) = &args.tls_ca {
        let pem = std::fs::read(path).map_err(|e| format!("cannot read --tls-ca {path}: {e}"))?;
        let certs = pem_certs(&pem).map_err(|e| format!("bad --tls-ca {path}: {e}"))?;
        tls = tls.root_certs(RootCerts::new_with_certs(&certs));
    }
    let authorization = match (&args.user, &args.password_file) {
        (None, None) => args
            .bearer_token_file
            .as_ref()
            .map(|path| Credential::BearerFile(path.into())),
        (Some(_), None) => return Err("--user needs --password-file".into()),
        (None, Some(_)) => return Err("--password-file needs --user".into()),
        (Some(user), Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --password-file {path}: {e}"))?;
            let password = text.lines().next().unwrap_or_default();
            use base64::Engine;
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            Some(Credential::Fixed(
                format!("Basic {token}"),
                "--user and --password-file",
            ))
        }
    };
    if let Some(credential @ Credential::BearerFile(_)) = &authorization {
        // Said now, not at each host of the first round.
        credential.header().map_err(|f| f.reason)?;
    }
    Ok(Http {
        agent: agent(tls.build()),
        authorization,
        headers: args.headers.clone(),
    })
}

/// The agent every request of the fleet goes through, with `tls`: statuses other than
/// 200 are answers (the caller says what they mean), redirects are not followed.
pub fn agent(tls: ureq::tls::TlsConfig) -> ureq::Agent {
    agent_config(tls, None).into()
}

/// [`agent`]'s settings, going through `proxy` when given (else through the proxy that
/// the first of `$ALL_PROXY`, `$HTTPS_PROXY` and `$HTTP_PROXY` to be set names, but not
/// to `$NO_PROXY`'s hosts: ureq's default).
pub fn agent_config(tls: ureq::tls::TlsConfig, proxy: Option<ureq::Proxy>) -> ureq::config::Config {
    match proxy {
        Some(proxy) => agent_config_exact(tls, Some(proxy)),
        None => config_builder(tls).build(),
    }
}

/// [`agent_config`] with exactly `proxy`: `None` is no proxy, not the environment's.
pub fn agent_config_exact(
    tls: ureq::tls::TlsConfig,
    proxy: Option<ureq::Proxy>,
) -> ureq::config::Config {
    config_builder(tls).proxy(proxy).build()
}

fn config_builder(
    tls: ureq::tls::TlsConfig,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(tls)
        .max_redirects(0)
        .user_agent(concat!("gpupeek-fleet/", env!("CARGO_PKG_VERSION")))
}

/// The certificates in `pem`: at least one, or why not.
pub fn pem_certs(pem: &[u8]) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    use ureq::tls::PemItem;
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(Ok(c)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    Ok(certs)
}

impl Http {
    /// GETs `url` within `timeout`: the body of a 200 answer, or why not.
    pub fn get(&self, url: &str, timeout: Duration) -> Result<String, Fault> {
        self.get_query(url, &[], timeout)
    }

    /// [`Http::get`] with `query` parameters, percent-encoded.
    pub fn get_query(
        &self,
        url: &str,
        query: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<String, Fault> {
        let mut request = self.agent.get(url);
        for (k, v) in query {
            request = request.query(k, v);
        }
        let mut request = request.config().timeout_global(Some(timeout)).build();
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(credential) = &self.authorization {
            request = request.header("Authorization", credential.header()?);
        }
        let (status, body) = call(request).map_err(|e| fault(&e))?;
        match status.as_u16() {
            200 => Ok(body),
            401 | 403 => {
                let check = self.authorization.as_ref().map_or(
                    "--user and --password-file, or --bearer-token-file",
                    Credential::check,
                );
                Err(Fault::new(
                    "unauthorized",
                    format!("HTTP {status}: check {check}"),
                ))
            }
            _ => {
                let first = body.lines().next().unwrap_or_default();
                let first: String = first.chars().take(80).collect();
                Err(Fault::new(
                    "http",
                    format!("HTTP {status} {first}").trim_end().to_owned(),
                ))
            }
        }
    }
}

/// The cause of a failed request, in a word and a line.
pub fn fault(e: &ureq::Error) -> Fault {
    use std::io::ErrorKind as K;
    use ureq::Error as E;
    match e {
        E::Timeout(_) => Fault::new("timeout", "no answer within --timeout"),
        E::Io(io) if is_tls(io) => Fault::new("tls", io.to_string()),
        E::Io(io) => match io.kind() {
            K::ConnectionRefused => Fault::new("refused", "connection refused"),
            K::TimedOut | K::WouldBlock => Fault::new("timeout", "no answer within --timeout"),
            K::ConnectionReset | K::UnexpectedEof | K::ConnectionAborted | K::BrokenPipe => {
                Fault::new("bad_response", format!("connection closed early ({io})"))
            }
            _ => Fault::new("unreachable", io.to_string()),
        },
        E::HostNotFound => Fault::new("unreachable", "host not found"),
        E::ConnectionFailed => Fault::new("unreachable", "connection failed"),
        E::Rustls(_) | E::Tls(_) | E::Pem(_) => Fault::new("tls", e.to_string()),
        E::BodyExceedsLimit(_) => Fault::new("bad_response", "answer larger than 64 MiB"),
        E::Protocol(_) | E::Http(_) | E::BadUri(_) | E::Decompress(..) => {
            Fault::new("bad_response", e.to_string())
        }
        _ => Fault::new("bad_response", e.to_string()),
    }
}

/// Whether `io` is a TLS failure (a certificate not trusted, a handshake refused).
fn is_tls(io: &std::io::Error) -> bool {
    io.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// A round's [`Progress`] over items, with what an item not done yet is then.
pub type ItemsProgress<'p, 'q, T> = (&'p mut Progress<'q>, &'p dyn Fn(&T) -> Report);

/// Runs `work` on each item with at most `jobs` at once; what is not done by `deadline`
/// is `late(item)`. Workers still busy at the deadline are left behind (each request
/// has the deadline as its own timeout, so they end soon after), so a hanging host never
/// holds the result.
///
/// With `progress` (and `pending`, what an item not done yet is then), what is done so
/// far is shown as [`Progress`] says.
pub fn fan_out<T>(
    items: Vec<T>,
    jobs: usize,
    deadline: Instant,
    work: impl Fn(&T) -> Report + Send + Sync + 'static,
    late: impl Fn(&T) -> Report,
    mut progress: Option<ItemsProgress<'_, '_, T>>,
) -> Vec<Report>
where
    T: Send + Sync + 'static,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    let items = Arc::new(items);
    let next = Arc::new(AtomicUsize::new(0));
    let work = Arc::new(work);
    let (tx, rx) = mpsc::channel();
    for _ in 0..jobs.min(items.len()) {
        let (items, next, work, tx) = (items.clone(), next.clone(), work.clone(), tx.clone());
        let spawned = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { return };
                if Instant::now() >= deadline || tx.send((i, work(item))).is_err() {
                    return;
                }
            });
        if spawned.is_err() {
            break;
        }
    }
    drop(tx);
    let mut results: Vec<Option<Report>> = (0..items.len()).map(|_| None).collect();
    let mut missing = items.len();
    // When to show the progress next, and how many were missing when it last was.
    let mut next = progress.as_ref().map(|(p, _)| p.at);
    let mut shown = items.len();
    while missing > 0 {
        let until = next.map_or(deadline, |at| at.min(deadline));
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, r)) => {
                results[i] = Some(r);
                missing -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                let Some((p, pending)) = progress.as_mut() else {
                    break;
                };
                if missing < shown {
                    let so_far = results.iter().zip(items.iter());
                    (p.show)(
                        so_far
                            .map(|(r, item)| r.clone().unwrap_or_else(|| pending(item)))
                            .collect(),
                    );
                    shown = missing;
                }
                next = Some(Instant::now() + p.every);
            }
            Err(_) => break,
        }
    }
    results
        .into_iter()
        .zip(items.iter())
        .map(|(r, item)| r.unwrap_or_else(|| late(item)))
        .collect()
}
