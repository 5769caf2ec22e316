//! A view's process table: the pod's own processes, copied from the main table with the
//! pids they have in the pod.

use gpupeek_shm::layout::proc_valid;
use gpupeek_shm::ProcRecord;

/// Copies into `out` (and `text`) the records in `records` of the pod whose uid is
/// `uid` on GPUs `indices`, each pid replaced by the pid in the process's own pid
/// namespace (known from the world-readable `NSpid` even where the namespace's inode
/// is not); a process without one is left out (its host pid means nothing in the pod). Whole texts are copied from `pool` as far as `capacity` allows.
pub(super) fn copy_processes(
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
pub(super) fn common_namespace(records: &[ProcRecord]) -> u64 {
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
