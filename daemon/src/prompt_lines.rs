//! Tests of the lines the prompt file chooses for each daemon and GPU state, kept out of
//! `prompt.rs` so that file's writing code and these specifications change apart.

use gpupeek_shm::layout::{gpu_valid as v, DaemonState, GpuState};
use gpupeek_shm::{GpuRecord, StatusRecord};

use crate::prompt::PromptFile;

/// The line the prompt file holds after one update with `state` and GPUs in `states`.
fn line_after(state: DaemonState, states: &[GpuState]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "gpupeekd-prompt-lines-{}-{state:?}-{}",
        std::process::id(),
        states.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("prompt");
    let mut file = PromptFile::new(&path, Some("{util}%")).unwrap();
    let status = StatusRecord {
        state: state as u32,
        gpu_count: states.len() as u32,
        ..StatusRecord::default()
    };
    let gpus: Vec<GpuRecord> = states
        .iter()
        .enumerate()
        .map(|(i, &s)| GpuRecord {
            index: i as u32,
            state: s as u32,
            valid: v::UTILIZATION,
            util_gpu_pct: 30,
            ..GpuRecord::default()
        })
        .collect();
    file.update(&status, &gpus, false);
    let line = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    line
}

#[test]
fn a_released_daemon_says_so_rather_than_an_nvml_error() {
    assert_eq!(
        line_after(DaemonState::Released, &[]),
        "gpupeekd released\n"
    );
    assert_eq!(line_after(DaemonState::NvmlError, &[]), "GPU: NVML error\n");
}

#[test]
fn a_gpu_whose_driver_is_not_responding_is_named_never_averaged_away() {
    let live = DaemonState::Live;
    assert_eq!(line_after(live, &[GpuState::Ok]), "30%\n");
    assert_eq!(
        line_after(live, &[GpuState::Ok, GpuState::NotResponding]),
        "30% [GPU 1 not responding]\n"
    );
    assert_eq!(
        line_after(
            live,
            &[GpuState::NotResponding, GpuState::Suspended, GpuState::Idle]
        ),
        "GPU not responding\n"
    );
}
