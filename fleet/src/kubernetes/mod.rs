//! The serves of contrib/kubernetes's DaemonSet, found through the Kubernetes API: each
//! round lists the endpoints of its headless Service (`--namespace`, `--service`) and
//! reads each ready one as [`crate::hosts`] reads a `--host`, with the same TLS and
//! basic-authentication flags; or, with `--api-proxy` (from a machine with no route to
//! the pods' IPs), through the API server's pod proxy,
//! `/api/v1/namespaces/NS/pods/[https:]POD:PORT/proxy/snapshot`, with the API server's
//! agent and credential. A host is named by its endpoint's node (`nodeName`); an
//! endpoint that is not ready is a host with the fault `not_ready`, never left out.
//!
//! The list: `GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices
//! ?labelSelector=kubernetes.io/service-name=SVC&limit=N` ([`pages::PAGE_SIZE`]), then
//! each next page with `&continue=TOKEN`, the token of the page before, until a page has
//! none; a token that has expired (410) starts the list over once ([`pages`]). When the
//! server answers the first page 404 (no EndpointSlice API: Kubernetes before 1.21), the
//! Service's core v1 Endpoints, `GET /api/v1/namespaces/NS/endpoints/SVC`. Every request
//! of a round is made by its one deadline. The port is the one named `metrics` (the
//! Service's, as contrib/kubernetes names it), or the only one; https when its
//! `appProtocol` is `https`.
//!
//! The API server and credentials come from [`kubeconfig`]; [`api`] asks it, [`pages`]
//! walks the list's pages, and [`endpoints`] turns its answers into hosts. When the first
//! list fails, or finds no endpoint, the program stops with one line naming the server
//! and the reason ([`gpupeek::fleetview::EXIT_KUBERNETES`]); a later round (`-i`) that
//! cannot list shows the server as a host with the fault.

mod api;
mod endpoints;
pub mod exec;
pub mod kubeconfig;
mod pages;
mod tunnel;

use std::sync::Arc;
use std::time::Instant;

use crate::hosts;
use crate::model::{Fault, Report};
use crate::source::{Http, Progress, Source};
use api::Api;
use endpoints::{targets, Found, Via};
use kubeconfig::Config;

/// The Service's serves.
pub struct Kubernetes {
    api: Api,
    origin: String,
    namespace: String,
    service: String,
    http: Arc<Http>,
    jobs: usize,
    /// `--api-proxy`: the serves are read through the API server's pod proxy.
    api_proxy: bool,
    /// The first list, made by [`Kubernetes::new`].
    first: Option<Vec<Found>>,
}

impl Kubernetes {
    /// The serves of `service` in `namespace`, listed by the API server `config` names
    /// (a first time now, by `deadline`), read through `http` (or, with `api_proxy`,
    /// through the API server's pod proxy), `jobs` at once. `Err`: the line to stop with.
    pub fn new(
        config: &Config,
        namespace: &str,
        service: &str,
        http: Http,
        jobs: usize,
        api_proxy: bool,
        deadline: Instant,
    ) -> Result<Kubernetes, Failure> {
        let api = Api::new(config).map_err(Failure::Config)?;
        let failed = |f: Fault| {
            Failure::Api(format!(
                "Kubernetes API server {} ({}): {}",
                api.server, config.origin, f.reason
            ))
        };
        let spent = api.prepare().map_err(failed)?;
        let first = api
            .endpoints(namespace, service, deadline + spent)
            .map_err(failed)?;
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
            api_proxy,
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
    fn what(&self) -> String {
        format!(
            "the serves of service {}/{} ({})",
            self.namespace, self.service, self.api.server
        )
    }

    fn round(&mut self, deadline: Instant, progress: Option<&mut Progress>) -> Vec<Report> {
        let (found, deadline) = match self.first.take() {
            Some(found) => (Ok(found), deadline),
            None => match self.api.prepare() {
                Ok(spent) => {
                    let deadline = deadline + spent;
                    let found = self.api.endpoints(&self.namespace, &self.service, deadline);
                    (found, deadline)
                }
                Err(f) => (Err(f), deadline),
            },
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
        let via = match self.api_proxy {
            false => Via::Direct,
            true => Via::Api {
                server: &self.api.base,
                namespace: &self.namespace,
            },
        };
        let (ask, skip): (Vec<_>, Vec<_>) = targets(found, &via)
            .into_iter()
            .partition(|(_, f)| f.is_none());
        let ask: Vec<_> = ask.into_iter().map(|(e, _)| e).collect();
        let skipped: Vec<Report> = skip
            .into_iter()
            .filter_map(|(e, f)| f.map(|f| Report::failed(e.host, e.url, f)))
            .collect();
        // What is read so far, with the endpoints not asked.
        let mut show_all;
        let mut with_skipped;
        let progress = match progress {
            Some(p) => {
                show_all = |mut so_far: Vec<Report>| {
                    so_far.extend(skipped.iter().cloned());
                    so_far.sort_by(|a, b| a.host.cmp(&b.host));
                    (p.show)(so_far);
                };
                with_skipped = Progress {
                    at: p.at,
                    every: p.every,
                    show: &mut show_all,
                };
                Some(&mut with_skipped)
            }
            None => None,
        };
        let mut reports = if self.api_proxy {
            // The API server's agent and credential, as they stand this round.
            match self.api.http() {
                Ok(http) => hosts::read(ask, &Arc::new(http), self.jobs, deadline, progress),
                Err(f) => {
                    let failed = |e: hosts::Endpoint| Report::failed(e.host, e.url, f.clone());
                    ask.into_iter().map(failed).collect()
                }
            }
        } else {
            let mut reports = hosts::read(ask, &self.http, self.jobs, deadline, progress);
            hint_api_proxy(&mut reports);
            reports
        };
        reports.extend(skipped);
        reports.sort_by(|a, b| a.host.cmp(&b.host));
        reports
    }
}

/// When no serve read directly could even be connected to (every one refused, timed
/// out or unreachable), this machine likely has no route to the pod network (a laptop):
/// each row says so and names `--api-proxy`.
fn hint_api_proxy(reports: &mut [Report]) {
    let unreached = |r: &Report| {
        r.error
            .as_ref()
            .is_some_and(|f| matches!(f.kind, "refused" | "timeout" | "unreachable"))
    };
    if reports.is_empty() || !reports.iter().all(unreached) {
        return;
    }
    const HINT: &str = " (no serve could be reached from here: outside the pod network, \
                        --api-proxy reads them through the API server)";
    for f in reports.iter_mut().filter_map(|r| r.error.as_mut()) {
        f.reason.push_str(HINT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(host: &str, fault: Option<(&'static str, &str)>) -> Report {
        let mut r = Report::failed(host.into(), host.into(), Fault::new("x", "y"));
        r.error = fault.map(|(kind, why)| Fault::new(kind, why));
        r
    }

    #[test]
    fn api_proxy_is_named_only_when_no_serve_could_be_reached() {
        let mut all = vec![
            report("a", Some(("timeout", "no answer within --timeout"))),
            report("b", Some(("refused", "connection refused"))),
        ];
        hint_api_proxy(&mut all);
        for r in &all {
            let why = &r.error.as_ref().unwrap().reason;
            assert!(why.ends_with("through the API server)"), "{why}");
        }
        // One serve answered, or one failed otherwise: the network is reachable.
        for other in [None, Some(("http", "HTTP 500"))] {
            let mut some = vec![
                report("a", Some(("timeout", "no answer within --timeout"))),
                report("b", other),
            ];
            hint_api_proxy(&mut some);
            let why = &some[0].error.as_ref().unwrap().reason;
            assert_eq!(why, "no answer within --timeout");
        }
    }
}
