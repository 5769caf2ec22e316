//! One process slot, decoded: what the daemon published about a process on a GPU, each
//! detail an `Option` (the daemon's process policy, `/proc` or NVML may withhold it).

use gpupeek_shm::layout::{proc_kind, proc_valid as pv};
use gpupeek_shm::ProcRecord;

use crate::text::Text;
use crate::units::{Bytes, CentiPercent};

/// One process on one GPU.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    /// NVML index of the GPU.
    pub gpu_index: u32,
    /// Pid in the daemon's pid namespace.
    pub pid: u32,
    /// The pid in the process's own pid namespace and that namespace's inode (0: not
    /// known, so no reader's).
    pub namespace: Option<(u32, u64)>,
    /// Owner's uid and user name (the name is cut at the field's 31 bytes).
    pub user: Option<(u32, Text<'a>)>,
    /// Command name: the whole name where the segment's text pool has it (ABI 1.5),
    /// else its first 31 bytes.
    pub command: Option<Text<'a>>,
    /// Command line (see [`Process::argv`]): the raw arguments, NUL-separated, and the
    /// length of the whole line. From the text pool where it has it (up to 32 KiB),
    /// else the first 327 bytes.
    pub cmdline: Option<(&'a [u8], u32)>,
    /// GPU memory used.
    pub gpu_mem: Option<Bytes>,
    /// SM, memory, encoder, decoder utilisation by this process, percent.
    pub gpu_util_pct: Option<[u32; 4]>,
    /// CPU time over the daemon's last period, of one core.
    pub cpu: Option<CentiPercent>,
    /// Resident host memory.
    pub host_mem: Option<Bytes>,
    /// Start time, ns since the Unix epoch.
    pub start_unix_ns: Option<u64>,
    /// Compute, graphics, both or neither.
    pub kind: ProcKind,
    /// MIG GPU and compute instance ids.
    pub mig: Option<(u32, u32)>,
    /// Container runtime, id and pod uid (`None` when empty).
    pub container: Option<(Text<'a>, Text<'a>, Option<Text<'a>>)>,
}

/// How NVML listed a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcKind {
    /// A compute process.
    Compute,
    /// A graphics process.
    Graphics,
    /// Listed as both.
    Both,
    /// Listed as neither.
    Unknown,
}

impl ProcKind {
    /// `"compute"`, `"graphics"`, `"both"` or `"unknown"`.
    pub fn name(self) -> &'static str {
        match self {
            ProcKind::Compute => "compute",
            ProcKind::Graphics => "graphics",
            ProcKind::Both => "both",
            ProcKind::Unknown => "unknown",
        }
    }
}

impl<'a> Process<'a> {
    /// Decodes `p`, whose whole texts may be in `text_pool` (a snapshot's
    /// [`gpupeek_shm::Snapshot::text`]).
    pub fn new(p: &'a ProcRecord, text_pool: &'a [u8]) -> Process<'a> {
        let has = |bit: u64| p.valid & bit != 0;
        let full = gpupeek_shm::pool::full_text(text_pool, p);
        Process {
            gpu_index: p.gpu_index,
            pid: p.pid,
            namespace: has(pv::NAMESPACE).then_some((p.ns_pid, p.pid_ns_inode)),
            user: has(pv::USER).then(|| (p.uid, Text::new(&p.user))),
            command: has(pv::COMMAND).then(|| Text::new(full.command.unwrap_or(&p.command))),
            cmdline: has(pv::CMDLINE)
                .then_some((full.cmdline.unwrap_or(&p.cmdline[..]), p.cmdline_len)),
            gpu_mem: has(pv::GPU_MEMORY).then_some(Bytes(p.gpu_mem_bytes)),
            gpu_util_pct: has(pv::GPU_UTIL).then_some([
                p.sm_util_pct,
                p.mem_util_pct,
                p.enc_util_pct,
                p.dec_util_pct,
            ]),
            cpu: has(pv::CPU).then_some(CentiPercent(p.cpu_centipct)),
            host_mem: has(pv::HOST_MEMORY).then_some(Bytes(p.host_rss_bytes)),
            start_unix_ns: has(pv::START_TIME).then_some(p.start_unix_ns),
            kind: match (
                p.kind & proc_kind::COMPUTE != 0,
                p.kind & proc_kind::GRAPHICS != 0,
            ) {
                (true, false) => ProcKind::Compute,
                (false, true) => ProcKind::Graphics,
                (true, true) => ProcKind::Both,
                (false, false) => ProcKind::Unknown,
            },
            mig: (p.gpu_instance_id != u32::MAX)
                .then_some((p.gpu_instance_id, p.compute_instance_id)),
            container: has(pv::CONTAINER).then(|| {
                let pod = Text::new(&p.pod_uid);
                (
                    Text::new(&p.container_runtime),
                    Text::new(&p.container_id),
                    (!pod.is_empty()).then_some(pod),
                )
            }),
        }
    }

    /// This process's pid as a reader in pid namespace `reader_ns` (the inode of its
    /// `/proc/self/ns/pid`) addresses it, given the daemon's namespace `daemon_ns`: the
    /// daemon's pid when both are one namespace (or the daemon does not say which it
    /// is), the pid the daemon read in the process's own namespace when that is the
    /// reader's, else `None`: the reader cannot address it.
    pub fn pid_in(&self, reader_ns: Option<u64>, daemon_ns: Option<u64>) -> Option<u32> {
        match self.namespace {
            _ if reader_ns.is_some() && daemon_ns == reader_ns => Some(self.pid),
            Some((ns_pid, inode)) if Some(inode) == reader_ns => Some(ns_pid),
            _ if daemon_ns.is_none() => Some(self.pid),
            _ => None,
        }
    }

    /// The command line, one string per argument; the last ends in `…` when the daemon
    /// kept only its start.
    pub fn argv(&self) -> Option<Vec<String>> {
        self.cmdline
            .map(|(bytes, len)| gpupeek_shm::text::decode_argv(bytes, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::pool::TextPool;

    fn published(name: &str, raw: &[u8]) -> ProcRecord {
        let mut p = ProcRecord {
            pid: 9,
            valid: pv::COMMAND | pv::CMDLINE,
            ..Default::default()
        };
        gpupeek_shm::text::encode(&mut p.command, name);
        p.cmdline_len = gpupeek_shm::text::encode_argv(&mut p.cmdline, raw);
        p
    }

    #[test]
    fn a_readers_pid_is_the_daemons_or_the_one_in_its_own_namespace() {
        let (daemon, mine, other) = (Some(1), Some(2), Some(3));
        let record = ProcRecord::default();
        let mut p = Process::new(&record, &[]);
        p.pid = 100;
        p.namespace = Some((7, 2));
        assert_eq!(
            p.pid_in(daemon, daemon),
            Some(100),
            "the daemon's namespace"
        );
        assert_eq!(
            p.pid_in(mine, daemon),
            Some(7),
            "the process's own namespace"
        );
        assert_eq!(p.pid_in(other, daemon), None, "a third namespace");
        assert_eq!(
            p.pid_in(other, None),
            Some(100),
            "a daemon that does not say"
        );
        p.namespace = None;
        assert_eq!(p.pid_in(mine, daemon), None);
    }

    #[test]
    fn command_and_argv_are_whole_from_the_pool_and_the_fixed_fields_without_it() {
        let name = "a-command-name-of-more-than-forty-characters";
        let raw = format!("/bin/{name}\0{}\0", "x".repeat(500)).into_bytes();
        let mut p = published(name, &raw);
        let mut pool = TextPool::new(4096);
        pool.put(&mut p, name, Some(&raw));
        let whole = Process::new(&p, pool.bytes());
        assert_eq!(whole.command.unwrap().decode(), name);
        assert_eq!(whole.argv().unwrap()[1], "x".repeat(500));

        // No pool (a 1.4 writer) or an offset outside it (hostile): the fixed fields.
        for (pool, offset) in [(&[][..], 0), (pool.bytes(), u32::MAX - 3)] {
            let mut q = p;
            q.text_offset = offset;
            let cut = Process::new(&q, pool);
            assert_eq!(cut.command.unwrap().decode(), name[..31]);
            let argv = cut.argv().unwrap();
            assert!(argv[1].ends_with('…') && argv[1].len() < 400, "{argv:?}");
        }
    }
}
