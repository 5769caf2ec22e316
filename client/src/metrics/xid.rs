//! `gpupeek_xid_errors_total`: each GPU's Xid errors since gpupeekd started, one series
//! per Xid number with NVIDIA's recommended action ([`gpupeek_model::xid::action`]), for
//! an alert that tells the operator what to do. Every GPU with counts has them, in any
//! state: an Xid is what says why a GPU was lost or stopped answering. A GPU on which NVML
//! delivers no events has no series (its Xids are unknown, not 0). Xids past the numbers
//! the segment counts one by one are `xid="other"`, `action="unknown"`.

use gpupeek_model::xid::action;
use gpupeek_model::Model;

use super::{Out, Value};

const NAME: &str = "gpupeek_xid_errors_total";
const HELP: &str = "Xid errors NVML reported for each GPU since gpupeekd started, by Xid \
    number, with the action NVIDIA's Xid catalog recommends (RESTART_APP, RESET_GPU, \
    RESTART_BM, IGNORE, ...; unknown when it lists none).";

/// The family, after the GPU families; `labels[i]` are `model.gpus[i]`'s.
pub(super) fn family(out: &mut Out, model: &Model, labels: &[String]) {
    let mut samples: Vec<(String, u64)> = Vec::new();
    for (g, l) in model.gpus.iter().zip(labels) {
        let Some(xid) = g.xid else { continue };
        for (code, count) in xid.by_code() {
            let action = action(code);
            samples.push((format!("{l},xid=\"{code}\",action=\"{action}\""), count));
        }
        let others = xid.others();
        if others > 0 {
            samples.push((format!("{l},xid=\"other\",action=\"unknown\""), others));
        }
    }
    if samples.is_empty() {
        return;
    }
    out.family(NAME, "counter", HELP);
    for (labels, count) in samples {
        out.sample(NAME, &labels, Value::Int(count));
    }
}
