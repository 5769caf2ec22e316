//! gpupeekd renders its prompt file every tick into one reused buffer: with plain
//! markup and numeric placeholders, rendering must allocate nothing once the buffer has
//! grown. A counting global allocator checks it (its own test binary, so nothing else
//! allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use gpupeek_render::{Data, Plain, Template};
use gpupeek_shm::layout::history_valid;
use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{GpuRecord, StatusRecord};
use gpupeek_shm::{History, HistorySample};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn gpu(index: u32, util: u32) -> GpuRecord {
    GpuRecord {
        index,
        state: GpuState::Ok as u32,
        valid: v::MEMORY | v::UTILIZATION | v::TEMPERATURE | v::POWER_DRAW,
        util_gpu_pct: util,
        mem_used_bytes: 10 << 30,
        mem_total_bytes: 80 << 30,
        temp_gpu_c: 70,
        power_draw_mw: 250_000,
        ..GpuRecord::default()
    }
}

#[test]
fn plain_numeric_rendering_into_a_grown_buffer_allocates_nothing() {
    let gpus = [gpu(0, 40), gpu(1, 95)];
    let refs: Vec<&GpuRecord> = gpus.iter().collect();
    let status = StatusRecord::default();
    let sample = |util: u8| HistorySample {
        util_gpu_pct: util,
        valid: history_valid::UTILIZATION,
        ..HistorySample::default()
    };
    let history = [(
        1,
        History {
            samples: (0..20).map(|i| sample(i * 5)).collect(),
            ..History::default()
        },
    )];
    let data = Data {
        gpus: &refs,
        status: &status,
        history: &history,
    };
    let template = Template::parse(
        "GPU {util!70,90}% {mem_used:GiB:.1}/{mem_total:auto} {max.temp}C \
         {each ' | '}{index}:{power:W}{end} {1.util} {1.util:spark8}",
    )
    .unwrap();
    let mut out = String::new();
    template.render_into(&data, &Plain, &mut out);
    let first = out.clone();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..100 {
        out.clear();
        template.render_into(&data, &Plain, &mut out);
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(out, first);
    assert_eq!(out, "GPU 68% 20.0/160.0GiB 70C 0:250 | 1:250 95 ▆▆▆▇▇▇██");
    assert_eq!(allocated, 0, "render_into allocated {allocated} times");
}
