/*
 * gpupeek-read: an example reader of gpupeekd's segment, using only gpupeek.h.
 *
 *   cc -std=c11 -O2 -Wall -Wextra -o gpupeek-read gpupeek-read.c
 *   ./gpupeek-read [--history] [SEGMENT-NAME]   (default: $GPUPEEK_SHM, else "gpupeek")
 *
 * Prints one line for the daemon, one per GPU, one per process (its whole command name
 * and command line from the text pool, ABI 1.5; gi/ci: its MIG instance ids) and one per MIG device (`mig`, ABI 1.4), as KEY=VALUE pairs; a value the GPU does
 * not report is N/A. With --history, then for each GPU a `history`
 * line (step_ns, samples written) and a `sample` line per sample of its ring, oldest
 * first, `n` counting the samples the daemon appended (a gap has every value N/A). Takes a snapshot consistent across records
 * (retaken while the generation word moves). Exit status as gpupeek(1): 0 ok, 3 no
 * daemon, 4 stale, 5 NVML error, 6 ABI mismatch, 7 untrusted, 8 corrupt, 9 OS error,
 * 10 daemon released the driver on request (GPU reset, MIG change). A GPU that is not
 * `ok` (asleep, lost, failing, driver not responding) shows its identity and N/A for
 * every value.
 */
#include "gpupeek.h"

#include <inttypes.h>

#define MAX_GPUS 64
#define MAX_PROCS 1024
#define MAX_MIGS 448

static struct gpupeek_gpu gpus[MAX_GPUS];
static struct gpupeek_proc procs[MAX_PROCS];
/* The text pool (ABI 1.5): 2 KiB a process slot. */
static char pool_text[MAX_PROCS * 2048];
static char line_buf[32 * 1024 + 1];
static struct gpupeek_mig migs[MAX_MIGS];
static struct gpupeek_history_sample samples[GPUPEEK_MAX_HISTORY_SLOTS];

static void put_u64(const char *key, uint64_t valid, uint64_t bit, uint64_t value)
{
    if (valid & bit)
        printf(" %s=%" PRIu64, key, value);
    else
        printf(" %s=N/A", key);
}

static void put_str(const char *key, uint64_t valid, uint64_t bit, const char *src, size_t len)
{
    char buf[400];
    gpupeek_copy_string(buf, sizeof buf, src, len);
    printf(" %s=\"%s\"", key, (valid & bit) ? buf : "N/A");
}

/* The process's whole command name and command line from the text pool, where it has
 * them (else the first 31 and 327 bytes the record holds); the command line's arguments
 * joined by spaces, quotes and control bytes shown as '?'. */
static void put_command(const struct gpupeek_proc *p, size_t pool_len)
{
    const char *s;
    size_t len;
    if (gpupeek_proc_full_command(p, pool_text, pool_len, &s, &len)) {
        gpupeek_copy_string(line_buf, sizeof line_buf, s, len);
        printf(" command=\"%s\"", line_buf);
    } else {
        put_str("command", p->valid, GPUPEEK_PROC_COMMAND, p->command, sizeof p->command);
    }
    if (!(p->valid & GPUPEEK_PROC_CMDLINE)) {
        printf(" cmdline=\"N/A\"");
        return;
    }
    if (!gpupeek_proc_full_cmdline(p, pool_text, pool_len, &s, &len)) {
        s = p->cmdline;
        len = strnlen(p->cmdline, sizeof p->cmdline - 1);
        /* The record's copy ends at its last NUL-terminated argument. */
        while (len > 0 && s[len - 1] == '\0')
            len--;
    }
    size_t n = len < sizeof line_buf - 1 ? len : sizeof line_buf - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        line_buf[i] = c == '\0' ? ' ' : (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char)c;
    }
    line_buf[n] = '\0';
    printf(" cmdline=\"%s%s\"", line_buf, p->cmdline_len > len ? "..." : "");
}

static const char *gpu_state(uint32_t state)
{
    /* One word each, as KEY=VALUE output needs: "not_responding" for "not responding". */
    static const char *names[] = {"empty", "ok",   "lost",          "error",
                                  "suspended", "idle", "not_responding"};
    return state < sizeof names / sizeof names[0] ? names[state] : "unknown";
}

static int fail(const struct gpupeek_segment *seg, int err)
{
    /* A read that gave up on a seqlock leaves no reason; every other failure names one. */
    const char *why = seg->why[0] != '\0'     ? seg->why
                      : err == GPUPEEK_ERR_STALE ? "a record stayed mid-write (stale daemon?)"
                                                 : "failed";
    fprintf(stderr, "gpupeek-read: %s\n", why);
    return gpupeek_exit_status(err);
}

/* fail() for a record read under status `st`: a record that stayed mid-write while the
 * daemon's heartbeat has stopped is the daemon stopped or hung mid-write, and is named
 * as such rather than as a torn record. */
static int fail_record(struct gpupeek_segment *seg, const struct gpupeek_status *st, int err)
{
    if (err == GPUPEEK_ERR_STALE && seg->why[0] == '\0' &&
        gpupeek_liveness(st) == GPUPEEK_ERR_STALE)
        snprintf(seg->why, sizeof seg->why, "the daemon is stale (no heartbeat)");
    return fail(seg, err);
}

/* Prints GPU slot `slot`'s history ring. */
static int print_history(struct gpupeek_segment *seg, uint32_t slot)
{
    struct gpupeek_history_head head;
    size_t n = 0;
    int err = gpupeek_read_history(seg, slot, &head, samples, GPUPEEK_MAX_HISTORY_SLOTS, &n);
    if (err != GPUPEEK_OK) {
        snprintf(seg->why, sizeof seg->why, "history ring of GPU slot %" PRIu32 " unreadable",
                 slot);
        return err;
    }
    printf("history gpu=%" PRIu32 " step_ns=%" PRIu64 " written=%" PRIu64 " samples=%zu\n",
           slot, head.step_ns, head.written, n);
    for (size_t i = 0; i < n; i++) {
        const struct gpupeek_history_sample *s = &samples[i];
        printf("sample gpu=%" PRIu32 " n=%" PRIu64 " sample_mono_ns=%" PRIu64, slot,
               head.written - n + i, s->sample_mono_ns);
        put_u64("util_gpu_pct", s->valid, GPUPEEK_HISTORY_UTILIZATION, s->util_gpu_pct);
        put_u64("util_mem_pct", s->valid, GPUPEEK_HISTORY_UTIL_MEM, s->util_mem_pct);
        put_u64("mem_used_mib", s->valid, GPUPEEK_HISTORY_MEMORY, s->mem_used_mib);
        put_u64("power_draw_mw", s->valid, GPUPEEK_HISTORY_POWER_DRAW, s->power_draw_mw);
        if (s->valid & GPUPEEK_HISTORY_TEMPERATURE)
            printf(" temp_gpu_c=%d\n", (int)s->temp_gpu_c);
        else
            printf(" temp_gpu_c=N/A\n");
    }
    return GPUPEEK_OK;
}

int main(int argc, char **argv)
{
    struct gpupeek_segment seg;
    int history = argc > 1 && strcmp(argv[1], "--history") == 0;
    if (history) {
        argv++;
        argc--;
    }
    int err = gpupeek_open(&seg, argc > 1 ? argv[1] : NULL);
    if (err != GPUPEEK_OK)
        return fail(&seg, err);

    struct gpupeek_status st;
    struct gpupeek_proc_head head;
    struct gpupeek_mig_head mig_head;
    size_t nprocs = 0, nmigs = 0, pool_len = 0;
    uint32_t ngpus = 0;
    uint64_t generation = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        generation = gpupeek_generation(&seg);
        if ((err = gpupeek_read_status(&seg, &st)) != GPUPEEK_OK)
            return fail(&seg, err);
        ngpus = st.gpu_count;
        if (ngpus > seg.header.gpu_capacity || ngpus > MAX_GPUS) {
            snprintf(seg.why, sizeof seg.why, "GPU count %" PRIu32 " exceeds capacity", ngpus);
            return fail(&seg, GPUPEEK_ERR_CORRUPT);
        }
        for (uint32_t i = 0; i < ngpus; i++)
            if ((err = gpupeek_read_gpu(&seg, i, &gpus[i])) != GPUPEEK_OK)
                return fail_record(&seg, &st, err);
        err = gpupeek_read_procs_text(&seg, &head, procs, MAX_PROCS, &nprocs, pool_text,
                                      sizeof pool_text, &pool_len);
        if (err == GPUPEEK_ERR_CORRUPT)
            snprintf(seg.why, sizeof seg.why, "process table or text pool out of bounds");
        if (err != GPUPEEK_OK)
            return fail_record(&seg, &st, err);
        err = gpupeek_read_mig(&seg, &mig_head, migs, MAX_MIGS, &nmigs);
        if (err == GPUPEEK_ERR_CORRUPT)
            snprintf(seg.why, sizeof seg.why, "MIG count exceeds capacity");
        if (err != GPUPEEK_OK)
            return fail_record(&seg, &st, err);
        if (gpupeek_generation(&seg) == generation)
            break;
    }

    int live = gpupeek_liveness(&st);
    if (live == 1) {
        char msg[129];
        gpupeek_copy_string(msg, sizeof msg, st.error_message, sizeof st.error_message);
        fprintf(stderr, "gpupeek-read: NVML error %" PRId32 ": %s\n", st.nvml_error_code, msg);
        gpupeek_close(&seg);
        return 5;
    }
    if (live == GPUPEEK_LIVE_RELEASED) {
        fprintf(stderr, "gpupeek-read: the daemon has let go of the driver on request "
                        "(GPU reset or MIG change); `gpupeekd --resume` takes it back\n");
        gpupeek_close(&seg);
        return 10;
    }
    if (live != GPUPEEK_OK) {
        snprintf(seg.why, sizeof seg.why, "%s",
                 live == GPUPEEK_ERR_STALE ? "the daemon is stale (no heartbeat)"
                                           : "the daemon is not running");
        return fail(&seg, live);
    }

    printf("daemon abi=%" PRIu32 ".%" PRIu32 " generation=%" PRIu64 " period_ns=%" PRIu64,
           seg.header.abi_major, seg.header.abi_minor, generation, st.period_ns);
    put_str("driver", st.valid, GPUPEEK_STATUS_DRIVER_VERSION, st.driver_version,
            sizeof st.driver_version);
    printf(" gpus=%" PRIu32 " processes=%zu\n", ngpus, nprocs);
    for (uint32_t i = 0; i < ngpus; i++) {
        struct gpupeek_gpu *g = &gpus[i];
        if (!gpupeek_gpu_current(g))
            g->valid &= GPUPEEK_GPU_NAME | GPUPEEK_GPU_UUID | GPUPEEK_GPU_PCI_BUS_ID;
        printf("gpu index=%" PRIu32 " state=%s", g->index, gpu_state(g->state));
        put_str("name", g->valid, GPUPEEK_GPU_NAME, g->name, sizeof g->name);
        put_str("uuid", g->valid, GPUPEEK_GPU_UUID, g->uuid, sizeof g->uuid);
        put_u64("mem_total_bytes", g->valid, GPUPEEK_GPU_MEMORY, g->mem_total_bytes);
        put_u64("mem_used_bytes", g->valid, GPUPEEK_GPU_MEMORY, g->mem_used_bytes);
        put_u64("util_gpu_pct", g->valid, GPUPEEK_GPU_UTILIZATION, g->util_gpu_pct);
        if (g->valid & GPUPEEK_GPU_TEMPERATURE)
            printf(" temp_gpu_c=%" PRId32, g->temp_gpu_c);
        else
            printf(" temp_gpu_c=N/A");
        put_u64("fan_speed_pct", g->valid, GPUPEEK_GPU_FAN_SPEED, g->fan_speed_pct);
        put_u64("power_draw_mw", g->valid, GPUPEEK_GPU_POWER_DRAW, g->power_draw_mw);
        put_u64("power_limit_mw", g->valid, GPUPEEK_GPU_POWER_LIMIT, g->power_limit_mw);
        printf("\n");
    }
    for (size_t i = 0; i < nprocs; i++) {
        const struct gpupeek_proc *p = &procs[i];
        printf("proc gpu=%" PRIu32 " pid=%" PRIu32, p->gpu_index, p->pid);
        put_u64("gpu_mem_bytes", p->valid, GPUPEEK_PROC_GPU_MEMORY, p->gpu_mem_bytes);
        put_str("user", p->valid, GPUPEEK_PROC_USER, p->user, sizeof p->user);
        put_command(p, pool_len);
        /* 0xFFFFFFFF: not in a MIG instance. */
        put_u64("gi", p->gpu_instance_id != UINT32_MAX, 1, p->gpu_instance_id);
        put_u64("ci", p->compute_instance_id != UINT32_MAX, 1, p->compute_instance_id);
        printf("\n");
    }
    for (size_t i = 0; i < nmigs; i++) {
        const struct gpupeek_mig *m = &migs[i];
        printf("mig gpu=%" PRIu32 " gi=%" PRIu32 " ci=%" PRIu32, m->gpu_index,
               m->gpu_instance_id, m->compute_instance_id);
        put_str("profile", m->valid, GPUPEEK_MIG_PROFILE, m->profile, sizeof m->profile);
        put_str("uuid", m->valid, GPUPEEK_MIG_UUID, m->uuid, sizeof m->uuid);
        put_u64("mem_total_bytes", m->valid, GPUPEEK_MIG_MEMORY, m->mem_total_bytes);
        put_u64("mem_used_bytes", m->valid, GPUPEEK_MIG_MEMORY, m->mem_used_bytes);
        put_u64("sm_count", m->valid, GPUPEEK_MIG_SM_COUNT, m->sm_count);
        printf("\n");
    }
    for (uint32_t i = 0; history && i < ngpus; i++)
        if ((err = print_history(&seg, i)) != GPUPEEK_OK)
            return fail(&seg, err);
    gpupeek_close(&seg);
    return 0;
}
