/*
 * gpupeek.h: read gpupeekd's shared-memory segment from C (C11, Linux, header only).
 *
 * The layout and the protocol are documented in gpupeek-shm(5); this header is a
 * straight transcription of it. The record structs are pinned with _Static_assert on
 * every size and offset, and the gpupeek test suite compiles a program from this header
 * that prints every offset and size and compares them with the Rust definition, so the
 * header cannot drift from the daemon.
 *
 * What a reader must do, and what the functions below do:
 *   1. open /dev/shm/NAME with O_RDONLY | O_NOFOLLOW (gpupeek_open);
 *   2. fstat the descriptor: a regular file, owned by root or by the reader, not group-
 *      or world-writable, at least 128 bytes, a multiple of 8, at most 256 MiB;
 *   3. mmap it PROT_READ, MAP_SHARED (the size is checked first, so a truncated object
 *      cannot raise SIGBUS), and close the descriptor;
 *   4. validate the static header: magic, ABI major, size, capacities, every region
 *      inside the mapping (gpupeek_validate);
 *   5. read each record under its seqlock with relaxed 8-byte atomic loads and acquire
 *      fences, giving up after GPUPEEK_MAX_ATTEMPTS (gpupeek_read_block);
 *   6. judge liveness from the heartbeat (gpupeek_liveness);
 *   7. optionally, read a GPU's history ring (ABI 1.1) under its head's seqlock
 *      (gpupeek_read_history).
 * Every string in the segment may be hostile: it is NUL-padded, not always
 * NUL-terminated by contract, and may hold terminal escapes; copy it with
 * gpupeek_copy_string, which bounds and sanitises it.
 *
 * All functions return GPUPEEK_OK (0) or a negative gpupeek_error; the error codes map
 * one-to-one onto gpupeek(1)'s exit statuses (gpupeek_exit_status).
 */
#ifndef GPUPEEK_H
#define GPUPEEK_H

/* POSIX 2008 (open flags, clock_gettime) under -std=c11: include this header first, or
 * define _POSIX_C_SOURCE (or _GNU_SOURCE) yourself. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- constants ------------------------------------------------------------------ */

/* "GPUPEEK\0" read as a little-endian 64-bit word; 0 while the daemon initialises. */
#define GPUPEEK_MAGIC UINT64_C(0x004B454550555047)
#define GPUPEEK_ABI_MAJOR 1u
#define GPUPEEK_ABI_MINOR 3u
#define GPUPEEK_DEFAULT_NAME "gpupeek"
#define GPUPEEK_ENV_NAME "GPUPEEK_SHM"
#define GPUPEEK_MAX_CAPACITY 65536u
#define GPUPEEK_MAX_SEGMENT_BYTES ((size_t)256 << 20)
#define GPUPEEK_MAX_ATTEMPTS 200
#define GPUPEEK_STALE_PERIODS 3u
#define GPUPEEK_PROC_RECORD_V1_0_SIZE 128u
#define GPUPEEK_MAX_HISTORY_SLOTS 65536u

/* Daemon states (gpupeek_status.state). */
/* RELEASED (ABI 1.3): alive, heartbeat beating, NVML let go on an operator's request
 * (GPU reset, MIG change); no GPU is published (gpu_count 0). */
enum { GPUPEEK_DAEMON_STARTING = 0, GPUPEEK_DAEMON_LIVE = 1, GPUPEEK_DAEMON_NVML_ERROR = 2,
       GPUPEEK_DAEMON_STOPPED = 3, GPUPEEK_DAEMON_RELEASED = 4 };

/* GPU states (gpupeek_gpu.state). */
/* NOT_RESPONDING (ABI 1.3): the driver has not answered a call for this GPU within the
 * daemon's timeout; identity (name, UUID, PCI bus id, maximum clocks) is kept, no value
 * is current. Only an OK GPU's values are current: see gpupeek_gpu_current. */
enum { GPUPEEK_GPU_EMPTY = 0, GPUPEEK_GPU_OK = 1, GPUPEEK_GPU_LOST = 2, GPUPEEK_GPU_ERROR = 3,
       GPUPEEK_GPU_SUSPENDED = 4, GPUPEEK_GPU_IDLE = 5, GPUPEEK_GPU_NOT_RESPONDING = 6 };

/* Liveness beyond GPUPEEK_OK (positive returns of gpupeek_liveness). */
enum { GPUPEEK_LIVE_NVML_ERROR = 1, GPUPEEK_LIVE_RELEASED = 2 };

/* Validity bits of gpupeek_status.valid. */
#define GPUPEEK_STATUS_DRIVER_VERSION (UINT64_C(1) << 0)
#define GPUPEEK_STATUS_NVML_VERSION (UINT64_C(1) << 1)
#define GPUPEEK_STATUS_CUDA_DRIVER_VERSION (UINT64_C(1) << 2)

/* Validity bits of gpupeek_gpu.valid: a clear bit means "not available", never 0. */
#define GPUPEEK_GPU_NAME (UINT64_C(1) << 0)
#define GPUPEEK_GPU_UUID (UINT64_C(1) << 1)
#define GPUPEEK_GPU_PCI_BUS_ID (UINT64_C(1) << 2)
#define GPUPEEK_GPU_MEMORY (UINT64_C(1) << 3)
#define GPUPEEK_GPU_MEM_RESERVED (UINT64_C(1) << 4)
#define GPUPEEK_GPU_UTILIZATION (UINT64_C(1) << 5)
#define GPUPEEK_GPU_UTIL_ENC (UINT64_C(1) << 6)
#define GPUPEEK_GPU_UTIL_DEC (UINT64_C(1) << 7)
#define GPUPEEK_GPU_TEMPERATURE (UINT64_C(1) << 8)
#define GPUPEEK_GPU_FAN_SPEED (UINT64_C(1) << 9)
#define GPUPEEK_GPU_POWER_DRAW (UINT64_C(1) << 10)
#define GPUPEEK_GPU_POWER_LIMIT (UINT64_C(1) << 11)
#define GPUPEEK_GPU_ENERGY (UINT64_C(1) << 12)
#define GPUPEEK_GPU_CLOCK_GRAPHICS (UINT64_C(1) << 13)
#define GPUPEEK_GPU_CLOCK_SM (UINT64_C(1) << 14)
#define GPUPEEK_GPU_CLOCK_MEM (UINT64_C(1) << 15)
#define GPUPEEK_GPU_CLOCK_GRAPHICS_MAX (UINT64_C(1) << 16)
#define GPUPEEK_GPU_CLOCK_SM_MAX (UINT64_C(1) << 17)
#define GPUPEEK_GPU_CLOCK_MEM_MAX (UINT64_C(1) << 18)
#define GPUPEEK_GPU_PSTATE (UINT64_C(1) << 19)
#define GPUPEEK_GPU_CLOCK_EVENT_REASONS (UINT64_C(1) << 20)
#define GPUPEEK_GPU_PCIE_TX (UINT64_C(1) << 21)
#define GPUPEEK_GPU_PCIE_RX (UINT64_C(1) << 22)
#define GPUPEEK_GPU_PCIE_LINK_GEN (UINT64_C(1) << 23)
#define GPUPEEK_GPU_PCIE_LINK_WIDTH (UINT64_C(1) << 24)
#define GPUPEEK_GPU_ECC_CORRECTED (UINT64_C(1) << 25)
#define GPUPEEK_GPU_ECC_UNCORRECTED (UINT64_C(1) << 26)
#define GPUPEEK_GPU_PROCESSES (UINT64_C(1) << 27)
#define GPUPEEK_GPU_GPM (UINT64_C(1) << 28)
#define GPUPEEK_GPU_GPM_SM_ACTIVITY (UINT64_C(1) << 29)
#define GPUPEEK_GPU_GPM_SM_OCCUPANCY (UINT64_C(1) << 30)
#define GPUPEEK_GPU_GPM_TENSOR_ACTIVITY (UINT64_C(1) << 31)
#define GPUPEEK_GPU_GPM_DRAM_BW (UINT64_C(1) << 32)
#define GPUPEEK_GPU_GPM_PCIE (UINT64_C(1) << 33)
#define GPUPEEK_GPU_GPM_NVLINK (UINT64_C(1) << 34)
#define GPUPEEK_GPU_IDLE_SINCE (UINT64_C(1) << 35)

/* Process table policy (gpupeek_proc_head.policy; 0 from a 1.0 writer) and flags. */
enum { GPUPEEK_POLICY_FULL = 1, GPUPEEK_POLICY_BASIC = 2, GPUPEEK_POLICY_NONE = 3 };
#define GPUPEEK_PROC_FLAG_HIDEPID (1u << 0)

/* Process kinds (gpupeek_proc.kind, a bit set). */
#define GPUPEEK_PROC_COMPUTE 1u
#define GPUPEEK_PROC_GRAPHICS 2u

/* Validity bits of gpupeek_proc.valid (bits 3 and up: ABI 1.1). */
#define GPUPEEK_PROC_GPU_MEMORY (UINT64_C(1) << 0)
#define GPUPEEK_PROC_USER (UINT64_C(1) << 1)
#define GPUPEEK_PROC_COMMAND (UINT64_C(1) << 2)
#define GPUPEEK_PROC_CMDLINE (UINT64_C(1) << 3)
#define GPUPEEK_PROC_GPU_UTIL (UINT64_C(1) << 4)
#define GPUPEEK_PROC_CPU (UINT64_C(1) << 5)
#define GPUPEEK_PROC_HOST_MEMORY (UINT64_C(1) << 6)
#define GPUPEEK_PROC_START_TIME (UINT64_C(1) << 7)
#define GPUPEEK_PROC_NAMESPACE (UINT64_C(1) << 8)
#define GPUPEEK_PROC_CONTAINER (UINT64_C(1) << 9)

/* MIG instance id meaning "none". */
#define GPUPEEK_NO_INSTANCE UINT32_MAX

/* ---- records (native byte order, no implicit padding) ----------------------------- */

struct gpupeek_static_header {
    uint64_t magic;
    uint32_t abi_major;
    uint32_t abi_minor;
    uint64_t segment_size_bytes;
    uint64_t epoch;
    uint32_t writer_pid;
    uint32_t status_size_bytes;
    uint64_t status_offset;
    uint64_t gpu_table_offset;
    uint32_t gpu_record_size_bytes;
    uint32_t gpu_capacity;
    uint64_t proc_table_offset;
    uint32_t proc_record_size_bytes;
    uint32_t proc_capacity;
    uint64_t generation_offset;
    uint64_t history_offset;            /* 1.1; 0: no history */
    uint32_t history_ring_size_bytes;   /* 1.1 */
    uint32_t history_slots;             /* 1.1 */
    uint32_t history_sample_size_bytes; /* 1.1 */
    uint32_t reserved1;
    uint64_t reserved[2];
};

struct gpupeek_status {
    uint64_t seq;
    uint32_t state;
    int32_t nvml_error_code;
    uint64_t heartbeat_mono_ns;
    uint64_t period_ns;
    uint64_t published_unix_ns;
    uint32_t gpu_count;
    int32_t cuda_driver_version;
    uint64_t valid;
    char driver_version[32];
    char nvml_version[32];
    char error_message[128];
    uint64_t reserved[1];
};

struct gpupeek_gpu {
    uint64_t seq;
    uint64_t valid;
    uint32_t index;
    uint32_t state;
    int32_t nvml_error_code;
    uint32_t pstate;
    char uuid[96];
    char name[96];
    char pci_bus_id[32];
    uint64_t mem_total_bytes;
    uint64_t mem_used_bytes;
    uint64_t mem_free_bytes;
    uint64_t mem_reserved_bytes;
    uint64_t energy_mj;
    uint64_t clock_event_reasons;
    uint64_t ecc_corrected_volatile_count;
    uint64_t ecc_uncorrected_volatile_count;
    uint64_t sample_mono_ns;
    uint32_t util_gpu_pct;
    uint32_t util_mem_pct;
    uint32_t util_enc_pct;
    uint32_t util_dec_pct;
    int32_t temp_gpu_c;
    uint32_t fan_speed_pct;
    uint32_t power_draw_mw;
    uint32_t power_limit_mw;
    uint32_t clock_graphics_mhz;
    uint32_t clock_sm_mhz;
    uint32_t clock_mem_mhz;
    uint32_t clock_graphics_max_mhz;
    uint32_t clock_sm_max_mhz;
    uint32_t clock_mem_max_mhz;
    uint32_t pcie_tx_kbytes_per_s;
    uint32_t pcie_rx_kbytes_per_s;
    uint32_t pcie_link_gen;
    uint32_t pcie_link_width;
    uint32_t process_count;
    /* ABI 1.1: GPM metrics over gpm_interval_ns, hundredths of a percent. */
    uint32_t gpm_sm_activity_centipct;
    uint32_t gpm_sm_occupancy_centipct;
    uint32_t gpm_tensor_activity_centipct;
    uint32_t gpm_dram_bw_util_centipct;
    uint32_t reserved0;
    uint64_t gpm_pcie_tx_bytes_per_s;
    uint64_t gpm_pcie_rx_bytes_per_s;
    uint64_t gpm_nvlink_tx_bytes_per_s;
    uint64_t gpm_nvlink_rx_bytes_per_s;
    uint64_t gpm_interval_ns;
    /* CLOCK_MONOTONIC ns since which utilisation has been 0 %. */
    uint64_t idle_since_mono_ns;
    uint64_t reserved[5];
};

struct gpupeek_proc_head {
    uint64_t seq;
    uint32_t count;
    uint32_t overflow;
    uint32_t policy;
    uint32_t flags;
    uint64_t pid_ns_inode;
    /* 1.2: CLOCK_MONOTONIC ns when the processes were sampled, and how often they are
     * (the process tier's period, ns); 0 from older writers. */
    uint64_t sample_mono_ns;
    uint64_t period_ns;
    uint64_t reserved[10];
};

struct gpupeek_proc {
    uint32_t gpu_index;
    uint32_t pid;
    uint32_t uid;
    uint32_t kind;
    uint64_t valid;
    uint64_t gpu_mem_bytes;
    uint32_t gpu_instance_id;
    uint32_t compute_instance_id;
    char user[32];
    char command[32];
    uint64_t reserved[3];
    /* ABI 1.1 from here; zero (validity bits clear) from a 1.0 writer. */
    uint32_t ns_pid;
    uint32_t sm_util_pct;
    uint32_t mem_util_pct;
    uint32_t enc_util_pct;
    uint32_t dec_util_pct;
    uint32_t cpu_centipct;
    uint64_t host_rss_bytes;
    uint64_t start_unix_ns;
    uint64_t pid_ns_inode;
    uint32_t cmdline_len;
    uint32_t reserved1;
    char container_runtime[16];
    char container_id[72];
    char pod_uid[40];
    char cmdline[328];
};

/* Head of one GPU's history ring (1.1), at history_offset + slot * history_ring_size_bytes;
 * its seq protects the head and the history_slots samples that follow it. */
struct gpupeek_history_head {
    uint64_t seq;
    uint64_t written; /* samples appended; the next goes to slot written % history_slots */
    uint64_t step_ns; /* time between two samples */
    uint64_t reserved;
};

/* Validity bits of gpupeek_history_sample.valid; all clear: a gap. */
#define GPUPEEK_HISTORY_UTILIZATION (1u << 0)
#define GPUPEEK_HISTORY_MEMORY (1u << 1)
#define GPUPEEK_HISTORY_POWER_DRAW (1u << 2)
#define GPUPEEK_HISTORY_TEMPERATURE (1u << 3)
#define GPUPEEK_HISTORY_UTIL_MEM (1u << 4)

struct gpupeek_history_sample {
    uint64_t sample_mono_ns;
    uint32_t mem_used_mib;
    uint32_t power_draw_mw;
    uint8_t util_gpu_pct;
    uint8_t util_mem_pct;
    int16_t temp_gpu_c;
    uint16_t valid;
    uint16_t reserved;
};

#define GPUPEEK_PIN(type, field, off) \
    _Static_assert(offsetof(struct type, field) == (off), #type "." #field " moved")

_Static_assert(sizeof(struct gpupeek_static_header) == 128, "static header size");
GPUPEEK_PIN(gpupeek_static_header, abi_major, 8);
GPUPEEK_PIN(gpupeek_static_header, segment_size_bytes, 16);
GPUPEEK_PIN(gpupeek_static_header, writer_pid, 32);
GPUPEEK_PIN(gpupeek_static_header, status_offset, 40);
GPUPEEK_PIN(gpupeek_static_header, gpu_record_size_bytes, 56);
GPUPEEK_PIN(gpupeek_static_header, proc_table_offset, 64);
GPUPEEK_PIN(gpupeek_static_header, proc_capacity, 76);
GPUPEEK_PIN(gpupeek_static_header, generation_offset, 80);
GPUPEEK_PIN(gpupeek_static_header, history_offset, 88);
GPUPEEK_PIN(gpupeek_static_header, history_slots, 100);
GPUPEEK_PIN(gpupeek_static_header, reserved, 112);
_Static_assert(sizeof(struct gpupeek_history_head) == 32, "history head size");
_Static_assert(sizeof(struct gpupeek_history_sample) == 24, "history sample size");
GPUPEEK_PIN(gpupeek_history_sample, util_gpu_pct, 16);
GPUPEEK_PIN(gpupeek_history_sample, valid, 20);

_Static_assert(sizeof(struct gpupeek_status) == 256, "status record size");
GPUPEEK_PIN(gpupeek_status, state, 8);
GPUPEEK_PIN(gpupeek_status, heartbeat_mono_ns, 16);
GPUPEEK_PIN(gpupeek_status, period_ns, 24);
GPUPEEK_PIN(gpupeek_status, gpu_count, 40);
GPUPEEK_PIN(gpupeek_status, valid, 48);
GPUPEEK_PIN(gpupeek_status, driver_version, 56);
GPUPEEK_PIN(gpupeek_status, nvml_version, 88);
GPUPEEK_PIN(gpupeek_status, error_message, 120);
GPUPEEK_PIN(gpupeek_status, reserved, 248);

_Static_assert(sizeof(struct gpupeek_gpu) == 512, "GPU record size");
GPUPEEK_PIN(gpupeek_gpu, valid, 8);
GPUPEEK_PIN(gpupeek_gpu, index, 16);
GPUPEEK_PIN(gpupeek_gpu, state, 20);
GPUPEEK_PIN(gpupeek_gpu, uuid, 32);
GPUPEEK_PIN(gpupeek_gpu, name, 128);
GPUPEEK_PIN(gpupeek_gpu, pci_bus_id, 224);
GPUPEEK_PIN(gpupeek_gpu, mem_total_bytes, 256);
GPUPEEK_PIN(gpupeek_gpu, mem_used_bytes, 264);
GPUPEEK_PIN(gpupeek_gpu, sample_mono_ns, 320);
GPUPEEK_PIN(gpupeek_gpu, util_gpu_pct, 328);
GPUPEEK_PIN(gpupeek_gpu, temp_gpu_c, 344);
GPUPEEK_PIN(gpupeek_gpu, power_draw_mw, 352);
GPUPEEK_PIN(gpupeek_gpu, clock_mem_max_mhz, 380);
GPUPEEK_PIN(gpupeek_gpu, process_count, 400);
GPUPEEK_PIN(gpupeek_gpu, gpm_sm_activity_centipct, 404);
GPUPEEK_PIN(gpupeek_gpu, gpm_pcie_tx_bytes_per_s, 424);
GPUPEEK_PIN(gpupeek_gpu, idle_since_mono_ns, 464);
GPUPEEK_PIN(gpupeek_gpu, reserved, 472);

_Static_assert(sizeof(struct gpupeek_proc_head) == 128, "process table head size");
GPUPEEK_PIN(gpupeek_proc_head, count, 8);
GPUPEEK_PIN(gpupeek_proc_head, policy, 16);
GPUPEEK_PIN(gpupeek_proc_head, pid_ns_inode, 24);
GPUPEEK_PIN(gpupeek_proc_head, sample_mono_ns, 32);
GPUPEEK_PIN(gpupeek_proc_head, period_ns, 40);
GPUPEEK_PIN(gpupeek_proc_head, reserved, 48);

_Static_assert(sizeof(struct gpupeek_proc) == 640, "process record size");
GPUPEEK_PIN(gpupeek_proc, valid, 16);
GPUPEEK_PIN(gpupeek_proc, gpu_mem_bytes, 24);
GPUPEEK_PIN(gpupeek_proc, user, 40);
GPUPEEK_PIN(gpupeek_proc, command, 72);
GPUPEEK_PIN(gpupeek_proc, ns_pid, 128);
GPUPEEK_PIN(gpupeek_proc, cpu_centipct, 148);
GPUPEEK_PIN(gpupeek_proc, host_rss_bytes, 152);
GPUPEEK_PIN(gpupeek_proc, cmdline_len, 176);
GPUPEEK_PIN(gpupeek_proc, container_runtime, 184);
GPUPEEK_PIN(gpupeek_proc, container_id, 200);
GPUPEEK_PIN(gpupeek_proc, pod_uid, 272);
GPUPEEK_PIN(gpupeek_proc, cmdline, 312);

/* The protocol needs lock-free 8-byte atomic loads (true on every 64-bit Linux target). */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

/* ---- errors --------------------------------------------------------------------- */

enum gpupeek_error {
    GPUPEEK_OK = 0,
    GPUPEEK_ERR_NO_DAEMON = -1, /* no segment, or the daemon is still initialising it */
    GPUPEEK_ERR_STALE = -2,     /* a record stayed mid-write, or no heartbeat */
    GPUPEEK_ERR_ABI = -3,       /* another ABI major version */
    GPUPEEK_ERR_UNTRUSTED = -4, /* wrong owner, writable by others, not a regular file */
    GPUPEEK_ERR_CORRUPT = -5,   /* a header number does not fit the mapping */
    GPUPEEK_ERR_OS = -6,        /* open/fstat/mmap failed; see errno */
};

/* gpupeek(1)'s exit status for an error: 3 no daemon, 4 stale, 6 ABI, 7 untrusted,
 * 8 corrupt, 9 OS error. (gpupeek_liveness's positive returns: 5 for
 * GPUPEEK_LIVE_NVML_ERROR, 10 for GPUPEEK_LIVE_RELEASED.) */
static inline int gpupeek_exit_status(int err)
{
    switch (err) {
    case GPUPEEK_OK: return 0;
    case GPUPEEK_ERR_NO_DAEMON: return 3;
    case GPUPEEK_ERR_STALE: return 4;
    case GPUPEEK_ERR_ABI: return 6;
    case GPUPEEK_ERR_UNTRUSTED: return 7;
    case GPUPEEK_ERR_CORRUPT: return 8;
    default: return 9;
    }
}

/* ---- an open segment -------------------------------------------------------------- */

struct gpupeek_segment {
    const _Atomic uint64_t *words; /* the PROT_READ mapping, as 64-bit words */
    size_t size;                   /* bytes mapped */
    struct gpupeek_static_header header;
    char why[160];                 /* the reason of the last error, one line */
};

/* Copies `len` bytes of a hostile NUL-padded field into `dst` (size `dst_size` > 0):
 * stops at the first NUL, always terminates, replaces control bytes with '?'. */
static inline void gpupeek_copy_string(char *dst, size_t dst_size, const char *src, size_t len)
{
    size_t i = 0;
    for (; i < len && i + 1 < dst_size && src[i] != '\0'; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[i] = '\0';
}

static inline int gpupeek_fail(struct gpupeek_segment *seg, int err, const char *why)
{
    snprintf(seg->why, sizeof seg->why, "%s", why);
    return err;
}

/* Relaxed-loads `n` words starting at word `first` into `out` (a torn image is possible:
 * only the seqlock check below makes it trustworthy). */
static inline void gpupeek_load_words(const struct gpupeek_segment *seg, size_t first, size_t n,
                                      void *out)
{
    unsigned char *dst = (unsigned char *)out;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = atomic_load_explicit(&seg->words[first + i], memory_order_relaxed);
        memcpy(dst + 8 * i, &w, 8);
    }
}

/* Reads one seqlock-protected block of `block_bytes` at byte `offset` into `out`
 * (`out_size` bytes; a shorter block leaves the rest zero, a longer one is cut).
 * The protocol: s1 = seq (relaxed); acquire fence; odd: retry; copy (relaxed loads);
 * acquire fence; accept only if seq (relaxed) == s1. Bounded: GPUPEEK_ERR_STALE after
 * GPUPEEK_MAX_ATTEMPTS (a writer that died mid-write leaves seq odd forever). */
static inline int gpupeek_read_block(const struct gpupeek_segment *seg, size_t offset,
                                     size_t block_bytes, void *out, size_t out_size)
{
    size_t words = (block_bytes < out_size ? block_bytes : out_size) / 8;
    const _Atomic uint64_t *seq = &seg->words[offset / 8];
    for (int attempt = 0; attempt < GPUPEEK_MAX_ATTEMPTS; attempt++) {
        uint64_t s1 = atomic_load_explicit(seq, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if ((s1 & 1) == 0) {
            memset(out, 0, out_size);
            gpupeek_load_words(seg, offset / 8, words, out);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(seq, memory_order_relaxed) == s1)
                return GPUPEEK_OK;
        }
        if (attempt >= 16)
            sched_yield(); /* let a preempted writer finish */
    }
    return GPUPEEK_ERR_STALE;
}

/* 1 when [offset, offset + size * count) is 8-aligned, each size >= min, inside `total`. */
static inline int gpupeek_region_ok(uint64_t offset, uint64_t size, uint64_t count,
                                    uint64_t min, uint64_t total)
{
    if (offset % 8 != 0 || size % 8 != 0 || size < min)
        return 0;
    if (count != 0 && size > UINT64_MAX / count)
        return 0;
    uint64_t len = size * count;
    return offset <= total && len <= total - offset;
}

/* Checks the history fields of the header (ABI 1.1; history_offset 0: no history). */
static inline int gpupeek_validate_history(struct gpupeek_segment *seg)
{
    const struct gpupeek_static_header *h = &seg->header;
    if (h->history_offset == 0)
        return GPUPEEK_OK;
    uint64_t sample = h->history_sample_size_bytes, ring = h->history_ring_size_bytes;
    if (h->history_slots == 0 || h->history_slots > GPUPEEK_MAX_HISTORY_SLOTS)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "history slot count out of range");
    if (sample < sizeof(struct gpupeek_history_sample) || sample % 8 != 0)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "history sample misaligned or too small");
    if (ring % 8 != 0 || ring < sizeof(struct gpupeek_history_head) + sample * h->history_slots)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "history ring too small for its samples");
    if (h->history_offset < sizeof(struct gpupeek_static_header) ||
        !gpupeek_region_ok(h->history_offset, ring, h->gpu_capacity, 32, seg->size))
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "history region outside the segment");
    return GPUPEEK_OK;
}

/* Checks the static header against the mapping (step 4). */
static inline int gpupeek_validate(struct gpupeek_segment *seg)
{
    const struct gpupeek_static_header *h = &seg->header;
    if (h->magic == 0)
        return gpupeek_fail(seg, GPUPEEK_ERR_NO_DAEMON, "the daemon is still starting");
    if (h->magic != GPUPEEK_MAGIC)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "bad magic: not a gpupeek segment");
    if (h->abi_major != GPUPEEK_ABI_MAJOR) {
        snprintf(seg->why, sizeof seg->why, "segment ABI %u.%u, this reader reads %u.x",
                 h->abi_major, h->abi_minor, GPUPEEK_ABI_MAJOR);
        return GPUPEEK_ERR_ABI;
    }
    if (h->segment_size_bytes != seg->size)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "header size differs from the object's");
    if (h->gpu_capacity > GPUPEEK_MAX_CAPACITY || h->proc_capacity > GPUPEEK_MAX_CAPACITY)
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "capacity out of range");
    uint64_t total = seg->size, head = sizeof(struct gpupeek_proc_head);
    if (!gpupeek_region_ok(h->generation_offset, 8, 1, 8, total) ||
        !gpupeek_region_ok(h->status_offset, h->status_size_bytes, 1, 48, total) ||
        !gpupeek_region_ok(h->gpu_table_offset, h->gpu_record_size_bytes, h->gpu_capacity, 256,
                           total) ||
        !gpupeek_region_ok(h->proc_table_offset, head, 1, 16, total) ||
        h->proc_table_offset > UINT64_MAX - head ||
        !gpupeek_region_ok(h->proc_table_offset + head, h->proc_record_size_bytes,
                           h->proc_capacity, GPUPEEK_PROC_RECORD_V1_0_SIZE, total) ||
        h->status_offset < sizeof(struct gpupeek_static_header))
        return gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "a region lies outside the segment");
    return gpupeek_validate_history(seg);
}

/* Opens segment `name` (NULL: $GPUPEEK_SHM, else "gpupeek") read-only (steps 1-4). */
static inline int gpupeek_open(struct gpupeek_segment *seg, const char *name)
{
    char path[256];
    memset(seg, 0, sizeof *seg);
    if (name == NULL || name[0] == '\0') {
        name = getenv(GPUPEEK_ENV_NAME);
        if (name == NULL || name[0] == '\0')
            name = GPUPEEK_DEFAULT_NAME;
    }
    if (strchr(name, '/') != NULL || strlen(name) > 200 || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return gpupeek_fail(seg, GPUPEEK_ERR_OS, "invalid segment name");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return gpupeek_fail(seg, GPUPEEK_ERR_NO_DAEMON, "no segment: is gpupeekd running?");
        if (errno == ELOOP)
            return gpupeek_fail(seg, GPUPEEK_ERR_UNTRUSTED, "the segment is a symbolic link");
        return gpupeek_fail(seg, GPUPEEK_ERR_OS, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return gpupeek_fail(seg, GPUPEEK_ERR_OS, strerror(e));
    }
    int err = GPUPEEK_OK;
    if (!S_ISREG(st.st_mode))
        err = gpupeek_fail(seg, GPUPEEK_ERR_UNTRUSTED, "the segment is not a regular object");
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        err = gpupeek_fail(seg, GPUPEEK_ERR_UNTRUSTED, "the segment is owned by another user");
    else if ((st.st_mode & 022) != 0)
        err = gpupeek_fail(seg, GPUPEEK_ERR_UNTRUSTED, "the segment is writable by others");
    else if ((size_t)st.st_size < sizeof(struct gpupeek_static_header))
        err = gpupeek_fail(seg, GPUPEEK_ERR_NO_DAEMON, "the daemon is still starting");
    else if ((size_t)st.st_size > GPUPEEK_MAX_SEGMENT_BYTES || st.st_size % 8 != 0)
        err = gpupeek_fail(seg, GPUPEEK_ERR_CORRUPT, "implausible segment size");
    if (err != GPUPEEK_OK) {
        close(fd);
        return err;
    }
    seg->size = (size_t)st.st_size;
    void *map = mmap(NULL, seg->size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return gpupeek_fail(seg, GPUPEEK_ERR_OS, strerror(e));
    seg->words = (const _Atomic uint64_t *)map;
    /* The magic is stored last by the writer: load it, fence, then the rest. */
    uint64_t magic = atomic_load_explicit(&seg->words[0], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    gpupeek_load_words(seg, 1, sizeof seg->header / 8 - 1, (unsigned char *)&seg->header + 8);
    seg->header.magic = magic;
    err = gpupeek_validate(seg);
    if (err != GPUPEEK_OK) {
        munmap((void *)seg->words, seg->size);
        seg->words = NULL;
    }
    return err;
}

static inline void gpupeek_close(struct gpupeek_segment *seg)
{
    if (seg->words != NULL)
        munmap((void *)seg->words, seg->size);
    seg->words = NULL;
}

/* The generation word: bumped after each complete publish. */
static inline uint64_t gpupeek_generation(const struct gpupeek_segment *seg)
{
    uint64_t g = atomic_load_explicit(&seg->words[seg->header.generation_offset / 8],
                                      memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return g;
}

static inline int gpupeek_read_status(const struct gpupeek_segment *seg, struct gpupeek_status *out)
{
    return gpupeek_read_block(seg, seg->header.status_offset, seg->header.status_size_bytes, out,
                              sizeof *out);
}

/* GPU slot `slot` (0 <= slot < status.gpu_count <= gpu_capacity). */
static inline int gpupeek_read_gpu(const struct gpupeek_segment *seg, uint32_t slot,
                                   struct gpupeek_gpu *out)
{
    const struct gpupeek_static_header *h = &seg->header;
    if (slot >= h->gpu_capacity)
        return GPUPEEK_ERR_CORRUPT;
    uint64_t offset = h->gpu_table_offset + (uint64_t)slot * h->gpu_record_size_bytes;
    return gpupeek_read_block(seg, offset, h->gpu_record_size_bytes, out, sizeof *out);
}

/* The process table: its head and up to `max` used slots, all under the head's seqlock.
 * `*n` is set to the number of records copied (min(head.count, max)). */
static inline int gpupeek_read_procs(const struct gpupeek_segment *seg,
                                     struct gpupeek_proc_head *head, struct gpupeek_proc *procs,
                                     size_t max, size_t *n)
{
    const struct gpupeek_static_header *h = &seg->header;
    size_t rec = h->proc_record_size_bytes < sizeof *procs ? h->proc_record_size_bytes
                                                            : sizeof *procs;
    const _Atomic uint64_t *seq = &seg->words[h->proc_table_offset / 8];
    for (int attempt = 0; attempt < GPUPEEK_MAX_ATTEMPTS; attempt++) {
        uint64_t s1 = atomic_load_explicit(seq, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if ((s1 & 1) == 0) {
            gpupeek_load_words(seg, h->proc_table_offset / 8, sizeof *head / 8, head);
            size_t count = head->count <= h->proc_capacity ? head->count : 0;
            int corrupt = head->count > h->proc_capacity;
            count = count < max ? count : max;
            for (size_t i = 0; i < count; i++) {
                uint64_t off = h->proc_table_offset + sizeof *head +
                               (uint64_t)i * h->proc_record_size_bytes;
                memset(&procs[i], 0, sizeof procs[i]);
                gpupeek_load_words(seg, off / 8, rec / 8, &procs[i]);
            }
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(seq, memory_order_relaxed) == s1) {
                *n = count;
                return corrupt ? GPUPEEK_ERR_CORRUPT : GPUPEEK_OK;
            }
        }
        if (attempt >= 16)
            sched_yield();
    }
    return GPUPEEK_ERR_STALE;
}

/* GPU slot `slot`'s history ring (ABI 1.1): its head, and the newest min(kept, max)
 * samples, oldest first, all under the head's seqlock (kept = min(written, history_slots)).
 * `*n` is set to the number of samples copied; a segment without history (a 1.0 writer)
 * gives GPUPEEK_OK with a zeroed head and *n = 0. Sample k (0 <= k < *n) is the
 * (head->written - *n + k)-th sample the daemon appended. */
static inline int gpupeek_read_history(const struct gpupeek_segment *seg, uint32_t slot,
                                       struct gpupeek_history_head *head,
                                       struct gpupeek_history_sample *samples, size_t max,
                                       size_t *n)
{
    const struct gpupeek_static_header *h = &seg->header;
    memset(head, 0, sizeof *head);
    *n = 0;
    if (h->history_offset == 0)
        return GPUPEEK_OK;
    if (slot >= h->gpu_capacity)
        return GPUPEEK_ERR_CORRUPT;
    uint64_t ring = h->history_offset + (uint64_t)slot * h->history_ring_size_bytes;
    uint64_t slots = h->history_slots, sample = h->history_sample_size_bytes;
    const _Atomic uint64_t *seq = &seg->words[ring / 8];
    for (int attempt = 0; attempt < GPUPEEK_MAX_ATTEMPTS; attempt++) {
        uint64_t s1 = atomic_load_explicit(seq, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if ((s1 & 1) == 0) {
            gpupeek_load_words(seg, ring / 8 + 1, sizeof *head / 8 - 1,
                               (unsigned char *)head + 8);
            /* A torn `written` only picks other slots: n % slots stays inside the ring. */
            uint64_t kept = head->written < slots ? head->written : slots;
            size_t count = kept < max ? (size_t)kept : max;
            for (size_t i = 0; i < count; i++) {
                uint64_t k = (head->written - count + i) % slots;
                uint64_t off = ring + sizeof *head + k * sample;
                gpupeek_load_words(seg, off / 8, sizeof *samples / 8, &samples[i]);
            }
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(seq, memory_order_relaxed) == s1) {
                head->seq = s1;
                *n = count;
                return GPUPEEK_OK;
            }
        }
        if (attempt >= 16)
            sched_yield();
    }
    return GPUPEEK_ERR_STALE;
}

/* Liveness from a status record: GPUPEEK_OK when live, GPUPEEK_ERR_NO_DAEMON when
 * starting or stopped, GPUPEEK_ERR_STALE when no heartbeat for 3 periods (at least 1 s),
 * GPUPEEK_LIVE_NVML_ERROR (1) when the daemon reports an NVML error (see error_message),
 * and GPUPEEK_LIVE_RELEASED (2) when it is alive but has let go of NVML on request (no
 * GPU is published until it takes it back: not a dead daemon, not a failure). */
static inline int gpupeek_liveness(const struct gpupeek_status *st)
{
    if (st->state == GPUPEEK_DAEMON_STOPPED)
        return GPUPEEK_ERR_NO_DAEMON;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t age = now > st->heartbeat_mono_ns ? now - st->heartbeat_mono_ns : 0;
    uint64_t limit = st->period_ns > UINT64_MAX / GPUPEEK_STALE_PERIODS
                         ? UINT64_MAX
                         : st->period_ns * GPUPEEK_STALE_PERIODS;
    if (limit < 1000000000u)
        limit = 1000000000u;
    if (age > limit)
        return GPUPEEK_ERR_STALE;
    if (st->state == GPUPEEK_DAEMON_LIVE)
        return GPUPEEK_OK;
    if (st->state == GPUPEEK_DAEMON_NVML_ERROR)
        return GPUPEEK_LIVE_NVML_ERROR;
    if (st->state == GPUPEEK_DAEMON_RELEASED)
        return GPUPEEK_LIVE_RELEASED;
    return GPUPEEK_ERR_NO_DAEMON;
}

/* Whether a GPU record's values are current: only an OK GPU was sampled this tick. An
 * asleep GPU, one whose driver is not responding, a lost or a failing one keeps at most
 * its identity; whatever else its record holds must not be shown as current. */
static inline int gpupeek_gpu_current(const struct gpupeek_gpu *g)
{
    return g->state == GPUPEEK_GPU_OK;
}

#endif /* GPUPEEK_H */
