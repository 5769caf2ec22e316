//! `gpupeek-fleet`, run as `gpupeek fleet`: one table of the GPUs of many machines.
//!
//! Each round reads every host from its [`source::Source`] by a deadline (`--timeout`
//! from the round's start): the hosts' own `gpupeek serve` ([`hosts`]), a Prometheus
//! server ([`prometheus`]), or the serves a Kubernetes Service lists ([`kubernetes`],
//! with the API server from its kubeconfig). A host that cannot be read is shown with
//! the reason, never left out. [`model::classify`] marks free and idle-allocated GPUs
//! the same way for every source; [`render`] prints the table or the JSON. `-i` redraws every SECS
//! seconds through `gpupeek -i`'s loop (`fleetview::redraw`: the alternate screen, the
//! frame fitted to the terminal, `q` to leave), shows a round that a host holds up as far
//! as it has got ([`source::Progress`]), and keeps the last three rounds of each GPU to
//! flag memory held at 0 %.
//!
//! A program of its own so the one-shot `gpupeek` links no HTTP client (its flags come
//! from the `gpupeek` library, as gpupeek-serve's and gpupeek-top's do).

mod hostlist;
mod hosts;
mod kubernetes;
mod model;
mod prometheus;
mod render;
mod source;

use std::collections::{BTreeMap, VecDeque};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use gpupeek::fleetview::{self, Args, Exit, EXIT_KUBERNETES, EXIT_PARTIAL, EXIT_USAGE};
use kubernetes::kubeconfig;
use model::Report;
use source::{Progress, Source};

fn main() -> std::process::ExitCode {
    let result = fleetview::command_line().and_then(|args| args.map_or(Ok(()), run));
    fleetview::exit_status(result).into()
}

fn run(args: Args) -> Result<(), Exit> {
    let usage = |e: String| Exit::new(EXIT_USAGE, e);
    let http = source::http(&args).map_err(usage)?;
    let mut source: Box<dyn Source> = match &args.prometheus {
        Some(url) => Box::new(prometheus::Prometheus::new(url, http).map_err(usage)?),
        None if args.kubernetes => Box::new(kubernetes_source(&args, http)?),
        None => {
            let endpoints = hosts::endpoints(&args.hosts, &args.hostfiles).map_err(usage)?;
            if endpoints.is_empty() {
                return Err(usage("no host: the host files list none".into()));
            }
            Box::new(hosts::Hosts::new(endpoints, http, args.jobs))
        }
    };
    let colour = !args.no_color
        && !args.json
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::stdout().is_terminal();
    let paint = render::Paint(colour);
    let Some(secs) = args.watch else {
        let mut reports = source.round(Instant::now() + args.timeout, None);
        History::default().record(&mut reports);
        fleetview::write_stdout(&output(&args, &reports, paint, None))?;
        return match reports.iter().any(|r| r.error.is_some()) {
            true => Err(Exit::new(EXIT_PARTIAL, "")),
            false => Ok(()),
        };
    };
    let period = fleetview::watch_interval(secs)?;
    let mut history = History::default();
    let mut last: Option<(Instant, Vec<Report>)> = None;
    // Each host as the last round that read it found it.
    let mut previous: BTreeMap<String, Report> = BTreeMap::new();
    // The table on the terminal's screen, fitted to it (q or Ctrl-C to leave); JSON is
    // a stream of documents. A redraw sooner than the period (the terminal was resized)
    // shows the last round again rather than asking every host anew.
    // Until a host answers (or the first round ends, at most --timeout), the screen says
    // what it waits for. On the screen, a round that some host holds up (one that hangs
    // or is slow) shows what it has so far: a quarter of a second into the first round,
    // then when the next frame is due, each host still being read as the last round
    // found it.
    let waiting = format!(
        "gpupeek fleet: reading {} (at most {} s)…",
        source.what(),
        args.timeout.as_secs_f64()
    );
    fleetview::redraw(period, !args.json, Some(&waiting), |size, partial| {
        let rows = size.map(|s| s.rows);
        let (at, reports) = match last.take() {
            Some((at, reports)) if at.elapsed() < period => (at, reports),
            _ => {
                let started = Instant::now();
                let mut show = |mut so_far: Vec<Report>| {
                    for r in &mut so_far {
                        match previous.get(&r.host) {
                            Some(was) if r.is_waiting() => *r = was.clone(),
                            _ => history.flag(r),
                        }
                    }
                    render::sort(&mut so_far);
                    // A stdout that cannot be written is said by the round's frame.
                    let _ = partial.show(&output(&args, &so_far, paint, rows));
                };
                let first = match previous.is_empty() {
                    true => FIRST_PROGRESS,
                    false => period,
                };
                let mut progress = Progress {
                    at: started + first,
                    every: period,
                    show: &mut show,
                };
                let progress = partial.wanted().then_some(&mut progress);
                let mut reports = source.round(started + args.timeout, progress);
                history.record(&mut reports);
                for r in reports.iter().filter(|r| !r.is_waiting()) {
                    previous.insert(r.host.clone(), r.clone());
                }
                (started, reports)
            }
        };
        let text = output(&args, &reports, paint, rows);
        last = Some((at, reports));
        Ok(text)
    })
}

/// When the first round of `-i` shows what it has so far, if it is not over.
const FIRST_PROGRESS: Duration = Duration::from_millis(250);

/// `--kubernetes`: the kubeconfig (or the pod's service account), and a first list of
/// the Service's endpoints.
fn kubernetes_source(args: &Args, http: source::Http) -> Result<kubernetes::Kubernetes, Exit> {
    let env = kubeconfig::Env::from_process();
    let config = kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref(), &env)
        .map_err(|e| Exit::new(EXIT_USAGE, e))?;
    let namespace = args
        .namespace
        .as_deref()
        .unwrap_or(fleetview::DEFAULT_NAMESPACE);
    let service = args
        .service
        .as_deref()
        .unwrap_or(fleetview::DEFAULT_SERVICE);
    let deadline = Instant::now() + args.timeout;
    let api_proxy = args.api_proxy;
    kubernetes::Kubernetes::new(
        &config, namespace, service, http, args.jobs, api_proxy, deadline,
    )
    .map_err(|f| match f {
        kubernetes::Failure::Config(e) => Exit::new(EXIT_USAGE, e),
        // It may quote the API server or an exec plugin: printed as the table is.
        kubernetes::Failure::Api(e) => Exit::new(
            EXIT_KUBERNETES,
            gpupeek_shm::text::printable_str(&e).into_owned(),
        ),
    })
}

/// The round's table (fitted to `rows` lines on a screen) or JSON document.
fn output(args: &Args, reports: &[Report], paint: render::Paint, rows: Option<usize>) -> String {
    if args.json {
        render::json(reports, args.group_by)
    } else {
        render::table(reports, args.group_by, paint, rows)
    }
}

/// Rounds of each GPU that held memory at 0 % (`-i`), by host and GPU.
#[derive(Default)]
struct History(BTreeMap<(String, u32), VecDeque<bool>>);

/// Rounds of holding memory at 0 % that flag a GPU idle-allocated.
const IDLE_ROUNDS: usize = 3;

impl History {
    /// Makes a round's `reports` printable, classifies them, records each GPU's holding
    /// idle and flags those that did in each of the last [`IDLE_ROUNDS`], and sorts them.
    fn record(&mut self, reports: &mut [Report]) {
        for r in reports.iter_mut() {
            r.make_printable();
            model::classify(r);
            for g in &mut r.gpus {
                let h = self.0.entry((r.host.clone(), g.index)).or_default();
                h.push_back(model::holding_idle(g));
                if h.len() > IDLE_ROUNDS {
                    h.pop_front();
                }
                g.idle_allocated |= idle_rounds(h);
            }
        }
        render::sort(reports);
    }

    /// [`Self::record`] for one report of a round not over yet: flagged as the rounds
    /// recorded say, nothing recorded.
    fn flag(&self, r: &mut Report) {
        r.make_printable();
        model::classify(r);
        for g in &mut r.gpus {
            let h = self.0.get(&(r.host.clone(), g.index));
            g.idle_allocated |= h.is_some_and(idle_rounds);
        }
    }
}

/// Whether a GPU held memory idle in each of the last [`IDLE_ROUNDS`] rounds.
fn idle_rounds(h: &VecDeque<bool>) -> bool {
    h.len() == IDLE_ROUNDS && h.iter().all(|&b| b)
}
