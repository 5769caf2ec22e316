//! The Kubernetes API server as the fleet asks it: GETs with the kubeconfig's
//! certificate authority, client certificate and token or password (or its exec
//! plugin's token or client certificate, see [`super::exec`]), all by the round's
//! one deadline (the EndpointSliceList's pages, [`super::pages`], and the core v1
//! Endpoints after a 404); an answer other than 200 becomes a [`Fault`] that quotes the
//! API's own `Status` message (who is refused what).
//!
//! The cluster's `proxy-url` is the agent's proxy. Its `tls-server-name` is the host of
//! the URLs asked ([`Api::base`]), so that the certificate is checked against it and it
//! is the SNI, as kubectl does; the agent's resolver ([`ServerName`]) sends that name to
//! the server's own address.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Deserialize;

use super::endpoints::{parse_endpoints, Found};
use super::exec::Plugin;
use super::kubeconfig::{Config, Token};
use super::pages::{self, PAGE_SIZE};
use super::tunnel;
use crate::model::Fault;
use crate::source::{agent_config, agent_config_exact, fault, pem_certs, Credential, Http};

/// A client certificate chain and its key, PEM.
type ClientPem = (Vec<u8>, Vec<u8>);

/// What an agent is made from: the kubeconfig's certificate authority,
/// `insecure-skip-tls-verify`, `proxy-url` and `tls-server-name`, named by the
/// kubeconfig's origin in errors.
struct Trust {
    origin: String,
    ca: Option<Vec<u8>>,
    insecure: bool,
    /// `proxy-url` as the kubeconfig gives it (named when the server cannot be
    /// reached), and as the agent's proxy.
    proxy: Option<(String, ureq::Proxy)>,
    server_name: Option<ServerName>,
}

/// The resolver of an agent whose URLs name the server by its `tls-server-name`: that
/// name is looked up as the server's own URL, any other as it is.
#[derive(Debug, Clone)]
struct ServerName {
    name: String,
    server: ureq::http::Uri,
}

impl ServerName {
    /// For `server` (an `https://` URL) checked against `name`: the URL to ask, with
    /// `name` as its host, and the resolver that sends `name` to `server`'s address.
    fn new(server: &str, name: &str) -> Result<(String, ServerName), String> {
        let uri: ureq::http::Uri = server
            .parse()
            .map_err(|e| format!("bad server URL {server:?}: {e}"))?;
        let port = uri.port_u16().unwrap_or(443);
        let path = uri.path().trim_end_matches('/');
        let bare = name.trim_matches(['[', ']']);
        let host = match bare.contains(':') {
            true => format!("[{bare}]"),
            false => bare.to_owned(),
        };
        let base = format!("https://{host}:{port}{path}");
        let renamed = ServerName {
            name: bare.to_owned(),
            server: uri,
        };
        Ok((base, renamed))
    }
}

/// `proxy`, asked for the addresses our resolver gives rather than for names (an HTTP
/// one through [`super::tunnel`]).
fn resolving_here(proxy: &ureq::Proxy) -> Result<ureq::Proxy, String> {
    let mut builder = ureq::Proxy::builder(proxy.protocol())
        .host(proxy.host())
        .port(proxy.port())
        .resolve_target(true);
    if let Some(user) = proxy.username() {
        builder = builder.username(user);
    }
    if let Some(password) = proxy.password() {
        builder = builder.password(password);
    }
    builder.build().map_err(|e| format!("bad proxy-url: {e}"))
}

impl ureq::unversioned::resolver::Resolver for ServerName {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let renamed = uri
            .host()
            .is_some_and(|h| h.trim_matches(['[', ']']).eq_ignore_ascii_case(&self.name));
        let uri = if renamed { &self.server } else { uri };
        ureq::unversioned::resolver::DefaultResolver::default().resolve(uri, config, timeout)
    }
}

/// An API server.
pub struct Api {
    trust: Trust,
    /// The agent, and the client certificate it presents.
    agent: Mutex<(ureq::Agent, Option<ClientPem>)>,
    /// Its URL, without a trailing `/`, as the kubeconfig names it.
    pub server: String,
    /// The URL asked: [`Api::server`], or with the `tls-server-name` as its host.
    pub base: String,
    token: Option<Token>,
    basic: Option<String>,
    exec: Option<Arc<Plugin>>,
    /// The user's `Impersonate-*` headers.
    impersonate: Vec<(String, String)>,
}

impl Api {
    /// The client for `config`: its certificate authority (else the built-in web
    /// roots), client certificate and credentials.
    pub fn new(config: &Config) -> Result<Api, String> {
        let basic = config.basic.as_ref().map(|(user, password)| {
            use base64::Engine;
            let pair = format!("{user}:{password}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let bad = |e: String| format!("{}: {e}", config.origin);
        let proxy = match &config.proxy_url {
            // Go's SOCKS5 has the proxy resolve the server's name, as socks5h does.
            Some(url) => Some((
                url.clone(),
                ureq::Proxy::new(&url.replacen("socks5://", "socks5h://", 1))
                    .map_err(|e| bad(format!("bad proxy-url {url:?}: {e}")))?,
            )),
            None => None,
        };
        let (base, server_name) = match &config.tls_server_name {
            Some(name) if config.server.starts_with("https://") => {
                let (base, renamed) = ServerName::new(&config.server, name).map_err(bad)?;
                (base, Some(renamed))
            }
            _ => (config.server.clone(), None),
        };
        // The URL asked names the tls-server-name, which only our resolver knows: the
        // proxy is then asked for the server's address, resolved here (kubectl asks it
        // for the server's name; the same when the server is an address, as it mostly
        // is where a tls-server-name is needed).
        let proxy = match (proxy, &server_name) {
            (Some((url, p)), Some(_)) => Some((url, resolving_here(&p).map_err(bad)?)),
            (proxy, _) => proxy,
        };
        let trust = Trust {
            origin: config.origin.clone(),
            ca: config.ca.clone(),
            insecure: config.insecure,
            proxy,
            server_name,
        };
        let agent = trust.agent(config.client_cert.as_ref())?;
        Ok(Api {
            trust,
            agent: Mutex::new((agent, config.client_cert.clone())),
            server: config.server.clone(),
            base,
            token: config.token.clone(),
            basic,
            exec: config.exec.clone(),
            impersonate: config.impersonate.clone(),
        })
    }

    /// The agent to ask with and the `Authorization` header to send: the exec plugin's
    /// credential when the user has one (its client certificate makes a new agent when
    /// it changes), else the kubeconfig's token or password.
    fn credentials(&self) -> Result<(ureq::Agent, Option<String>), Fault> {
        let refused = |e: String| Fault::new("unauthorized", e);
        let mut agent = self.agent.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(plugin) = &self.exec else {
            let header = match (&self.token, &self.basic) {
                (Some(token), _) => Some(format!("Bearer {}", token.read().map_err(refused)?)),
                (None, basic) => basic.clone(),
            };
            return Ok((agent.0.clone(), header));
        };
        let credential = plugin.credential().map_err(refused)?;
        if credential.client_cert.is_some() && credential.client_cert != agent.1 {
            let made = self
                .trust
                .agent(credential.client_cert.as_ref())
                .map_err(|e| refused(format!("the exec plugin's {e}")))?;
            *agent = (made, credential.client_cert.clone());
        }
        let header = credential.token.map(|t| format!("Bearer {t}"));
        Ok((agent.0.clone(), header))
    }

    /// A client for the hosts that asks through this API server (its pod proxy): its
    /// agent and its credential as they stand now.
    pub fn http(&self) -> Result<Http, Fault> {
        let (agent, authorization) = self.credentials()?;
        let check = "the kubeconfig's user, and its get on pods/proxy in the namespace";
        Ok(Http {
            agent,
            authorization: authorization.map(|value| Credential::Fixed(value, check)),
            headers: self.impersonate.clone(),
        })
    }

    /// GETs `path` by `deadline`: the status and body, or why there is none. A 401 to
    /// an exec plugin's credential runs the plugin again and asks once more, as kubectl
    /// does.
    fn get(
        &self,
        path: &str,
        query: &[(&str, &str)],
        deadline: Instant,
    ) -> Result<(u16, String), Fault> {
        let (status, body) = self.get_once(path, query, deadline)?;
        match &self.exec {
            Some(plugin) if status == 401 => {
                plugin.forget();
                let spent = self.prepare()?;
                self.get_once(path, query, deadline + spent)
            }
            _ => Ok((status, body)),
        }
    }

    /// Makes sure the exec plugin's credential is at hand, running the plugin when it
    /// has none or it expired: how long that took, which the caller adds to its
    /// deadline (`--timeout` bounds the answers of servers, not a plugin's start-up;
    /// the plugin has [`super::exec::PLUGIN_TIMEOUT`]), or why there is none.
    pub fn prepare(&self) -> Result<std::time::Duration, Fault> {
        let started = Instant::now();
        if let Some(plugin) = &self.exec {
            plugin
                .credential()
                .map_err(|e| Fault::new("unauthorized", e))?;
        }
        Ok(started.elapsed())
    }

    fn get_once(
        &self,
        path: &str,
        query: &[(&str, &str)],
        deadline: Instant,
    ) -> Result<(u16, String), Fault> {
        let (agent, authorization) = self.credentials()?;
        let left = deadline.saturating_duration_since(Instant::now());
        let mut request = agent.get(format!("{}{path}", self.base));
        for (k, v) in query {
            request = request.query(k, v);
        }
        let mut request = request
            .header("Accept", "application/json")
            .config()
            .timeout_global(Some(left))
            .build();
        if let Some(authorization) = authorization {
            request = request.header("Authorization", authorization);
        }
        for (name, value) in &self.impersonate {
            request = request.header(name, value);
        }
        let (status, body) = crate::source::call(request).map_err(|e| {
            let f = api_fault(&e);
            match &self.trust.proxy {
                Some((url, _)) => {
                    Fault::new(f.kind, format!("{} (through proxy-url {url})", f.reason))
                }
                None => f,
            }
        })?;
        Ok((status.as_u16(), body))
    }

    /// The endpoints of `service` in `namespace`, by `deadline`.
    pub fn endpoints(
        &self,
        namespace: &str,
        service: &str,
        deadline: Instant,
    ) -> Result<Vec<Found>, Fault> {
        let slices = format!("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices");
        let selector = format!("kubernetes.io/service-name={service}");
        let limit = PAGE_SIZE.to_string();
        let listed = pages::walk(|token| {
            let mut query = vec![("labelSelector", selector.as_str()), ("limit", &limit)];
            query.extend(token.map(|t| ("continue", t)));
            self.get(&slices, &query, deadline)
        })?;
        match listed {
            Some(found) => Ok(found),
            None => self.core_endpoints(namespace, service, deadline),
        }
    }

    /// The core v1 Endpoints of `service` in `namespace`, by `deadline`: for servers
    /// without the EndpointSlice API.
    fn core_endpoints(
        &self,
        namespace: &str,
        service: &str,
        deadline: Instant,
    ) -> Result<Vec<Found>, Fault> {
        let path = format!("/api/v1/namespaces/{namespace}/endpoints/{service}");
        let (status, body) = self.get(&path, &[], deadline)?;
        match status {
            200 => parse_endpoints(&body),
            404 => Err(Fault::new(
                "not_found",
                format!(
                    "no Service {service} in namespace {namespace} (HTTP 404 for its Endpoints)"
                ),
            )),
            _ => Err(status_fault(status, &body)),
        }
    }
}

impl Trust {
    /// An agent that trusts the kubeconfig's certificate authority (else the built-in
    /// web roots) and presents `client_cert`.
    fn agent(&self, client_cert: Option<&ClientPem>) -> Result<ureq::Agent, String> {
        use ureq::tls::{ClientCert, PrivateKey, RootCerts, TlsConfig};
        let bad =
            |what: &str, e: &dyn std::fmt::Display| format!("{}: bad {what}: {e}", self.origin);
        let certs = |pem: &[u8], what: &str| pem_certs(pem).map_err(|e| bad(what, &e));
        let mut tls = TlsConfig::builder().disable_verification(self.insecure);
        if let Some(pem) = &self.ca {
            let roots = certs(pem, "certificate authority")?;
            tls = tls.root_certs(RootCerts::new_with_certs(&roots));
        }
        if let Some((cert, key)) = client_cert {
            let chain = certs(cert, "client certificate")?;
            let key = PrivateKey::from_pem(key).map_err(|e| bad("client key", &e))?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let proxy = self.proxy.as_ref().map(|(_, proxy)| proxy.clone());
        let config = match (&self.server_name, proxy) {
            // ureq would ask the environment's proxy for the tls-server-name, and judge
            // $NO_PROXY by it: the server's own address and name instead, as kubectl.
            (Some(renamed), None) => {
                let env = ureq::Proxy::try_from_env().filter(|p| !p.is_no_proxy(&renamed.server));
                let env = env
                    .map(|p| resolving_here(&p))
                    .transpose()
                    .map_err(|e| format!("{}: {e}", self.origin))?;
                agent_config_exact(tls.build(), env)
            }
            (_, proxy) => agent_config(tls.build(), proxy),
        };
        Ok(match &self.server_name {
            None => config.into(),
            Some(resolver) => {
                let direct = agent_config_exact(config.tls_config().clone(), None);
                ureq::Agent::with_parts(config, tunnel::chain(direct), resolver.clone())
            }
        })
    }
}

/// A failed request to the API server: [`fault`]'s words, but about the kubeconfig.
fn api_fault(e: &ureq::Error) -> Fault {
    let f = fault(e);
    match f.kind {
        "timeout" => Fault::new("timeout", "no answer within --timeout"),
        _ => f,
    }
}

/// A non-200 answer: its status and the API's `Status` message.
pub(super) fn status_fault(status: u16, body: &str) -> Fault {
    #[derive(Deserialize)]
    struct Status {
        message: Option<String>,
        reason: Option<String>,
    }
    let said = match serde_json::from_str::<Status>(body) {
        Ok(s) => [s.reason, s.message]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": "),
        Err(_) => body
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(80)
            .collect(),
    };
    let said = said.replace(['\n', '\r'], " ");
    let kind = match status {
        401 | 403 => "unauthorized",
        _ => "http",
    };
    let hint = match status {
        401 => " (check the kubeconfig's user)",
        403 => " (the user needs list on endpointslices in the namespace)",
        _ => "",
    };
    Fault::new(
        kind,
        format!("HTTP {status} {said}{hint}").replace("  ", " "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `tls-server-name`, the URLs asked have that name as their host, with the
    /// server's port and path; the resolver keeps the server's own URL.
    #[test]
    fn a_tls_server_name_is_the_host_of_the_urls_asked() {
        let (base, r) = ServerName::new("https://10.0.0.1/k8s/", "kubernetes.default").unwrap();
        assert_eq!(base, "https://kubernetes.default:443/k8s");
        assert_eq!(
            (r.name.as_str(), r.server.port_u16()),
            ("kubernetes.default", None)
        );
        let (base, r) = ServerName::new("https://[fd00::1]:6443", "[fd00::2]").unwrap();
        assert_eq!(base, "https://[fd00::2]:6443");
        assert_eq!(r.name, "fd00::2");
        assert!(ServerName::new("https://a b", "x").is_err());
    }

    #[test]
    fn api_errors_say_the_status_and_the_apis_message() {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"endpointslices.discovery.k8s.io is forbidden: User \"bob\" cannot list resource","reason":"Forbidden","code":403}"#;
        let f = status_fault(403, body);
        assert_eq!(f.kind, "unauthorized");
        assert!(
            f.reason
                .starts_with("HTTP 403 Forbidden: endpointslices.discovery.k8s.io is forbidden"),
            "{}",
            f.reason
        );
        assert_eq!(status_fault(500, "oops\nmore").reason, "HTTP 500 oops");
    }
}
