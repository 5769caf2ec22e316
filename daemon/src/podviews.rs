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
//!
//! A view keeps the tiered history of its GPUs and MIG instances (see
//! [`crate::timeline`]) from the moment the view is made: the samples its GPUs had
//! before belong to whoever held them then, and are not the pod's to see. It has a
//! track for each GPU and MIG instance it shows, so it costs what its pod holds (see
//! [`VIEW_TIER_SLOTS`]); a view whose GPUs or instances outgrow it is made again,
//! larger, with its history. A daemon that starts again takes each pod's history over
//! from the view the previous daemon left, read as hostile input like any segment.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use gpupeek_kube::{Device, MigDevice, Poller};
use gpupeek_model::{GpuState, Mig};
use gpupeek_shm::layout::{gpu_valid4, mig_valid, proc_valid, DaemonState};
use gpupeek_shm::writer::unlink_file;
use gpupeek_shm::{
    GpuRecord, MigRecord, Options, ProcContext, ProcRecord, Publisher, Segment, StatusRecord, Track,
};

use crate::container::is_uuid;
use crate::history;
use crate::timeline::Timeline;
use podlogs::{has_log_dir, pod_uids};
use procs::{common_namespace, copy_processes};

mod podlogs;
mod procs;

/// The kubelet's pod-resources socket.
pub const DEFAULT_KUBELET_SOCKET: &str = gpupeek_kube::DEFAULT_SOCKET;
/// The kubelet's pod log directory.
pub const DEFAULT_POD_LOG_DIR: &str = "/var/log/pods";
/// The segment file's name in a pod's directory.
pub const FILE: &str = "gpupeek";
/// Most pods with a view at once; a pod beyond them gets none (logged once).
pub const MAX_VIEWS: usize = 256;
/// Process slots of a view, per GPU it shows (a process on several GPUs takes a slot on
/// each), and at most: a pod with more shows how many are left out.
const PROCS_PER_GPU: u32 = 64;
const MAX_PROC_CAPACITY: u32 = 256;
/// Most tracks of tiered history the views hold together (about 29 MiB, see
/// [`VIEW_TIER_SLOTS`]): with [`MAX_VIEWS`] single-GPU views of 180 KiB besides, the
/// views take at most 74 MiB.
const MAX_VIEW_TRACKS: usize = 128;
/// How often the directories of gone pods are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Buckets of a view's tracks: the main segment's 10 minutes of raw samples and 6 hours
/// of 10 s buckets, and one day of 1 min buckets (the main segment keeps seven), so that
/// a track costs about 230 KiB.
const VIEW_TIER_SLOTS: [u32; 3] = [
    gpupeek_shm::layout::DEFAULT_RAW_SLOTS,
    gpupeek_shm::layout::DEFAULT_TIER1_SLOTS,
    24 * 60,
];
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

/// How the daemon steps its tiered history, which the views follow (see [`Timeline::new`]).
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// The daemon's period.
    pub period: Duration,
    /// The history unit (1 s but in tests).
    pub unit: Duration,
    /// Whether the daemon keeps tiered history at all (`--history-tracks` is not 0):
    /// without it, neither do the views.
    pub tiered: bool,
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

impl Member {
    /// Whether the view shows MIG instance `m` of this member, GPU `index`.
    fn shows(&self, index: u32, m: &MigRecord) -> bool {
        index == m.gpu_index && (self.whole || self.instances.contains(&m.gpu_instance_id))
    }
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
    /// The view's tiered history.
    timeline: Timeline,
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
    /// The tick's wall-clock time, Unix ns, when it samples into the tiered history.
    pub tier_at: Option<u64>,
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
    steps: Steps,
    /// History the previous daemon's views left, by pod uid, until the pod's view is
    /// made (or the first sweep finds it gone).
    previous: BTreeMap<String, Vec<Track>>,
    clock: history::Clock,
    /// When the directories of gone pods were last looked for.
    swept_at: Instant,
    /// The process table generation last copied.
    procs_seen: Option<u64>,
    epoch: u64,
    warned_full: bool,
    /// Said that the views' tracks are all taken.
    warned_tracks: bool,
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
    /// left in `root` (`settings.dir`, opened by [`Settings::open`]), keeping their
    /// history for the pods' new views, which step their history as `steps` say.
    pub fn new(settings: Settings, root: File, period: Duration, epoch: u64, steps: Steps) -> Self {
        let mut views = PodViews {
            kubelet: Poller::spawn(
                "gpupeekd",
                settings.kubelet_socket.clone(),
                period.max(Duration::from_secs(1)),
                KUBELET_TIMEOUT,
            ),
            root,
            allocations: Default::default(),
            views: BTreeMap::new(),
            steps,
            previous: BTreeMap::new(),
            swept_at: Instant::now(),
            clock: history::Clock::every(period, period),
            procs_seen: None,
            epoch,
            warned_full: false,
            warned_tracks: false,
            records: Vec::new(),
            text: Vec::new(),
            shown: Vec::new(),
            indices: Vec::new(),
            mig: Vec::new(),
            settings,
        };
        views.previous = views.leftover_history();
        if !views.previous.is_empty() {
            log::info!(
                "pod views: the history of {} pod(s) taken over from the previous views",
                views.previous.len()
            );
        }
        views.remove_leftovers();
        views
    }

    /// The tiered history in the views an earlier run left, by pod uid. Each is opened
    /// as any reader opens a segment (trusted owner, every size and offset checked); a
    /// view that cannot be read gives none, with one log line.
    fn leftover_history(&self) -> BTreeMap<String, Vec<Track>> {
        let mut found = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(&self.settings.dir) else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(uid) = entry
                .file_name()
                .to_str()
                .filter(|n| is_uuid(n))
                .map(str::to_owned)
            else {
                continue;
            };
            let label = self.label(&uid);
            if !Path::new(&label).exists() {
                continue;
            }
            let tracks = Segment::open(&label).and_then(|segment| {
                (0..segment.track_count())
                    .filter_map(|i| segment.track(i, [usize::MAX; 3]).transpose())
                    .collect::<Result<Vec<Track>, _>>()
            });
            match tracks {
                Ok(tracks) if !tracks.is_empty() => {
                    found.insert(uid, tracks);
                }
                Ok(_) => {}
                Err(e) => {
                    log::warn!("pod {uid}: the previous view's history is not taken over: {e}")
                }
            }
        }
        found
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
            self.apply(wanted, tick);
            if now.duration_since(self.swept_at) >= SWEEP_EVERY {
                self.remove_leftovers();
                // The pods still here have their views by now.
                self.previous.clear();
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
                view.timeline.record_gpu(&view.publisher, tick.tier_at, gpu);
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
            self.mig.extend(
                tick.mig
                    .iter()
                    .filter(|m| shown.iter().any(|&(index, at)| members[at].shows(index, m))),
            );
            view.publisher.write_mig(&self.mig);
            if let Some(at) = tick.tier_at {
                for m in &self.mig {
                    view.timeline.record_mig(&view.publisher, at, m);
                }
            }
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
                let minor = gpu.valid4 & gpu_valid4::MINOR_NUMBER != 0;
                let device = Device {
                    index: gpu.index,
                    uuid: Some(&uuid).filter(|u| !u.is_empty()).map(|u| u.as_str()),
                    minor: minor.then_some(gpu.minor_number),
                    mig: None,
                };
                owners_of(&device, gpu, None);
                let on_gpu = || tick.mig.iter().filter(|m| m.gpu_index == gpu.index);
                for m in on_gpu() {
                    let mig_uuid = gpupeek_shm::text::decode(&m.uuid);
                    let gi_profile =
                        |m: &MigRecord| Mig::new(m, GpuState::Ok).gpu_instance_profile();
                    let profile = gi_profile(m);
                    let placement = (m.valid & mig_valid::PLACEMENT != 0).then_some((
                        m.gpu_instance_profile_id,
                        m.placement_start,
                        m.placement_size,
                    ));
                    // Only asked where no placement is published (see `MigDevice`).
                    let sole_of_profile = placement.is_none()
                        && !on_gpu().any(|o| {
                            o.gpu_instance_id != m.gpu_instance_id && gi_profile(o) == profile
                        });
                    let device = Device {
                        mig: Some(MigDevice {
                            gpu_instance_id: m.gpu_instance_id,
                            mig_index: Some(m.mig_index),
                            uuid: Some(mig_uuid.as_str()).filter(|u| !u.is_empty()),
                            profile: profile.as_deref(),
                            placement,
                            sole_of_profile,
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
    /// the new ones (making one whose GPUs or MIG instances outgrew it again, larger,
    /// with its history).
    fn apply(&mut self, wanted: BTreeMap<String, Vec<Member>>, tick: &Tick) {
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
            let tracks = if self.steps.tiered {
                self.tracks_for(&uid, tracks_needed(&members, tick))
            } else {
                0
            };
            let history = if let Some(view) = self.views.get_mut(&uid) {
                let fits = view.publisher.geometry().gpu_capacity >= members.len()
                    && view.publisher.track_count() >= tracks;
                if fits {
                    if view.members != members {
                        view.members = members;
                        view.procs_stale = true;
                    }
                    continue;
                }
                let view = self.views.remove(&uid).expect("the view just found");
                view.timeline.tracks(&view.publisher)
            } else if self.views.len() >= MAX_VIEWS {
                if !self.warned_full {
                    log::warn!(
                        "more than {MAX_VIEWS} pods use GPUs: pod {uid} (and any after it) \
                         gets no view"
                    );
                    self.warned_full = true;
                }
                continue;
            } else {
                self.previous.remove(&uid).unwrap_or_default()
            };
            match self.create(&uid, members, tracks, history) {
                Ok(view) => {
                    log::info!("pod {uid}: publishing its view {}", self.label(&uid));
                    self.views.insert(uid, view);
                }
                Err(e) => log::warn!("pod {uid}: no view: {e}"),
            }
        }
    }

    /// How many of the `needed` tracks pod `uid`'s view may have: the views together
    /// have at most [`MAX_VIEW_TRACKS`] (logged once when a view gets fewer than it
    /// needs).
    fn tracks_for(&mut self, uid: &str, needed: usize) -> usize {
        let of = |v: &View| v.publisher.track_count();
        let others: usize = self
            .views
            .iter()
            .filter(|(other, _)| *other != uid)
            .map(|(_, v)| of(v))
            .sum();
        let tracks = needed.min(MAX_VIEW_TRACKS.saturating_sub(others));
        if tracks < needed && !self.warned_tracks {
            log::warn!(
                "the pods' views hold {MAX_VIEW_TRACKS} tracks of tiered history: pod {uid}'s \
                 view (and others after it) keeps the history of fewer GPUs and MIG \
                 instances than it shows"
            );
            self.warned_tracks = true;
        }
        tracks
    }

    /// Makes pod `uid`'s view of `members`, with `tracks` tracks of tiered history and
    /// the `history` it had.
    fn create(
        &self,
        uid: &str,
        members: Vec<Member>,
        tracks: usize,
        history: Vec<Track>,
    ) -> Result<View, String> {
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
            proc_capacity: (PROCS_PER_GPU * members.len().max(1) as u32).min(MAX_PROC_CAPACITY),
            tier_tracks: tracks as u32,
            tier_slots: VIEW_TIER_SLOTS,
            ..Options::new(self.epoch, std::process::id())
        };
        let publisher = Publisher::create_file(dir.as_fd(), FILE, &self.label(uid), &options)
            .map_err(|e| e.to_string())?;
        let Steps { period, unit, .. } = self.steps;
        let timeline = Timeline::new(&publisher, period, unit, history).sized_to_fit();
        let mut uid_bytes = [0u8; 40];
        gpupeek_shm::text::encode(&mut uid_bytes, uid);
        Ok(View {
            uid_bytes,
            dir,
            publisher,
            members,
            procs_stale: true,
            timeline,
        })
    }
}

/// The tracks a view of `members` needs this tick: one for each of its GPUs and for
/// each MIG instance it shows.
fn tracks_needed(members: &[Member], tick: &Tick) -> usize {
    let instances = members
        .iter()
        .filter_map(|member| {
            let gpu = tick.gpus.iter().find(|g| g.uuid == member.uuid)?;
            Some(
                tick.mig
                    .iter()
                    .filter(|m| member.shows(gpu.index, m))
                    .count(),
            )
        })
        .sum::<usize>();
    members.len() + instances
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

    /// Pod views in a directory of their own under the temporary directory.
    fn views(tag: &str) -> (PodViews, PathBuf) {
        let dir = std::env::temp_dir().join(format!("gpupeekd-views-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = Settings {
            dir: dir.clone(),
            kubelet_socket: dir.join("no-kubelet.sock"),
            pod_log_dir: dir.join("no-logs"),
        };
        let root = settings.open().unwrap();
        let second = Duration::from_secs(1);
        let steps = Steps {
            period: second,
            unit: second,
            tiered: true,
        };
        (PodViews::new(settings, root, second, 1, steps), dir)
    }

    fn member(n: u8) -> Member {
        let mut uuid = [0u8; 96];
        uuid[0] = n;
        Member {
            uuid,
            whole: true,
            instances: Vec::new(),
        }
    }

    #[test]
    fn the_views_hold_at_most_their_share_of_tracks_and_a_view_keeps_what_it_has() {
        let (mut pods, dir) = views("tracks");
        let uid = |n: u32| format!("5e0c2a1b-7d3f-4c8e-9a6b-{n:012}");
        // Two views take the budget whole.
        let half = MAX_VIEW_TRACKS / 2;
        for n in 0..2 {
            assert_eq!(pods.tracks_for(&uid(n), half), half);
            let view = pods.create(&uid(n), vec![member(n as u8)], half, Vec::new());
            pods.views.insert(uid(n), view.unwrap());
        }
        assert!(!pods.warned_tracks);
        // A third gets none, and it is said once.
        assert_eq!(pods.tracks_for(&uid(2), 2), 0);
        assert!(pods.warned_tracks);
        // A view already there may keep (or grow within) its own share only.
        assert_eq!(pods.tracks_for(&uid(0), half + 5), half);
        assert_eq!(pods.tracks_for(&uid(0), 3), 3);
        // A view of no tracks is still a view: its GPU, no tiered history.
        let view = pods
            .create(&uid(2), vec![member(2)], 0, Vec::new())
            .unwrap();
        assert_eq!(view.publisher.track_count(), 0);
        assert_eq!(view.publisher.geometry().gpu_capacity, 1);
        assert_eq!(
            view.publisher.geometry().proc_capacity,
            PROCS_PER_GPU as usize
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
