/* The C reader's seqlock patience (gpupeek_give_up), on a block of shared memory and a
 * writer process: a write held mid-way for 10 ms (a writer preempted on a loaded
 * machine) is waited for and read; a block left odd (a writer that died mid-write) is
 * reported stale, after GPUPEEK_STALE_AFTER_NS. Prints one line per case; exits 0 when
 * both hold. Built and run by tests/e2e/tests/e2e/contrib.rs. */
#include "gpupeek.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void)
{
    char path[] = "/tmp/gpupeek-patience-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || unlink(path) != 0 || ftruncate(fd, 64) != 0) {
        perror("temporary file");
        return 2;
    }
    _Atomic uint64_t *words = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (words == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    struct gpupeek_segment seg = {.words = words, .size = 64};
    uint64_t out[8];
    int ok = 1;

    /* A writer that began a write and finishes it 10 ms later. */
    atomic_store(&words[0], 1);
    pid_t child = fork();
    if (child == 0) {
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
        atomic_store(&words[1], 42);
        atomic_store(&words[0], 2);
        _exit(0);
    }
    int rc = gpupeek_read_block(&seg, 0, 64, out, sizeof out);
    waitpid(child, NULL, 0);
    printf("preempted writer: rc=%d seq=%llu word=%llu\n", rc,
           (unsigned long long)atomic_load(&words[0]), (unsigned long long)out[1]);
    ok &= rc == GPUPEEK_OK && out[1] == 42;

    /* A writer that died mid-write. */
    atomic_store(&words[0], 7);
    uint64_t start = now_ns();
    rc = gpupeek_read_block(&seg, 0, 64, out, sizeof out);
    uint64_t took = now_ns() - start;
    printf("dead writer: rc=%d after %llu ms\n", rc, (unsigned long long)(took / 1000000));
    ok &= rc == GPUPEEK_ERR_STALE && took >= GPUPEEK_STALE_AFTER_NS;
    return ok ? 0 : 1;
}
