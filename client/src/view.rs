//! What gpustat's table and JSON show, built from the model ([`gpupeek_model`]): its
//! values in gpustat's units (MiB, whole watts), text decoded, processes grouped under
//! their GPU with the reader's own pids and the details its own `/proc` fills in.
//! Which values a GPU shows in which state is the model's rule, not this module's.

use gpupeek_model::{Gpm, Gpu, GpuState, MigGpm, Model, ProcPolicy, Process, Text};
use gpupeek_shm::Snapshot;

use crate::local::LocalProc;
use crate::verdict::{self, Thresholds, Verdict};

/// The whole view: header facts and the selected GPUs.
#[derive(Debug)]
pub struct View {
    /// Driver version, when the daemon knows it.
    pub driver_version: Option<String>,
    /// Wall-clock time of the publish, ns since the Unix epoch.
    pub published_unix_ns: u64,
    /// GPUs in display order.
    pub gpus: Vec<GpuView>,
    /// How much the daemon publishes about processes (`None` from a 1.0 daemon).
    pub proc_policy: Option<ProcPolicy>,
    /// How long before this view was built the daemon sampled the process lists, ms
    /// (it samples them every `--process-interval`; `None` from a daemon before ABI 1.2).
    pub processes_age_ms: Option<u64>,
}

/// One GPU.
#[derive(Debug)]
pub struct GpuView {
    /// NVML index.
    pub index: u32,
    /// Health.
    pub state: GpuState,
    /// Product name.
    pub name: Option<String>,
    /// UUID.
    pub uuid: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Degrees Celsius.
    pub temperature_c: Option<i32>,
    /// Percent.
    pub fan_pct: Option<u32>,
    /// Percent.
    pub util_pct: Option<u32>,
    /// Percent.
    pub enc_pct: Option<u32>,
    /// Percent.
    pub dec_pct: Option<u32>,
    /// Whole watts (rounded down, as gpustat).
    pub power_draw_w: Option<u64>,
    /// Whole watts.
    pub power_limit_w: Option<u64>,
    /// MiB (rounded down, as gpustat).
    pub mem_used_mib: Option<u64>,
    /// MiB.
    pub mem_total_mib: Option<u64>,
    /// `None` when the process list was not available.
    pub processes: Option<Vec<ProcView>>,
    /// Processes NVML listed that did not fit in the segment's table.
    pub processes_not_shown: u32,
    /// Whether the GPU is really working (see [`crate::verdict`]).
    pub verdict: Option<Verdict>,
    /// Clock event (throttle) reasons in force, by nvidia-smi's names.
    pub clock_event_reasons: Option<Vec<&'static str>>,
    /// GPM metrics, when the GPU has GPM and the daemon computed them.
    pub gpm: Option<Gpm>,
    /// Its MIG devices (none when MIG is off); their processes are also in `processes`.
    pub mig: Vec<MigView>,
}

/// One MIG device of a GPU.
#[derive(Debug)]
pub struct MigView {
    /// GPU and compute instance ids.
    pub ids: (u32, u32),
    /// Profile: `3g.40gb`.
    pub profile: Option<String>,
    /// MIG device UUID.
    pub uuid: Option<String>,
    /// MiB (rounded down, as gpustat).
    pub mem_used_mib: Option<u64>,
    /// MiB.
    pub mem_total_mib: Option<u64>,
    /// Streaming multiprocessors.
    pub sm_count: Option<u32>,
    /// GPM metrics of its GPU instance.
    pub gpm: Option<MigGpm>,
    /// Whether it is really working (see [`crate::verdict::judge_mig`]).
    pub verdict: Option<Verdict>,
}

/// One process on one GPU.
#[derive(Debug, Clone, Default)]
pub struct ProcView {
    /// Pid as the reader knows it: in the reader's own pid namespace when the process
    /// is in it (e.g. both in one container), else the host pid.
    pub pid: u32,
    /// Pid in the host's (the daemon's) pid namespace.
    pub host_pid: u32,
    /// Owner's uid.
    pub uid: Option<u32>,
    /// User name.
    pub user: Option<String>,
    /// Command name.
    pub command: Option<String>,
    /// Command line, one string per argument; the last ends in `…` when truncated.
    pub full_command: Option<Vec<String>>,
    /// MiB.
    pub gpu_mem_mib: Option<u64>,
    /// SM, memory, encoder, decoder utilisation by this process, percent.
    pub gpu_util_pct: Option<[u32; 4]>,
    /// Percent of one core over the daemon's last period.
    pub cpu_percent: Option<f64>,
    /// Resident host memory, bytes.
    pub host_mem_bytes: Option<u64>,
    /// Seconds since the process started, at the time of the publish.
    pub running_secs: Option<u64>,
    /// "compute", "graphics" or "both".
    pub kind: &'static str,
    /// MIG GPU and compute instance ids.
    pub mig: Option<(u32, u32)>,
    /// Container runtime, id and pod uid.
    pub container: Option<ContainerView>,
}

/// The container a process runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// "docker", "containerd", "cri-o", "podman", "lxc" or "kubepods".
    pub runtime: String,
    /// Container id (or lxc name).
    pub id: String,
    /// Kubernetes pod uid.
    pub pod_uid: Option<String>,
}

/// The segment's user field holds 31 bytes: a longer name (SSSD or AD `user@domain`
/// names) arrives cut. One that fills the field is completed from the reader's own user
/// database (`lookup`), when the name found there for the uid begins with what was
/// published; otherwise the published name stands.
fn complete_user_name(
    published: String,
    field: &[u8],
    uid: u32,
    lookup: impl Fn(u32) -> String,
) -> String {
    let used = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    // Within a character of full: encoding cuts at a character boundary.
    if used + 4 < field.len() {
        return published;
    }
    let local = lookup(uid);
    if local.len() > published.len() && local.starts_with(&published) {
        local
    } else {
        published
    }
}

fn user_name_of(uid: u32) -> String {
    gpupeek_shm::procfs::user_name(uid)
}

/// How processes are decoded: the reader's pid namespace, and whether to fill in the
/// details the daemon withheld from the reader's own `/proc`.
#[derive(Debug, Default)]
pub struct Context {
    /// Inode of the reader's pid namespace (0 when unknown).
    pub pid_ns_inode: u64,
    /// Reads the reader's own `/proc` for a pid (`None` when it shows nothing).
    pub local: Option<fn(u32) -> Option<LocalProc>>,
    /// Whether a pid the daemon could not resolve has left the reader's `/proc`: set
    /// only when the daemon resolves processes (full policy, some process resolved),
    /// `/proc` hides no one and the reader shares the daemon's pid namespace. Such a
    /// process (NVML still listing a pid that is gone, gpustat issue #95) is not shown,
    /// as gpustat shows no process psutil cannot find.
    pub gone: Option<fn(u32) -> bool>,
}

fn decode(t: Option<Text>) -> Option<String> {
    t.map(Text::decode)
}

impl View {
    /// Builds the view of `ids` (all GPUs when `None`); an unknown id is an error.
    pub fn new(snap: &Snapshot, ids: Option<&[u32]>, ctx: &Context) -> Result<View, u32> {
        let model = Model::new(snap);
        let gpus = match ids {
            None => model
                .gpus
                .iter()
                .map(|g| GpuView::new(g, &model, ctx))
                .collect(),
            Some(ids) => ids
                .iter()
                .map(|&id| Ok(GpuView::new(model.gpu(id).ok_or(id)?, &model, ctx)))
                .collect::<Result<_, u32>>()?,
        };
        Ok(View {
            driver_version: decode(model.status.driver_version),
            published_unix_ns: model.status.published_unix_ns,
            gpus,
            proc_policy: model.proc_policy,
            processes_age_ms: model
                .processes_age_ns(gpupeek_shm::mono_now_ns())
                .map(|ns| ns / 1_000_000),
        })
    }
}

impl GpuView {
    fn new(g: &Gpu, model: &Model, ctx: &Context) -> GpuView {
        let mut gone = 0;
        let processes = g.process_count.map(|_| {
            model
                .processes_on(g.index)
                .filter(|p| {
                    let unresolved = p.user.is_none() && p.cmdline.is_none();
                    let left = unresolved && ctx.gone.is_some_and(|gone| gone(p.pid));
                    gone += u32::from(left);
                    !left
                })
                .map(|p| ProcView::new(p, model, ctx))
                .collect::<Vec<_>>()
        });
        let shown = processes.as_ref().map_or(0, Vec::len) as u32 + gone;
        GpuView {
            index: g.index,
            state: g.state,
            name: decode(g.name),
            uuid: decode(g.uuid),
            pci_bus_id: decode(g.pci_bus_id),
            temperature_c: g.temp_c,
            fan_pct: g.fan_pct,
            util_pct: g.util_pct,
            enc_pct: g.util_enc_pct,
            dec_pct: g.util_dec_pct,
            power_draw_w: g.power_draw.map(|p| p.whole_watts()),
            power_limit_w: g.power_limit.map(|p| p.whole_watts()),
            mem_used_mib: g.memory.map(|m| m.used.mib()),
            mem_total_mib: g.memory.map(|m| m.total.mib()),
            processes_not_shown: g.process_count.map_or(0, |n| n.saturating_sub(shown)),
            processes,
            verdict: verdict::judge(g, &Thresholds::current()),
            clock_event_reasons: g.clock_event_reasons.map(|r| r.names()),
            gpm: g.gpm,
            mig: model
                .mig_on(g.index)
                .map(|m| MigView {
                    ids: (m.gpu_instance_id, m.compute_instance_id),
                    profile: decode(m.profile),
                    uuid: decode(m.uuid),
                    mem_used_mib: m.memory.map(|m| m.used.mib()),
                    mem_total_mib: m.memory.map(|m| m.total.mib()),
                    sm_count: m.sm_count,
                    gpm: m.gpm,
                    verdict: model
                        .mig_as_gpu(m)
                        .and_then(|g| verdict::judge_mig(&g, &Thresholds::current())),
                })
                .collect(),
        }
    }

    /// The processes that run in MIG device `mig` of this GPU.
    pub fn processes_in<'v>(&'v self, mig: &'v MigView) -> impl Iterator<Item = &'v ProcView> {
        let all = self.processes.as_deref().unwrap_or_default();
        all.iter().filter(move |p| p.mig == Some(mig.ids))
    }

    /// The processes in none of this GPU's MIG devices (all of them when MIG is off).
    pub fn processes_outside_mig(&self) -> impl Iterator<Item = &ProcView> {
        let all = self.processes.as_deref().unwrap_or_default();
        all.iter()
            .filter(move |p| !self.mig.iter().any(|m| p.mig == Some(m.ids)))
    }

    /// False when the GPU was not sampled (lost, failing or asleep).
    pub fn is_healthy(&self) -> bool {
        matches!(self.state, GpuState::Ok)
    }

    /// What gpustat shows instead of the name of a GPU that could not be sampled
    /// (gpustat's "invalid GPU"); `None` for a healthy or an asleep GPU.
    pub fn problem(&self) -> Option<&'static str> {
        match self.state {
            GpuState::Ok | GpuState::Suspended | GpuState::Idle => None,
            GpuState::Lost => Some("((GPU is lost))"),
            GpuState::NotResponding => Some("((Driver not responding))"),
            GpuState::Error | GpuState::Empty => Some("((Unknown Error))"),
        }
    }

    /// `"suspended"` or `"idle"` when the daemon lets the GPU sleep and does not query
    /// it (so it has no current values).
    pub fn asleep(&self) -> Option<&'static str> {
        match self.state {
            GpuState::Suspended | GpuState::Idle => Some(self.state.name()),
            _ => None,
        }
    }
}

impl ProcView {
    fn new(p: &Process, model: &Model, ctx: &Context) -> ProcView {
        let published = model.status.published_unix_ns;
        let reader_ns = (ctx.pid_ns_inode != 0).then_some(ctx.pid_ns_inode);
        let pid = p.pid_in(reader_ns, model.pid_ns_inode).unwrap_or(p.pid);
        let mut view = ProcView {
            pid,
            host_pid: p.pid,
            uid: p.user.map(|(uid, _)| uid),
            user: p.user.map(|(uid, name)| {
                complete_user_name(name.decode(), name.field(), uid, user_name_of)
            }),
            command: decode(p.command),
            full_command: p.argv(),
            gpu_mem_mib: p.gpu_mem.map(|b| b.mib()),
            gpu_util_pct: p.gpu_util_pct,
            cpu_percent: p.cpu.map(|c| c.pct()),
            host_mem_bytes: p.host_mem.map(|b| b.0),
            running_secs: p
                .start_unix_ns
                .map(|start| published.saturating_sub(start) / 1_000_000_000),
            kind: p.kind.name(),
            mig: p.mig,
            container: p.container.map(|(runtime, id, pod)| ContainerView {
                runtime: runtime.decode(),
                id: id.decode(),
                pod_uid: decode(pod),
            }),
        };
        // The daemon withheld the details (basic policy, e.g. under hidepid): show what
        // the reader's own /proc shows, when the pids are in the reader's namespace.
        let withheld = p.user.is_none();
        let readers_ns = model.pid_ns_inode.is_some_and(|i| i == ctx.pid_ns_inode);
        if let Some(local) = ctx.local.filter(|_| withheld && readers_ns) {
            if let Some(found) = local(p.pid) {
                found.fill(&mut view, published);
            }
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::text;

    fn field(name: &str) -> [u8; 32] {
        let mut f = [0u8; 32];
        text::encode(&mut f, name);
        f
    }

    #[test]
    fn a_user_name_cut_by_the_field_is_completed_from_the_readers_user_database() {
        let long = "averyveryverylongusername@ad.example.edu";
        let f = field(long);
        let published = text::decode(&f);
        assert_eq!(published.len(), 31, "the field cuts it");
        let lookup = |uid: u32| {
            if uid == 4242 {
                long.to_owned()
            } else {
                uid.to_string()
            }
        };
        assert_eq!(
            complete_user_name(published.clone(), &f, 4242, lookup),
            long
        );
        // A database that says something else (another container's) is not believed.
        let other = |_: u32| "someone-else-entirely-with-a-long-name".to_owned();
        assert_eq!(
            complete_user_name(published.clone(), &f, 4242, other),
            published
        );
        // A name that fits is never looked up.
        let short = field("alice");
        let never = |_: u32| -> String { panic!("looked up a name that fits") };
        assert_eq!(
            complete_user_name("alice".into(), &short, 1000, never),
            "alice"
        );
    }
}
