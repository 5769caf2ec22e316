//! Pod views (`--pod-views DIR`): besides the main segment, one segment per Kubernetes
//! pod on the node, the file `DIR/<pod uid>/gpupeek`, for the pod to mount read-only
//! (`subPathExpr: $(POD_UID)`) and read with every gpupeek reader unchanged.
//!
//! A view has the main segment's layout and holds only what its pod may see: the GPUs
//! (and MIG instances) the pod is allocated or runs processes on, their records whole
//! (so memory in use on a GPU is every pod's together: other pods only as that
//! aggregate), and the pod's own processes, their pids those of the process's own pid
//! namespace (the last `NSpid` of `/proc/PID/status`), under the main table's privacy
//! policy. Every other GPU is absent.
//!
//! Who is in which pod is decided here, by the daemon, from what no pod can write: the
//! cgroup each process runs in (its pod uid, see [`crate::container`]) and the kubelet's
//! pod-resources API (which pod each GPU or MIG device is allocated to, by namespace and
//! name), joined to pod uids through the kubelet's pod log directory
//! (`/var/log/pods/<namespace>_<name>_<uid>`). The pod's view is named by that uid, which
//! must have a UUID's shape: never a path from anything a pod says. The membership is
//! worked out on the slow tier's cadence, in this thread; each tick then only copies the
//! records of each view's GPUs into it, under the same seqlocks, and bumps its
//! generation. No NVML call is made for a view.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use gpupeek_kube::{Device, MigDevice, Poller};
use gpupeek_shm::layout::{proc_valid, DaemonState};
use gpupeek_shm::writer::unlink_file;
use gpupeek_shm::{
    GpuRecord, MigRecord, Options, ProcContext, ProcRecord, Publisher, StatusRecord,
};

use crate::container::is_uuid;
use crate::history;

/// The kubelet's pod-resources socket.
pub const DEFAULT_KUBELET_SOCKET: &str = gpupeek_kube::DEFAULT_SOCKET;
/// The kubelet's pod log directory.
pub const DEFAULT_POD_LOG_DIR: &str = "/var/log/pods";
/// The segment file's name in a pod's directory.
pub const FILE: &str = "gpupeek";
/// Most pods with a view at once; a pod beyond them gets none (logged once).
pub const MAX_VIEWS: usize = 256;
/// Process slots of a view.
const PROC_CAPACITY: u32 = 256;
/// How often the directories of gone pods are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// How long one call to the kubelet may take.
const KUBELET_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the views go and what to ask.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--pod-views`.
    pub dir: PathBuf,
    /// `--kubelet-socket`.
    pub kubelet_socket: PathBuf,
    /// `--pod-log-dir`.
    pub pod_log_dir: PathBuf,
}

/// A GPU a pod sees: whole, or only some of its MIG GPU instances.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    uuid: [u8; 96],
    /// The pod holds (or runs on) the whole GPU: all its MIG instances are shown.
    whole: bool,
    /// MIG GPU instances the pod holds or runs on, when not whole.
    instances: Vec<u32>,
}

/// One pod's segment.
struct View {
    /// The pod uid as the process records hold it (NUL-padded).
    uid_bytes: [u8; 40],
    dir: File,
    publisher: Publisher,
    members: Vec<Member>,
    /// The process table must be rewritten (membership changed, or a new view).
    procs_stale: bool,
}

/// The main segment's contents this tick, for the views to copy from.
pub struct Tick<'a> {
    /// The status record just published.
    pub status: &'a StatusRecord,
    /// The GPU records just published, in slot order.
    pub gpus: &'a [GpuRecord],
    /// The MIG table just published.
    pub mig: &'a [MigRecord],
    /// The history step, when this tick appends history samples.
    pub history_step: Option<u64>,
    /// The process table as last written: its context, records and text pool, and a
    /// number that changes whenever it is rewritten.
    pub procs: (&'a ProcContext, &'a [ProcRecord], &'a [u8], u64),
}

/// Every pod's view.
pub struct PodViews {
    settings: Settings,
    root: File,
    kubelet: Poller,
    /// The kubelet's last answer.
    allocations: std::sync::Arc<gpupeek_kube::DeviceMap>,
    views: BTreeMap<String, View>,
    clock: history::Clock,
    /// When the directories of gone pods were last looked for.
    swept_at: Instant,
    /// The process table generation last copied.
    procs_seen: Option<u64>,
    epoch: u64,
    warned_full: bool,
    /// Scratch of each tick's copies, kept to reuse their memory.
    records: Vec<ProcRecord>,
    text: Vec<u8>,
    shown: Vec<(u32, usize)>,
    indices: Vec<u32>,
    mig: Vec<MigRecord>,
}

/// A directory fit to hold segments: a real directory (not a link), owned by this user,
/// that neither the group nor others can write to.
fn trusted_dir(meta: &std::fs::Metadata) -> Result<(), String> {
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!("owned by uid {}, not by this user", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "mode {:04o}: the group or others can write to it",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

fn open_dir_at(dir: &File, name: &str) -> nix::Result<File> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    nix::fcntl::openat(dir.as_fd(), name, flags, Mode::empty()).map(File::from)
}

impl Settings {
    /// Opens `dir` (creating it mode 0755 if missing) after checking that it can be
    /// trusted with segments; the error is one line.
    pub fn open(&self) -> Result<File, String> {
        let dir = &self.dir;
        let say = |what: String| format!("--pod-views {}: {what}", dir.display());
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(|e| say(e.to_string()))?;
        }
        let meta = std::fs::symlink_metadata(dir).map_err(|e| say(e.to_string()))?;
        trusted_dir(&meta).map_err(say)?;
        let root = File::open(dir).map_err(|e| say(e.to_string()))?;
        let opened = root.metadata().map_err(|e| say(e.to_string()))?;
        if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
            return Err(say("replaced while being opened".into()));
        }
        Ok(root)
    }
}

impl PodViews {
    /// Starts asking the kubelet every `period` and removes the views a previous daemon
    /// left in `root` (`settings.dir`, opened by [`Settings::open`]).
    pub fn new(settings: Settings, root: File, period: Duration, epoch: u64) -> Self {
        let views = PodViews {
            kubelet: Poller::spawn(
                "gpupeekd",
                settings.kubelet_socket.clone(),
                period.max(Duration::from_secs(1)),
                KUBELET_TIMEOUT,
            ),
            root,
            allocations: Default::default(),
            views: BTreeMap::new(),
            swept_at: Instant::now(),
            clock: history::Clock::every(period, period),
            procs_seen: None,
            epoch,
            warned_full: false,
            records: Vec::new(),
            text: Vec::new(),
            shown: Vec::new(),
            indices: Vec::new(),
            mig: Vec::new(),
            settings,
        };
        views.remove_leftovers();
        views
    }

    /// Removes what is in the directory for pods without a view: at start, what an
    /// earlier run left (the pods still here get new views at the first membership);
    /// later, the directories of pods gone since (see [`Self::remove`]).
    fn remove_leftovers(&self) {
        let Ok(entries) = std::fs::read_dir(&self.settings.dir) else {
            return;
        };
        for entry in entries.flatten() {
            if let Some(uid) = entry.file_name().to_str().filter(|n| is_uuid(n)) {
                if !self.views.contains_key(uid) {
                    self.remove(uid, None);
                }
            }
        }
    }

    /// Removes pod `uid`'s segment file, and its directory once the pod is gone for the
    /// kubelet too. A running pod keeps the directory it mounted (its mount holds that
    /// directory, not the name: a directory removed and made again would never be seen
    /// by the pod), so the directory is removed only when the kubelet has removed the
    /// pod's log directory, and only when empty.
    fn remove(&self, uid: &str, dir: Option<&File>) {
        let opened;
        let dir = match dir {
            Some(dir) => dir,
            None => match open_dir_at(&self.root, uid) {
                Ok(d) => {
                    opened = d;
                    &opened
                }
                Err(_) => return,
            },
        };
        let label = self.label(uid);
        if let Err(e) = unlink_file(dir.as_fd(), FILE, &label) {
            log::warn!("{e}");
        }
        if has_log_dir(&self.settings.pod_log_dir, uid) {
            return;
        }
        // Not empty if someone wrote there: kept.
        let _ = nix::unistd::unlinkat(
            self.root.as_fd(),
            uid,
            nix::unistd::UnlinkatFlags::RemoveDir,
        );
    }

    fn label(&self, uid: &str) -> String {
        self.settings
            .dir
            .join(uid)
            .join(FILE)
            .to_string_lossy()
            .into_owned()
    }

    /// Publishes this tick into every view; on the slow tier's cadence first works out
    /// which pods have views and what each sees.
    pub fn publish(&mut self, now: Instant, tick: &Tick) {
        if self.clock.due(now) {
            let wanted = self.membership(tick);
            self.apply(wanted);
            if now.duration_since(self.swept_at) >= SWEEP_EVERY {
                self.remove_leftovers();
                self.swept_at = now;
            }
        }
        let (context, records, text, generation) = tick.procs;
        let procs_changed = self.procs_seen != Some(generation);
        self.procs_seen = Some(generation);
        for view in self.views.values_mut() {
            // (GPU index, member) of each GPU shown, in slot order.
            let shown = &mut self.shown;
            shown.clear();
            for (at, member) in view.members.iter().enumerate() {
                let Some(gpu) = tick.gpus.iter().find(|g| g.uuid == member.uuid) else {
                    continue;
                };
                let slot = shown.len();
                view.publisher.write_gpu(slot, gpu);
                if let Some(step) = tick.history_step {
                    view.publisher
                        .append_history(slot, step, &history::sample_of(gpu));
                }
                shown.push((gpu.index, at));
            }
            let indices = &mut self.indices;
            indices.clear();
            indices.extend(shown.iter().map(|&(index, _)| index));
            if procs_changed || std::mem::take(&mut view.procs_stale) {
                copy_processes(
                    &view.uid_bytes,
                    indices,
                    records,
                    text,
                    view.publisher.text_pool_size(),
                    &mut self.records,
                    &mut self.text,
                );
                let context = ProcContext {
                    pid_ns_inode: common_namespace(&self.records),
                    ..*context
                };
                view.publisher
                    .write_processes(&context, &self.records, &self.text);
            }
            let members = &view.members;
            self.mig.clear();
            self.mig.extend(tick.mig.iter().filter(|m| {
                shown.iter().any(|&(index, at)| {
                    index == m.gpu_index
                        && (members[at].whole || members[at].instances.contains(&m.gpu_instance_id))
                })
            }));
            view.publisher.write_mig(&self.mig);
            let status = StatusRecord {
                gpu_count: shown.len() as u32,
                ..*tick.status
            };
            view.publisher.set_status(&status);
            if status.state != DaemonState::Starting as u32 {
                view.publisher.bump_generation();
            }
        }
    }

    /// Publishes `status` (the daemon stopping) into every view.
    pub fn stop(&mut self, status: &StatusRecord) {
        for view in self.views.values() {
            view.publisher.set_status(&StatusRecord {
                gpu_count: 0,
                ..*status
            });
            view.publisher.bump_generation();
        }
    }

    /// Which pods see which GPUs: from the process records (a process's cgroup names its
    /// pod) and from the kubelet's allocations.
    fn membership(&mut self, tick: &Tick) -> BTreeMap<String, Vec<Member>> {
        let mut wanted: BTreeMap<String, Vec<Member>> = BTreeMap::new();
        let mut add = |uid: &str, gpu: &GpuRecord, instance: Option<u32>| {
            let members = wanted.entry(uid.to_owned()).or_default();
            let at = match members.iter().position(|m| m.uuid == gpu.uuid) {
                Some(at) => at,
                None => {
                    members.push(Member {
                        uuid: gpu.uuid,
                        whole: false,
                        instances: Vec::new(),
                    });
                    members.len() - 1
                }
            };
            let member = &mut members[at];
            match instance {
                None => member.whole = true,
                Some(gi) if !member.instances.contains(&gi) => member.instances.push(gi),
                Some(_) => {}
            }
        };
        // A GPU not keyed yet (the session is starting) is in no view until it is.
        let keyed = |g: &&GpuRecord| g.valid & gpupeek_shm::layout::gpu_valid::UUID != 0;
        let gpu_of = |index: u32| tick.gpus.iter().filter(keyed).find(|g| g.index == index);
        for p in tick.procs.1 {
            if p.valid & proc_valid::CONTAINER == 0 {
                continue;
            }
            let uid = gpupeek_shm::text::decode(&p.pod_uid);
            if !is_uuid(&uid) {
                continue;
            }
            if let Some(gpu) = gpu_of(p.gpu_index) {
                let instance = (p.gpu_instance_id != u32::MAX).then_some(p.gpu_instance_id);
                add(&uid, gpu, instance);
            }
        }
        let kube = self.kubelet.current();
        // While the kubelet does not answer, its last answer stands: a pod is not
        // taken for gone because the kubelet restarts.
        if kube.up {
            self.allocations = kube.map;
        }
        if !self.allocations.is_empty() {
            let allocations = &self.allocations;
            let uids = pod_uids(&self.settings.pod_log_dir);
            let mut owners_of = |device: &Device, gpu: &GpuRecord, instance: Option<u32>| {
                for owner in allocations.owners(device) {
                    let key = (owner.namespace.clone(), owner.pod.clone());
                    if let Some(uid) = uids.get(&key) {
                        add(uid, gpu, instance);
                    }
                }
            };
            for gpu in tick.gpus.iter().filter(keyed) {
                let uuid = gpupeek_shm::text::decode(&gpu.uuid);
                let device = Device {
                    index: gpu.index,
                    uuid: Some(&uuid).filter(|u| !u.is_empty()).map(|u| u.as_str()),
                    mig: None,
                };
                owners_of(&device, gpu, None);
                for m in tick.mig.iter().filter(|m| m.gpu_index == gpu.index) {
                    let mig_uuid = gpupeek_shm::text::decode(&m.uuid);
                    let device = Device {
                        mig: Some(MigDevice {
                            gpu_instance_id: m.gpu_instance_id,
                            uuid: Some(mig_uuid.as_str()).filter(|u| !u.is_empty()),
                        }),
                        ..device
                    };
                    owners_of(&device, gpu, Some(m.gpu_instance_id));
                }
            }
        }
        for members in wanted.values_mut() {
            members.sort_by_key(|m| tick.gpus.iter().position(|g| g.uuid == m.uuid));
        }
        wanted
    }

    /// Makes the views `wanted` and only those: removes the others' segments, creates
    /// the new ones (recreating one whose GPUs outgrew it).
    fn apply(&mut self, wanted: BTreeMap<String, Vec<Member>>) {
        let gone: Vec<String> = self
            .views
            .keys()
            .filter(|uid| !wanted.contains_key(*uid))
            .cloned()
            .collect();
        for uid in gone {
            if let Some(view) = self.views.remove(&uid) {
                log::info!("pod {uid} is gone: removing its view");
                self.remove(&uid, Some(&view.dir));
            }
        }
        for (uid, members) in wanted {
            if let Some(view) = self.views.get_mut(&uid) {
                if view.publisher.geometry().gpu_capacity >= members.len() {
                    if view.members != members {
                        view.members = members;
                        view.procs_stale = true;
                    }
                    continue;
                }
                self.views.remove(&uid);
            } else if self.views.len() >= MAX_VIEWS {
                if !self.warned_full {
                    log::warn!(
                        "more than {MAX_VIEWS} pods use GPUs: pod {uid} (and any after it) \
                         gets no view"
                    );
                    self.warned_full = true;
                }
                continue;
            }
            match self.create(&uid, members) {
                Ok(view) => {
                    log::info!("pod {uid}: publishing its view {}", self.label(&uid));
                    self.views.insert(uid, view);
                }
                Err(e) => log::warn!("pod {uid}: no view: {e}"),
            }
        }
    }

    fn create(&self, uid: &str, members: Vec<Member>) -> Result<View, String> {
        debug_assert!(is_uuid(uid));
        match nix::sys::stat::mkdirat(self.root.as_fd(), uid, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(format!("mkdir {}: {}", uid, e.desc())),
        }
        let dir = open_dir_at(&self.root, uid)
            .map_err(|e| format!("{}: {}", self.settings.dir.join(uid).display(), e.desc()))?;
        let meta = dir.metadata().map_err(|e| e.to_string())?;
        trusted_dir(&meta)
            .map_err(|e| format!("{}: {e}", self.settings.dir.join(uid).display()))?;
        let options = Options {
            gpu_capacity: members.len().max(1) as u32,
            proc_capacity: PROC_CAPACITY,
            tier_tracks: 0,
            ..Options::new(self.epoch, std::process::id())
        };
        let publisher = Publisher::create_file(dir.as_fd(), FILE, &self.label(uid), &options)
            .map_err(|e| e.to_string())?;
        let mut uid_bytes = [0u8; 40];
        gpupeek_shm::text::encode(&mut uid_bytes, uid);
        Ok(View {
            uid_bytes,
            dir,
            publisher,
            members,
            procs_stale: true,
        })
    }
}

/// The pod uid of each pod, by namespace and name, from the kubelet's pod log directory
/// (`<namespace>_<name>_<uid>`: neither a namespace nor a pod name can hold `_`).
fn pod_uids(dir: &Path) -> BTreeMap<(String, String), String> {
    let mut uids = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return uids;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let mut parts = name.split('_');
        if let (Some(ns), Some(pod), Some(uid), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            if !ns.is_empty() && !pod.is_empty() && is_uuid(uid) {
                uids.insert((ns.to_owned(), pod.to_owned()), uid.to_ascii_lowercase());
            }
        }
    }
    uids
}

/// Whether the kubelet's pod log directory `dir` still has pod `uid`'s directory
/// (`<namespace>_<name>_<uid>`): the kubelet removes it once the pod is gone.
fn has_log_dir(dir: &Path, uid: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let suffix = format!("_{uid}");
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.to_ascii_lowercase().ends_with(&suffix))
    })
}

/// Copies into `out` (and `text`) the records in `records` of the pod whose uid is
/// `uid` on GPUs `indices`, each pid replaced by the pid in the process's own pid
/// namespace (known from the world-readable `NSpid` even where the namespace's inode
/// is not); a process without one is left out (its host pid means nothing in the pod). Whole texts are copied from `pool` as far as `capacity` allows.
fn copy_processes(
    uid: &[u8; 40],
    indices: &[u32],
    records: &[ProcRecord],
    pool: &[u8],
    capacity: usize,
    out: &mut Vec<ProcRecord>,
    text: &mut Vec<u8>,
) {
    out.clear();
    text.clear();
    let has = |p: &ProcRecord, bit: u64| p.valid & bit != 0;
    for p in records {
        if !has(p, proc_valid::CONTAINER)
            || !has(p, proc_valid::NAMESPACE)
            || p.ns_pid == 0
            || p.pod_uid != *uid
            || !indices.contains(&p.gpu_index)
        {
            continue;
        }
        let mut rec = *p;
        rec.pid = p.ns_pid;
        rec.valid &= !(proc_valid::FULL_COMMAND | proc_valid::FULL_CMDLINE);
        let full = gpupeek_shm::pool::full_text(pool, p);
        if let Some(command) = full.command {
            let cmdline = full.cmdline.unwrap_or(&[]);
            let start = text.len().next_multiple_of(8);
            if start + command.len() + cmdline.len() <= capacity {
                text.resize(start, 0);
                text.extend_from_slice(command);
                text.extend_from_slice(cmdline);
                rec.text_offset = start as u32;
                rec.command_len = command.len() as u32;
                rec.valid |= proc_valid::FULL_COMMAND;
                if full.cmdline.is_some() {
                    rec.cmdline_stored_len = cmdline.len() as u32;
                    rec.valid |= proc_valid::FULL_CMDLINE;
                }
            }
        }
        out.push(rec);
    }
}

/// The pid namespace every record's pid is in, when they share one (0 otherwise).
fn common_namespace(records: &[ProcRecord]) -> u64 {
    let mut inodes = records.iter().map(|p| p.pid_ns_inode);
    match inodes.next() {
        Some(first) if inodes.all(|i| i == first) => first,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6a";

    #[test]
    fn only_uuid_shaped_names_are_pod_uids() {
        assert!(is_uuid(UID));
        for bad in [
            "",
            "..",
            "../../etc",
            "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6",
            "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6a/x",
            "5e0c2a1b_7d3f_4c8e_9a6b_1f2e3d4c5b6a",
            "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6g",
        ] {
            assert!(!is_uuid(bad), "{bad:?}");
        }
    }

    #[test]
    fn pod_uids_come_from_the_kubelets_log_directory_names() {
        let dir = std::env::temp_dir().join(format!("gpupeekd-podlogs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for name in [
            format!("ml_train-0_{UID}"),
            "ml_bad_not-a-uid".into(),
            format!("a_b_c_{UID}"),
            format!("_x_{UID}"),
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        let uids = pod_uids(&dir);
        assert_eq!(uids.len(), 1, "{uids:?}");
        assert_eq!(uids[&("ml".into(), "train-0".into())], UID);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn proc(gpu: u32, pid: u32, ns_pid: u32, uid: &str) -> ProcRecord {
        let mut p = ProcRecord {
            gpu_index: gpu,
            pid,
            ns_pid,
            pid_ns_inode: 42,
            valid: proc_valid::CONTAINER | proc_valid::NAMESPACE,
            ..Default::default()
        };
        gpupeek_shm::text::encode(&mut p.pod_uid, uid);
        p
    }

    #[test]
    fn a_view_holds_its_pods_processes_with_their_pids_in_the_pod() {
        let mut uid = [0u8; 40];
        gpupeek_shm::text::encode(&mut uid, UID);
        let other = "00000000-0000-0000-0000-000000000000";
        let mut unknown_ns = proc(0, 30, 0, UID);
        unknown_ns.valid &= !proc_valid::NAMESPACE;
        let records = [
            proc(0, 1000, 7, UID),
            proc(0, 2000, 1, other),
            proc(1, 1001, 8, UID),
            unknown_ns,
        ];
        let (mut out, mut text) = (Vec::new(), Vec::new());
        copy_processes(&uid, &[0], &records, &[], 1024, &mut out, &mut text);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].pid, out[0].gpu_index), (7, 0));
        assert_eq!(common_namespace(&out), 42);
        copy_processes(&uid, &[0, 1], &records, &[], 1024, &mut out, &mut text);
        assert_eq!(out.iter().map(|p| p.pid).collect::<Vec<_>>(), [7, 8]);
    }

    /// A pod process of another user, whose namespace the daemon may not read (inode 0):
    /// still in its view by the pid it has in the pod, and the view then names no
    /// namespace (0), so readers do not take the pids for theirs.
    #[test]
    fn a_process_whose_namespace_is_unknown_is_in_its_view_by_its_pid_in_the_pod() {
        let mut uid = [0u8; 40];
        gpupeek_shm::text::encode(&mut uid, UID);
        let mut non_root = proc(0, 3000, 12, UID);
        non_root.pid_ns_inode = 0;
        let records = [proc(0, 1000, 7, UID), non_root];
        let (mut out, mut text) = (Vec::new(), Vec::new());
        copy_processes(&uid, &[0], &records, &[], 1024, &mut out, &mut text);
        assert_eq!(out.iter().map(|p| p.pid).collect::<Vec<_>>(), [7, 12]);
        assert_eq!(common_namespace(&out), 0);
    }
}
