//! The kubelet's pod log directory (`/var/log/pods/<namespace>_<name>_<uid>`), read
//! for its directory names only: which uid each pod (by namespace and name) has, and
//! whether the kubelet still keeps a pod.

use std::collections::BTreeMap;
use std::path::Path;

use crate::container::is_uuid;

/// The pod uid of each pod, by namespace and name, from the kubelet's pod log directory
/// (`<namespace>_<name>_<uid>`: neither a namespace nor a pod name can hold `_`).
pub(super) fn pod_uids(dir: &Path) -> BTreeMap<(String, String), String> {
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
pub(super) fn has_log_dir(dir: &Path, uid: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "5e0c2a1b-7d3f-4c8e-9a6b-1f2e3d4c5b6a";

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
}
