//! The process table: its head (policy, privacy flags, pid namespace, sample time) and
//! one record per GPU process, with the validity and kind bits of each.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Head of the process table; its seqlock covers the head and every slot.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcTableHead {
    /// Seqlock sequence: odd while being written.
    pub seq: u64,
    /// Slots in use (`0..count`).
    pub count: u32,
    /// Processes that did not fit and were left out (shown as "+N more").
    pub overflow: u32,
    /// [`ProcPolicy`] in force, as a raw value (ABI 1.1; 0 from older writers).
    pub policy: u32,
    /// Bits from [`proc_flags`] (ABI 1.1).
    pub flags: u32,
    /// Inode of the pid namespace the `pid` fields are in (`/proc/self/ns/pid` of the
    /// daemon), 0 when unknown (ABI 1.1).
    pub pid_ns_inode: u64,
    /// When the processes in the table were sampled (`CLOCK_MONOTONIC` ns); the table is
    /// rewritten only every `period_ns`, so it may be older than the GPU records
    /// (ABI 1.2; 0 from older writers: unknown).
    pub sample_mono_ns: u64,
    /// How often the daemon samples processes, ns: the process tier's period, at least
    /// the status record's `period_ns` (ABI 1.2; 0 from older writers: unknown).
    pub period_ns: u64,
    /// Offset of the text pool from the start of the segment (ABI 1.5): the whole
    /// command names and command lines of the slots, which the slots' fixed fields hold
    /// only the start of. 8-aligned; 0 means no pool (an older writer). Under this
    /// head's seqlock, like the slots.
    pub text_pool_offset: u64,
    /// Size of the text pool, bytes (ABI 1.5).
    pub text_pool_size_bytes: u32,
    /// Bytes of the pool in use by this publish, from its start (ABI 1.5); at most
    /// `text_pool_size_bytes`.
    pub text_pool_used_bytes: u32,
    /// Zero; room for later minor versions.
    pub reserved: [u64; 8],
}

state_enum! {
    /// How much the daemon publishes about each process; [`ProcTableHead::policy`] (0, from
    /// a 1.0 writer, decodes to `None`).
    ///
    /// The segment is world-readable, so the daemon never publishes more than `/proc`
    /// shows every user: with `hidepid` on `/proc` the default is [`ProcPolicy::Basic`].
    pub enum ProcPolicy in ProcTableHead.policy {
        /// Everything: user, command line, CPU, host memory, container.
        Full = 1 => "full",
        /// Only what NVML shows every user: pid, GPU memory and utilisation, kind, MIG ids.
        Basic = 2 => "basic",
        /// No process slots at all (the per-GPU process count stays).
        None = 3 => "none",
    }
}

bit_set! {
    /// Bits of [`ProcTableHead::flags`].
    pub mod proc_flags: u32, in ProcTableHead.flags {
        /// `/proc` is mounted with `hidepid`: users cannot see each other's processes.
        HIDEPID = 0,
    }
}

bit_set! {
    /// Process kinds of [`ProcRecord::kind`] (bit set).
    pub mod proc_kind: u32, in ProcRecord.kind {
        /// Listed by NVML as a compute process.
        COMPUTE = 0,
        /// Listed by NVML as a graphics process.
        GRAPHICS = 1,
    }
}

bit_set! {
    /// Validity bits of [`ProcRecord::valid`].
    pub mod proc_valid: u64, in ProcRecord.valid {
        /// `gpu_mem_bytes`.
        GPU_MEMORY = 0 [gpu_mem_bytes],
        /// `uid` and `user`.
        USER = 1 [uid, user],
        /// `command`.
        COMMAND = 2 [command],
        /// `cmdline` and `cmdline_len` (ABI 1.1).
        CMDLINE = 3 [cmdline, cmdline_len],
        /// `sm_util_pct`, `mem_util_pct`, `enc_util_pct`, `dec_util_pct` (ABI 1.1).
        GPU_UTIL = 4 [sm_util_pct, mem_util_pct, enc_util_pct, dec_util_pct],
        /// `cpu_centipct` (ABI 1.1).
        CPU = 5 [cpu_centipct],
        /// `host_rss_bytes` (ABI 1.1).
        HOST_MEMORY = 6 [host_rss_bytes],
        /// `start_unix_ns` (ABI 1.1).
        START_TIME = 7 [start_unix_ns],
        /// `ns_pid` and `pid_ns_inode` (ABI 1.1).
        NAMESPACE = 8 [ns_pid, pid_ns_inode],
        /// `container_runtime` and `container_id`, and `pod_uid` when non-empty (ABI 1.1).
        CONTAINER = 9 [container_runtime, container_id, pod_uid],
        /// `text_offset` and `command_len`: the whole command name is in the text pool
        /// (ABI 1.5). Set only with `COMMAND`.
        FULL_COMMAND = 10 [text_offset, command_len],
        /// `cmdline_stored_len`: the command line is in the text pool, after the command
        /// name (ABI 1.5). Set only with `CMDLINE` and `FULL_COMMAND`.
        FULL_CMDLINE = 11 [cmdline_stored_len],
    }
}

/// One process on one GPU (a process on two GPUs has two slots).
///
/// The first 128 bytes are ABI 1.0; the rest was added in 1.1. A reader facing a 1.0
/// writer's 128-byte records sees the new fields as zero with their validity bits clear.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcRecord {
    /// NVML index of the GPU.
    pub gpu_index: u32,
    /// Host process id (in the namespace of [`ProcTableHead::pid_ns_inode`]).
    pub pid: u32,
    /// Owner's real user id.
    pub uid: u32,
    /// Bits from [`proc_kind`].
    pub kind: u32,
    /// Bits from [`proc_valid`].
    pub valid: u64,
    /// GPU memory used by the process, bytes.
    pub gpu_mem_bytes: u64,
    /// MIG GPU instance id, `u32::MAX` when none.
    pub gpu_instance_id: u32,
    /// MIG compute instance id, `u32::MAX` when none.
    pub compute_instance_id: u32,
    /// Owner's user name.
    pub user: [u8; 32],
    /// Command name: `basename(argv[0])`, else `/proc/PID/comm`; its first 31 bytes
    /// (the whole name is in the text pool when `FULL_COMMAND` is set).
    pub command: [u8; 32],
    /// Offset in the text pool of this process's text (ABI 1.5): `command_len` bytes of
    /// command name, then `cmdline_stored_len` bytes of command line. No NUL ends either.
    /// Several slots of one process (one per GPU) share one text.
    pub text_offset: u32,
    /// Length of the whole command name in the pool, bytes (ABI 1.5).
    pub command_len: u32,
    /// Length of the command line in the pool, bytes (ABI 1.5): arguments separated by
    /// NUL bytes, trailing NULs removed. Less than `cmdline_len` when the daemon kept
    /// only its start.
    pub cmdline_stored_len: u32,
    /// Zero.
    pub reserved0: u32,
    /// Zero (end of ABI 1.0).
    pub reserved: [u64; 1],
    /// The pid inside the process's own (innermost) pid namespace.
    pub ns_pid: u32,
    /// SM (3D/compute) utilisation by this process over the last period, percent.
    pub sm_util_pct: u32,
    /// Frame-buffer memory utilisation by this process, percent.
    pub mem_util_pct: u32,
    /// Encoder utilisation by this process, percent.
    pub enc_util_pct: u32,
    /// Decoder utilisation by this process, percent.
    pub dec_util_pct: u32,
    /// CPU time used over the last period, in hundredths of a percent of one core.
    pub cpu_centipct: u32,
    /// Resident host memory, bytes.
    pub host_rss_bytes: u64,
    /// When the process started, Unix epoch ns.
    pub start_unix_ns: u64,
    /// Inode of the process's own pid namespace (`/proc/PID/ns/pid`); 0 when the daemon
    /// may not read it (another user's process without ptrace access), `ns_pid` being
    /// valid still.
    pub pid_ns_inode: u64,
    /// Length in bytes of the whole command line; `cmdline` holds at most its first
    /// 327 bytes (and the text pool at most [`crate::layout::MAX_TEXT_PER_PROCESS`]), so a
    /// larger value means a copy was truncated.
    pub cmdline_len: u32,
    /// Zero.
    pub reserved1: u32,
    /// Container runtime from the cgroup path: "docker", "containerd", "cri-o",
    /// "podman", "lxc", "kubepods" (a pod whose runtime is unknown), or "slurm" for a
    /// process in a Slurm job's cgroup.
    pub container_runtime: [u8; 16],
    /// Container id (lower-case hex, usually 64 digits; an lxc container's name; a
    /// Slurm job's id), NUL-terminated.
    pub container_id: [u8; 72],
    /// Kubernetes pod uid (`8-4-4-4-12` hex), empty when not in a pod.
    pub pod_uid: [u8; 40],
    /// The command line: arguments separated by NUL bytes, NUL-terminated; its first
    /// 327 bytes (the whole line is in the text pool when `FULL_CMDLINE` is set).
    pub cmdline: [u8; 328],
}
