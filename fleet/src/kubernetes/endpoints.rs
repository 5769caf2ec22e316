//! The Service's endpoints as the API lists them (a page of an EndpointSliceList, or a
//! core v1 Endpoints), decoded into our own small structs, and the hosts they make: one
//! per endpoint, named by its node, with the `not_ready` fault when it is not ready.

use serde::Deserialize;

use crate::hosts::Endpoint;
use crate::model::Fault;

/// The Service port's name in contrib/kubernetes/service.yaml (and the DaemonSet's).
const PORT_NAME: &str = "metrics";

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
    metadata: Option<ListMeta>,
    items: Option<Vec<Slice>>,
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(rename = "continue")]
    next: Option<String>,
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

/// One page of an EndpointSliceList.
#[derive(Debug)]
pub struct Page {
    /// Its endpoints.
    pub found: Vec<Found>,
    /// The token that asks for the next page (`metadata.continue`); `None` on the last
    /// page, where the API leaves it out or empty.
    pub next: Option<String>,
}

/// A page of an EndpointSliceList: every address of every IPv4 or IPv6 slice, and the
/// token of the next page.
pub fn parse_slices(body: &str) -> Result<Page, Fault> {
    let list: SliceList =
        serde_json::from_str(body).map_err(|e| bad_json("an EndpointSliceList", e, body))?;
    let next = list
        .metadata
        .and_then(|m| m.next)
        .filter(|token| !token.is_empty());
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
    Ok(Page { found, next })
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
pub fn parse_endpoints(body: &str) -> Result<Vec<Found>, Fault> {
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

/// How the serves are reached.
pub enum Via<'a> {
    /// At their endpoints' addresses.
    Direct,
    /// Through the API server's pod proxy
    /// (`SERVER/api/v1/namespaces/NS/pods/[https:]POD:PORT/proxy/`).
    Api {
        /// The API server's URL.
        server: &'a str,
        /// The pods' namespace.
        namespace: &'a str,
    },
}

/// Whether `name` can be a pod's: at most 253 lower-case letters, digits, `-` and `.`,
/// beginning and ending with a letter or digit.
fn is_pod_name(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.starts_with(ok)
        && name.ends_with(ok)
        && name.chars().all(|c| ok(c) || c == '-' || c == '.')
}

/// What a round asks, or reports without asking: a host per endpoint, reached `via`.
pub fn targets(found: Vec<Found>, via: &Via) -> Vec<(Endpoint, Option<Fault>)> {
    let mut out: Vec<(Endpoint, Option<Fault>)> = Vec::new();
    for f in found {
        let mut name = f.node.clone().unwrap_or_else(|| bracketed(&f.ip));
        // Two endpoints on one node (a pod being replaced): the pod tells them apart.
        if out.iter().any(|(e, _)| e.host == name) {
            name = format!("{name}/{}", f.pod.as_deref().unwrap_or(&f.ip));
        }
        let (url, fault) = match snapshot_url(&f, via) {
            Ok(url) => {
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
            Err(fault) => (bracketed(&f.ip), Some(fault)),
        };
        out.push((Endpoint { host: name, url }, fault));
    }
    out
}

/// An address as a URL holds it: an IPv6 address in brackets.
fn bracketed(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_owned()
    }
}

/// Where endpoint `f` is asked for its `/snapshot`, reached `via`; `Err` when it cannot
/// be asked (no serve's port, or no pod to proxy to).
fn snapshot_url(f: &Found, via: &Via) -> Result<String, Fault> {
    let Some((port, https)) = f.port else {
        let why = format!("the endpoint has no port named {PORT_NAME}");
        return Err(Fault::new("not_ready", why));
    };
    match via {
        Via::Direct => {
            let scheme = if https { "https" } else { "http" };
            Ok(format!("{scheme}://{}:{port}/snapshot", bracketed(&f.ip)))
        }
        Via::Api { server, namespace } => {
            // A pod's name goes into the proxy's path: only a name the API allows a pod
            // (an RFC 1123 subdomain), never one that would walk out of it.
            let pod = f.pod.as_deref().filter(|p| is_pod_name(p)).ok_or_else(|| {
                let why = "the endpoint names no pod for the API server to proxy to";
                Fault::new("not_ready", why)
            })?;
            let scheme = if https { "https:" } else { "" };
            Ok(format!(
                "{server}/api/v1/namespaces/{namespace}/pods/{scheme}{pod}:{port}/proxy/snapshot"
            ))
        }
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
        let t = targets(parse_slices(body).unwrap().found, &Via::Direct);
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
    fn a_pages_continue_token_asks_for_the_next_page() {
        let page = |metadata: &str| {
            let body = format!(
                r#"{{"kind":"EndpointSliceList","metadata":{metadata},"items":[
                  {{"addressType":"IPv4","ports":[{{"name":"metrics","port":9477}}],
                    "endpoints":[{{"addresses":["10.0.0.5"],"nodeName":"gpu-1"}}]}}]}}"#
            );
            parse_slices(&body).unwrap()
        };
        let first = page(
            r#"{"resourceVersion":"7","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==","remainingItemCount":2}"#,
        );
        assert_eq!(
            first.next.as_deref(),
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==")
        );
        assert_eq!(first.found.len(), 1);
        // The last page: the token empty, left out, or no metadata at all.
        assert_eq!(page(r#"{"resourceVersion":"7","continue":""}"#).next, None);
        assert_eq!(page(r#"{"resourceVersion":"7"}"#).next, None);
        assert_eq!(page("null").next, None);
        assert_eq!(parse_slices(r#"{"items":[]}"#).unwrap().next, None);
    }

    #[test]
    fn through_the_api_server_each_pod_is_asked_at_its_proxy_path() {
        let found = |pod: Option<&str>, https: bool| Found {
            node: Some("gpu-1".into()),
            pod: pod.map(str::to_owned),
            ip: "10.0.0.5".into(),
            port: Some((9477, https)),
            not_ready: None,
        };
        let via = Via::Api {
            server: "https://k8s:6443",
            namespace: "gpupeek",
        };
        let t = targets(
            vec![
                found(Some("gpupeek-a"), false),
                found(Some("gpupeek-b"), true),
                found(None, false),
                found(
                    Some("x/../../../api/v1/namespaces/kube-system/secrets?"),
                    false,
                ),
                found(Some("Caps"), false),
            ],
            &via,
        );
        let urls: Vec<&str> = t.iter().map(|(e, _)| e.url.as_str()).collect();
        assert_eq!(
            urls[..2],
            [
                "https://k8s:6443/api/v1/namespaces/gpupeek/pods/gpupeek-a:9477/proxy/snapshot",
                "https://k8s:6443/api/v1/namespaces/gpupeek/pods/https:gpupeek-b:9477/proxy/snapshot",
            ]
        );
        assert!(t[0].1.is_none() && t[1].1.is_none());
        for (_, fault) in &t[2..] {
            let why = &fault.as_ref().unwrap().reason;
            assert!(why.contains("names no pod"), "{why}");
        }
    }

    #[test]
    fn core_endpoints_give_ready_and_not_ready_addresses() {
        let body = r#"{"kind":"Endpoints","subsets":[
          {"addresses":[{"ip":"10.0.0.5","nodeName":"gpu-1"}],
           "notReadyAddresses":[{"ip":"10.0.0.7","nodeName":"gpu-3","targetRef":{"name":"p"}}],
           "ports":[{"name":"metrics","port":9477}]},
          {"addresses":[{"ip":"10.0.0.9","nodeName":"gpu-9"}],
           "ports":[{"name":"a","port":1},{"name":"b","port":2}]}]}"#;
        let t = targets(parse_endpoints(body).unwrap(), &Via::Direct);
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
}
