//! The serves of contrib/kubernetes's DaemonSet, found through the Kubernetes API: each
//! round lists the endpoints of its headless Service (`--namespace`, `--service`) and
//! reads each ready one as [`crate::hosts`] reads a `--host`, with the same TLS and
//! basic-authentication flags. A host is named by its endpoint's node (`nodeName`);
//! an endpoint that is not ready is a host with the fault `not_ready`, never left out.
//!
//! The list: `GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices
//! ?labelSelector=kubernetes.io/service-name=SVC`; when the server answers 404 (no
//! EndpointSlice API: Kubernetes before 1.21), the Service's core v1 Endpoints,
//! `GET /api/v1/namespaces/NS/endpoints/SVC`. The port is the one named `metrics`
//! (the Service's, as contrib/kubernetes names it), or the only one; https when its
//! `appProtocol` is `https`.
//!
//! The API server and credentials come from [`crate::kubeconfig`]. When the first list
//! fails, or finds no endpoint, the program stops with one line naming the server and
//! the reason ([`gpupeek::fleetview::EXIT_KUBERNETES`]); a later round (`-i`) that
//! cannot list shows the server as a host with the fault.

use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;

use crate::hosts::{self, Endpoint};
use crate::kubeconfig::{Config, Token};
use crate::model::{Fault, Report};
use crate::source::{fault, Http, Source, MAX_BODY};

/// The Service port's name in contrib/kubernetes/service.yaml (and the DaemonSet's).
const PORT_NAME: &str = "metrics";

/// An API server.
pub struct Api {
    agent: ureq::Agent,
    /// Its URL, without a trailing `/`.
    pub server: String,
    token: Option<Token>,
    basic: Option<String>,
}

impl Api {
    /// The client for `config`: its certificate authority (else the built-in web
    /// roots), client certificate and credentials.
    pub fn new(config: &Config) -> Result<Api, String> {
        use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
        let bad =
            |what: &str, e: &dyn std::fmt::Display| format!("{}: bad {what}: {e}", config.origin);
        let certs = |pem: &[u8], what: &str| -> Result<Vec<Certificate<'static>>, String> {
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<_, _>>()
                .map_err(|e| bad(what, &e))?;
            if certs.is_empty() {
                return Err(bad(what, &"no PEM certificate in it"));
            }
            Ok(certs)
        };
        let mut tls = TlsConfig::builder().disable_verification(config.insecure);
        if let Some(pem) = &config.ca {
            let roots = certs(pem, "certificate authority")?;
            tls = tls.root_certs(RootCerts::new_with_certs(&roots));
        }
        if let Some((cert, key)) = &config.client_cert {
            let chain = certs(cert, "client certificate")?;
            let key = PrivateKey::from_pem(key).map_err(|e| bad("client key", &e))?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let basic = config.basic.as_ref().map(|(user, password)| {
            use base64::Engine;
            let pair = format!("{user}:{password}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(tls.build())
            .max_redirects(0)
            .user_agent(concat!("gpupeek-fleet/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Api {
            agent,
            server: config.server.clone(),
            token: config.token.clone(),
            basic,
        })
    }

    /// GETs `path` by `deadline`: the status and body, or why there is none.
    fn get(
        &self,
        path: &str,
        query: &[(&str, &str)],
        deadline: Instant,
    ) -> Result<(u16, String), Fault> {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut request = self.agent.get(format!("{}{path}", self.server));
        for (k, v) in query {
            request = request.query(k, v);
        }
        let mut request = request
            .header("Accept", "application/json")
            .config()
            .timeout_global(Some(left))
            .build();
        if let Some(token) = &self.token {
            let token = token.read().map_err(|e| Fault::new("unauthorized", e))?;
            request = request.header("Authorization", format!("Bearer {token}"));
        } else if let Some(basic) = &self.basic {
            request = request.header("Authorization", basic);
        }
        let mut response = request.call().map_err(|e| api_fault(&e))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| api_fault(&e))?;
        Ok((status, body))
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
        let (status, body) = self.get(&slices, &[("labelSelector", &selector)], deadline)?;
        if status == 404 {
            let path = format!("/api/v1/namespaces/{namespace}/endpoints/{service}");
            let (status, body) = self.get(&path, &[], deadline)?;
            return match status {
                200 => parse_endpoints(&body),
                404 => Err(Fault::new(
                    "not_found",
                    format!("no Service {service} in namespace {namespace} (HTTP 404 for its Endpoints)"),
                )),
                _ => Err(status_fault(status, &body)),
            };
        }
        match status {
            200 => parse_slices(&body),
            _ => Err(status_fault(status, &body)),
        }
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
fn status_fault(status: u16, body: &str) -> Fault {
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

/// One endpoint of the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its node (`nodeName`), when the API gives it.
    pub node: Option<String>,
    /// Its pod (`targetRef.name`).
    pub pod: Option<String>,
    /// Its address.
    pub ip: String,
    /// The serve's port and whether it speaks https, when the endpoint has one.
    pub port: Option<(u16, bool)>,
    /// Why it is not ready, when it is not.
    pub not_ready: Option<&'static str>,
}

#[derive(Deserialize)]
struct Port {
    name: Option<String>,
    port: Option<u16>,
    #[serde(rename = "appProtocol")]
    app_protocol: Option<String>,
}

/// The serve's port among `ports`: the one named `metrics`, or the only one.
fn pick(ports: &[Port]) -> Option<(u16, bool)> {
    let port = match ports.iter().find(|p| p.name.as_deref() == Some(PORT_NAME)) {
        Some(p) => p,
        None if ports.len() == 1 => &ports[0],
        None => return None,
    };
    let https = port
        .app_protocol
        .as_deref()
        .is_some_and(|a| a.eq_ignore_ascii_case("https"));
    port.port.map(|n| (n, https))
}

#[derive(Deserialize)]
struct Ref {
    name: Option<String>,
}

#[derive(Deserialize)]
struct SliceList {
    items: Option<Vec<Slice>>,
}

#[derive(Deserialize)]
struct Slice {
    #[serde(rename = "addressType")]
    address_type: Option<String>,
    endpoints: Option<Vec<SliceEndpoint>>,
    ports: Option<Vec<Port>>,
}

#[derive(Deserialize)]
struct SliceEndpoint {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    conditions: Conditions,
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
    #[serde(rename = "targetRef")]
    target_ref: Option<Ref>,
}

#[derive(Deserialize, Default)]
struct Conditions {
    ready: Option<bool>,
    terminating: Option<bool>,
}

fn bad_json(what: &str, e: serde_json::Error, body: &str) -> Fault {
    let start: String = body.chars().take(40).collect();
    Fault::new("bad_response", format!("not {what} ({e}): {start:?}"))
}

/// An EndpointSliceList: every address of every IPv4 or IPv6 slice.
fn parse_slices(body: &str) -> Result<Vec<Found>, Fault> {
    let list: SliceList =
        serde_json::from_str(body).map_err(|e| bad_json("an EndpointSliceList", e, body))?;
    let mut found = Vec::new();
    for slice in list.items.unwrap_or_default() {
        // FQDN slices name hosts, not addresses; no Service of ours has them.
        if !matches!(slice.address_type.as_deref(), Some("IPv4" | "IPv6")) {
            continue;
        }
        let port = pick(slice.ports.as_deref().unwrap_or_default());
        for e in slice.endpoints.unwrap_or_default() {
            // A nil ready is unknown, which consumers are to take as ready (the API's
            // documentation of EndpointConditions).
            let not_ready = match (e.conditions.ready, e.conditions.terminating) {
                (_, Some(true)) => Some("terminating"),
                (Some(false), _) => Some("not ready"),
                _ => None,
            };
            let pod = e.target_ref.and_then(|r| r.name);
            // Every address of an endpoint is the same pod: the first is enough.
            if let Some(ip) = e.addresses.into_iter().next() {
                found.push(Found {
                    node: e.node_name,
                    pod,
                    ip,
                    port,
                    not_ready,
                });
            }
        }
    }
    Ok(found)
}

#[derive(Deserialize)]
struct Endpoints {
    subsets: Option<Vec<Subset>>,
}

#[derive(Deserialize)]
struct Subset {
    addresses: Option<Vec<Address>>,
    #[serde(rename = "notReadyAddresses")]
    not_ready: Option<Vec<Address>>,
    ports: Option<Vec<Port>>,
}

#[derive(Deserialize)]
struct Address {
    ip: String,
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
    #[serde(rename = "targetRef")]
    target_ref: Option<Ref>,
}

/// A core v1 Endpoints: its subsets' ready and not-ready addresses.
fn parse_endpoints(body: &str) -> Result<Vec<Found>, Fault> {
    let doc: Endpoints =
        serde_json::from_str(body).map_err(|e| bad_json("an Endpoints", e, body))?;
    let mut found = Vec::new();
    for subset in doc.subsets.unwrap_or_default() {
        let port = pick(subset.ports.as_deref().unwrap_or_default());
        let ready = subset
            .addresses
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a, None));
        let not_ready = subset
            .not_ready
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a, Some("not ready")));
        for (a, not_ready) in ready.chain(not_ready) {
            found.push(Found {
                node: a.node_name,
                pod: a.target_ref.and_then(|r| r.name),
                ip: a.ip,
                port,
                not_ready,
            });
        }
    }
    Ok(found)
}

/// What a round asks, or reports without asking: a host per endpoint.
fn targets(found: Vec<Found>) -> Vec<(Endpoint, Option<Fault>)> {
    let mut out: Vec<(Endpoint, Option<Fault>)> = Vec::new();
    for f in found {
        let host = |ip: &str| {
            if ip.contains(':') {
                format!("[{ip}]")
            } else {
                ip.to_owned()
            }
        };
        let mut name = f.node.clone().unwrap_or_else(|| host(&f.ip));
        // Two endpoints on one node (a pod being replaced): the pod tells them apart.
        if out.iter().any(|(e, _)| e.host == name) {
            name = format!("{name}/{}", f.pod.as_deref().unwrap_or(&f.ip));
        }
        let (url, fault) = match f.port {
            Some((port, https)) => {
                let scheme = if https { "https" } else { "http" };
                let url = format!("{scheme}://{}:{port}/snapshot", host(&f.ip));
                let fault = f.not_ready.map(|why| {
                    let pod = f
                        .pod
                        .as_deref()
                        .map(|p| format!(" (pod {p})"))
                        .unwrap_or_default();
                    Fault::new("not_ready", format!("endpoint {why}{pod}"))
                });
                (url, fault)
            }
            None => (
                host(&f.ip),
                Some(Fault::new(
                    "not_ready",
                    format!("the endpoint has no port named {PORT_NAME}"),
                )),
            ),
        };
        out.push((Endpoint { host: name, url }, fault));
    }
    out
}

/// The Service's serves.
pub struct Kubernetes {
    api: Api,
    origin: String,
    namespace: String,
    service: String,
    http: Arc<Http>,
    jobs: usize,
    /// The first list, made by [`Kubernetes::new`].
    first: Option<Vec<Found>>,
}

impl Kubernetes {
    /// The serves of `service` in `namespace`, listed by the API server `config` names
    /// (a first time now, by `deadline`), read through `http`, `jobs` at once. `Err`:
    /// the line to stop with.
    pub fn new(
        config: &Config,
        namespace: &str,
        service: &str,
        http: Http,
        jobs: usize,
        deadline: Instant,
    ) -> Result<Kubernetes, Failure> {
        let api = Api::new(config).map_err(Failure::Config)?;
        let first = api.endpoints(namespace, service, deadline).map_err(|f| {
            Failure::Api(format!(
                "Kubernetes API server {} ({}): {}",
                api.server, config.origin, f.reason
            ))
        })?;
        if first.is_empty() {
            return Err(Failure::Api(format!(
                "Kubernetes API server {} lists no endpoint of Service {service} in namespace \
                 {namespace} (is contrib/kubernetes installed there? see --namespace and \
                 --service)",
                api.server
            )));
        }
        Ok(Kubernetes {
            api,
            origin: config.origin.clone(),
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            http: Arc::new(http),
            jobs,
            first: Some(first),
        })
    }
}

/// Why the Kubernetes source cannot start.
pub enum Failure {
    /// The kubeconfig's credentials cannot be used.
    Config(String),
    /// The API server did not list the endpoints.
    Api(String),
}

impl Source for Kubernetes {
    fn round(&mut self, deadline: Instant) -> Vec<Report> {
        let found = match self.first.take() {
            Some(found) => Ok(found),
            None => self.api.endpoints(&self.namespace, &self.service, deadline),
        };
        let found = match found {
            Ok(found) => found,
            Err(f) => {
                let server = self.api.server.clone();
                let reason = format!("{} ({})", f.reason, self.origin);
                return vec![Report::failed(
                    server.clone(),
                    server,
                    Fault::new(f.kind, reason),
                )];
            }
        };
        let (ask, skip): (Vec<_>, Vec<_>) =
            targets(found).into_iter().partition(|(_, f)| f.is_none());
        let mut reports = hosts::read(
            ask.into_iter().map(|(e, _)| e).collect(),
            &self.http,
            self.jobs,
            deadline,
        );
        reports.extend(
            skip.into_iter()
                .filter_map(|(e, f)| f.map(|f| Report::failed(e.host, e.url, f))),
        );
        reports.sort_by(|a, b| a.host.cmp(&b.host));
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_slices_give_a_host_per_endpoint_named_by_its_node() {
        let body = r#"{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","items":[
          {"addressType":"IPv4","ports":[{"name":"metrics","port":9477,"protocol":"TCP"}],
           "endpoints":[
             {"addresses":["10.0.0.5"],"conditions":{"ready":true},"nodeName":"gpu-1",
              "targetRef":{"kind":"Pod","name":"gpupeek-a"}},
             {"addresses":["10.0.0.6"],"conditions":{},"nodeName":"gpu-2"},
             {"addresses":["10.0.0.7"],"conditions":{"ready":false},"nodeName":"gpu-3",
              "targetRef":{"kind":"Pod","name":"gpupeek-c"}},
             {"addresses":["10.0.0.8"],"conditions":{"ready":false,"terminating":true},
              "nodeName":"gpu-1","targetRef":{"kind":"Pod","name":"gpupeek-old"}}]},
          {"addressType":"IPv6","ports":[{"name":"web","port":1,"appProtocol":"https"}],
           "endpoints":[{"addresses":["fd00::9"]}]},
          {"addressType":"FQDN","ports":[],"endpoints":[{"addresses":["x.example"]}]},
          {"addressType":"IPv4","endpoints":null,"ports":null}]}"#;
        let t = targets(parse_slices(body).unwrap());
        let shown: Vec<(&str, &str, Option<&str>)> = t
            .iter()
            .map(|(e, f)| {
                (
                    e.host.as_str(),
                    e.url.as_str(),
                    f.as_ref().map(|f| f.reason.as_str()),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("gpu-1", "http://10.0.0.5:9477/snapshot", None),
                ("gpu-2", "http://10.0.0.6:9477/snapshot", None),
                (
                    "gpu-3",
                    "http://10.0.0.7:9477/snapshot",
                    Some("endpoint not ready (pod gpupeek-c)")
                ),
                (
                    "gpu-1/gpupeek-old",
                    "http://10.0.0.8:9477/snapshot",
                    Some("endpoint terminating (pod gpupeek-old)")
                ),
                ("[fd00::9]", "https://[fd00::9]:1/snapshot", None),
            ]
        );
        assert!(parse_slices("<html>")
            .unwrap_err()
            .reason
            .starts_with("not an EndpointSliceList"));
    }

    #[test]
    fn core_endpoints_give_ready_and_not_ready_addresses() {
        let body = r#"{"kind":"Endpoints","subsets":[
          {"addresses":[{"ip":"10.0.0.5","nodeName":"gpu-1"}],
           "notReadyAddresses":[{"ip":"10.0.0.7","nodeName":"gpu-3","targetRef":{"name":"p"}}],
           "ports":[{"name":"metrics","port":9477}]},
          {"addresses":[{"ip":"10.0.0.9","nodeName":"gpu-9"}],
           "ports":[{"name":"a","port":1},{"name":"b","port":2}]}]}"#;
        let t = targets(parse_endpoints(body).unwrap());
        assert_eq!(t[0].0.host, "gpu-1");
        assert!(t[0].1.is_none());
        assert_eq!(t[1].0.host, "gpu-3");
        assert_eq!(t[1].1.as_ref().unwrap().kind, "not_ready");
        assert_eq!(t[2].0.host, "gpu-9");
        assert!(t[2]
            .1
            .as_ref()
            .unwrap()
            .reason
            .contains("no port named metrics"));
        assert!(parse_endpoints("{}").unwrap().is_empty());
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
