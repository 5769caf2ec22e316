//! gpupeekd renders its prompt file every tick into one reused buffer: with plain
//! markup and numeric placeholders, rendering must allocate nothing once the buffer has
//! grown, and so must decoding the records into the model. A counting global allocator
//! checks it, counting only the test's own thread (the harness's threads allocate when
//! they please).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpupeek_model::{Gpu, Status};
use gpupeek_render::{Data, Plain, Template};
use gpupeek_shm::layout::history_valid;
use gpupeek_shm::layout::{gpu_valid as v, GpuState};
use gpupeek_shm::{GpuRecord, StatusRecord};
use gpupeek_shm::{History, HistorySample};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the test's thread while it measures: the harness's own threads allocate
    /// when they please, and a loaded machine can schedule that inside the window.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.try_with(Cell::get).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
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
    let records = [gpu(0, 40), gpu(1, 95)];
    let mut gpus: Vec<Gpu> = Vec::with_capacity(records.len());
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
    let template = Template::parse(
        "GPU {util!70,90}% {mem_used:GiB:.1}/{mem_total:auto} {max.temp}C \
         {each ' | '}{index}:{power:W}{end} {1.util} {1.util:spark8}",
    )
    .unwrap();
    let mut out = String::new();
    // What the daemon does every tick: decode the records into the model, then render.
    let mut first = String::new();
    let mut before = 0;
    for i in 0..=100 {
        gpus.clear();
        gpus.extend(records.iter().map(Gpu::new));
        let data = Data {
            gpus: &gpus,
            status: Status::new(&status),
            history: &history,
            mig: &[],
        };
        out.clear();
        template.render_into(&data, &Plain, &mut out);
        if i == 0 {
            first = out.clone();
            before = ALLOCATIONS.load(Ordering::Relaxed);
            COUNTING.set(true);
        }
    }
    COUNTING.set(false);
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(out, first);
    assert_eq!(out, "GPU 68% 20.0/160.0GiB 70C 0:250 | 1:250 95 ▆▆▆▇▇▇██");
    assert_eq!(allocated, 0, "render_into allocated {allocated} times");
    // The control: the counter does see this thread's allocations.
    COUNTING.set(true);
    drop(std::hint::black_box(vec![0u8; 16]));
    COUNTING.set(false);
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > before);
}
