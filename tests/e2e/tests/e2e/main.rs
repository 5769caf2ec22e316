//! The end-to-end tests: the real gpupeekd and gpupeek on the fake NVML, one module per
//! subject, all in this one integration binary. One binary links the dependency graph
//! once, where a file per binary linked it about thirty times.
//!
//! A test's name is its module and function: `cargo test -p gpupeek-e2e --test e2e --
//! soak::` runs one module, `-- hung::a_hung_` the tests whose names contain that.
//!
//! Every test shares this process with the others, run in parallel: none sets an
//! environment variable, changes the current directory or handles a signal in it, and
//! helpers that must happen once ([`gpupeek_e2e::bins`], [`gpupeek_e2e::driver_library`])
//! happen once per process. Tests that load the machine heavily, or measure what a
//! loaded machine would skew, take turns ([`gpupeek_e2e::one_at_a_time`]).

mod alerts;
mod allocations;
mod completions;
mod contrib;
mod contrib_history;
mod contrib_snippets;
mod counters;
mod demo;
mod drivers;
mod e2e;
mod exporters;
mod fake_kube_api;
mod faults;
mod fleet;
mod fleet_dcgm;
mod fleet_faults;
mod fleet_kubernetes;
mod fleet_kubernetes_access;
mod fleet_mig;
mod fleet_watch;
mod gpu_check;
mod gpustat;
mod gpustat_cases;
mod history;
mod hostile;
mod hung;
mod install;
mod kubernetes;
mod manpages;
mod mig;
mod mig_outputs;
mod nvitop;
mod nvml_cost;
mod plot;
mod pod_views;
mod privilege;
mod processes;
mod prometheus;
mod prompt_file;
mod prompt_nofork;
mod query;
mod runtime_pm;
mod serve_stream;
mod serve_web;
mod smi;
mod smi590;
mod smi610;
mod soak;
mod states;
mod statusbar;
mod systemd;
mod tiered_history;
mod tiers;
mod top;
mod verdicts;
mod watch;
mod xid;
