//! Xid errors: a GPU's counts as gpupeekd publishes them, and NVIDIA's recommended
//! action for each Xid number — the one table of it every output derives its words from.
//!
//! The counts run since gpupeekd started, in every GPU state (an Xid is what tells why a
//! GPU was lost or stopped answering); a GPU without them is one on which NVML delivers
//! no events, whose Xids are unknown rather than none.
//!
//! The actions are the "Resolution Bucket (Immediate Action)" of NVIDIA's Xid catalog
//! (<https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>, Ampere and
//! newer), as NVIDIA's NVSentinel ships it (`xiderrorsmapping.csv`): `RESTART_APP`
//! (the application's error; restart it), `RESET_GPU`, `RESTART_BM` (reboot the node),
//! `RESTART_VM`, `IGNORE`, `CHECK_MECHANICALS`, `CHECK_UVM`, `UPDATE_SWFW`, or a
//! `WORKFLOW_*` the catalog describes step by step (Xid 45, 48, NVLink errors). An Xid
//! the catalog marks unused or unexpected, or does not list, is `unknown`.

use gpupeek_shm::layout::gpu_valid3 as v3;
use gpupeek_shm::GpuRecord;

/// The number of Xid numbers a GPU's record counts one by one.
pub const SLOTS: usize = 8;

/// A GPU's Xid errors since gpupeekd started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xids {
    /// Every Xid, whatever its number.
    pub total: u64,
    /// The most recent one, if one came.
    pub last: Option<LastXid>,
    /// `(number, count)` of the first [`SLOTS`] numbers that came; `(0, 0)` is unused.
    slots: [(u32, u64); SLOTS],
}

/// The most recent Xid of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastXid {
    /// Its number.
    pub code: u32,
    /// When it came, Unix time in ns.
    pub unix_ns: u64,
    /// The MIG GPU instance and compute instance it is attributable to, if any.
    pub instance: Option<(u32, u32)>,
}

impl Xids {
    /// The counts of record `g`, if gpupeekd receives its Xid events.
    pub fn new(g: &GpuRecord) -> Option<Self> {
        let has = |bit: u64| g.valid3 & bit != 0;
        if !has(v3::XID_ERRORS) {
            return None;
        }
        let mut slots = [(0, 0); SLOTS];
        for (slot, (&code, &count)) in slots.iter_mut().zip(g.xid_codes.iter().zip(&g.xid_counts)) {
            match u32::try_from(code) {
                Ok(0) | Err(_) => break,
                Ok(code) => *slot = (code, count),
            }
        }
        Some(Xids {
            total: g.xid_errors_total,
            last: has(v3::XID_LAST).then(|| LastXid {
                code: g.xid_last_code,
                unix_ns: g.xid_last_unix_ns,
                instance: has(v3::XID_LAST_INSTANCE)
                    .then_some((g.xid_last_gpu_instance_id, g.xid_last_compute_instance_id)),
            }),
            slots,
        })
    }

    /// Each number counted one by one, in the order they first came, with its count.
    pub fn by_code(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.slots
            .iter()
            .copied()
            .take_while(|&(code, _)| code != 0)
    }

    /// The Xids of numbers past the first [`SLOTS`], which have no count of their own.
    pub fn others(&self) -> u64 {
        let counted: u64 = self.by_code().map(|(_, n)| n).sum();
        self.total.saturating_sub(counted)
    }
}

/// NVIDIA's recommended immediate action for Xid `code` (see the module doc), or
/// `"unknown"`.
pub fn action(code: u32) -> &'static str {
    ACTIONS
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("unknown", |&(_, a)| a)
}

const APP: &str = "RESTART_APP";
const GPU: &str = "RESET_GPU";
const IGNORE: &str = "IGNORE";
const NVLINK5: &str = "WORKFLOW_NVLINK5_ERR";

/// Xid number → action, in number order (see the module doc for the source).
#[rustfmt::skip]
const ACTIONS: &[(u32, &str)] = &[
    (8, APP), (11, APP), (13, APP), (14, IGNORE), (25, APP), (31, APP), (32, APP),
    (37, IGNORE), (38, IGNORE), (39, APP), (40, APP), (41, APP), (43, IGNORE),
    (44, IGNORE), (45, "WORKFLOW_XID_45"), (46, GPU), (48, "WORKFLOW_XID_48"),
    (54, "CHECK_MECHANICALS"), (60, APP), (62, GPU), (63, IGNORE), (64, GPU),
    (66, IGNORE), (67, IGNORE), (68, APP), (69, APP), (70, APP), (71, APP), (72, APP),
    (74, "WORKFLOW_NVLINK_ERR"), (75, APP), (76, APP), (77, APP), (78, "UPDATE_SWFW"),
    (79, "RESTART_BM"), (80, APP), (82, APP), (83, APP), (84, APP), (85, APP), (86, APP),
    (88, APP), (89, APP), (92, IGNORE), (93, IGNORE), (94, APP), (95, GPU), (96, APP),
    (97, APP), (98, APP), (99, APP), (100, APP), (101, APP), (102, APP), (103, APP),
    (104, APP), (105, APP), (106, IGNORE), (107, IGNORE), (109, GPU), (110, GPU),
    (119, GPU), (120, GPU), (121, IGNORE), (126, APP), (127, APP), (128, APP), (129, APP),
    (130, APP), (131, APP), (132, APP), (133, APP), (134, APP), (135, APP), (136, GPU),
    (137, IGNORE), (139, APP), (140, GPU), (141, IGNORE), (143, GPU), (144, NVLINK5),
    (145, NVLINK5), (146, NVLINK5), (147, NVLINK5), (148, NVLINK5), (149, NVLINK5),
    (150, NVLINK5), (151, "RESTART_VM"), (152, IGNORE), (153, IGNORE), (155, GPU),
    (156, GPU), (157, IGNORE), (158, GPU), (159, "CHECK_UVM"), (160, "RESTART_BM"),
    (161, IGNORE),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_table_is_in_number_order_with_each_number_once() {
        assert!(ACTIONS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn actions_are_the_catalogs_and_an_unlisted_number_is_unknown() {
        for (code, want) in [
            (13, "RESTART_APP"),
            (31, "RESTART_APP"),
            (43, "IGNORE"),
            (48, "WORKFLOW_XID_48"),
            (63, "IGNORE"),
            (64, "RESET_GPU"),
            (74, "WORKFLOW_NVLINK_ERR"),
            (79, "RESTART_BM"),
            (92, "IGNORE"),
            (94, "RESTART_APP"),
            (95, "RESET_GPU"),
            (119, "RESET_GPU"),
            (120, "RESET_GPU"),
            (140, "RESET_GPU"),
            (1, "unknown"),
            (9999, "unknown"),
        ] {
            assert_eq!(action(code), want, "Xid {code}");
        }
    }

    #[test]
    fn counts_decode_only_with_their_bit_and_stop_at_the_first_free_slot() {
        let mut g = GpuRecord {
            xid_errors_total: 5,
            ..GpuRecord::default()
        };
        g.xid_codes[..2].copy_from_slice(&[79, 13]);
        g.xid_counts[..2].copy_from_slice(&[1, 2]);
        assert_eq!(Xids::new(&g), None);
        g.valid3 = v3::XID_ERRORS;
        let x = Xids::new(&g).unwrap();
        assert_eq!(x.by_code().collect::<Vec<_>>(), [(79, 1), (13, 2)]);
        assert_eq!((x.others(), x.last), (2, None));
        g.valid3 |= v3::XID_LAST;
        g.xid_last_code = 13;
        let last = Xids::new(&g).unwrap().last.unwrap();
        assert_eq!((last.code, last.instance), (13, None));
    }
}
