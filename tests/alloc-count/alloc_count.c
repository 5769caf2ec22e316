/* alloc_count.c: an LD_PRELOAD shim that counts heap allocations by the object that
 * asked for them, so a test or benchmark can tell the daemon's own allocations from
 * the fake NVML library's.
 *
 * Build: cc -shared -fPIC -O2 -o libgpupeek_alloc_count.so alloc_count.c
 * Use:   GPUPEEK_ALLOC_COUNT=FILE LD_PRELOAD=.../libgpupeek_alloc_count.so gpupeekd ...
 *
 * FILE is created (or truncated) to 32 bytes and mapped shared; the shim keeps four
 * little-endian u64 counters in it, updated atomically, readable at any time:
 *   0: allocations made by code in the main program (gpupeekd, with its Rust std),
 *   1: by code in a library whose file name contains "fake_nvml",
 *   2: by any other object (libc internals, the dynamic loader, ...),
 *   3: bytes asked for, all objects.
 * An allocation is malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign,
 * valloc or pvalloc; the caller is the return address of that call, found with dladdr.
 * free is not counted. Allocations before the file is mapped (the loader's own, at
 * start-up) are not counted either.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static uint64_t *counters;     /* the mapped file, NULL until set up */
static void *main_base;        /* load address of the main program */
/* This thread is already counting: do not recurse. Initial-exec, so that reaching it
 * never allocates. */
static __thread int inside __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void setup(void)
{
    const char *path = getenv("GPUPEEK_ALLOC_COUNT");
    if (path == NULL)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (ftruncate(fd, 4 * sizeof(uint64_t)) == 0) {
        void *map = mmap(NULL, 4 * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            /* The main program is the first entry of the link map. */
            if (_r_debug.r_map != NULL)
                main_base = (void *)_r_debug.r_map->l_addr;
            counters = map;
        }
    }
    close(fd);
}

static void count(void *caller, size_t bytes)
{
    if (counters == NULL || inside)
        return;
    inside = 1;
    int slot = 2;
    Dl_info info;
    if (dladdr(caller, &info) != 0) {
        if (strstr(info.dli_fname, "fake_nvml") != NULL)
            slot = 1;
        else if (info.dli_fbase == main_base || info.dli_fname[0] == '\0')
            slot = 0;
        else {
            /* A main program that is not position-independent has l_addr 0: compare
             * by name with /proc/self/exe's target. */
            static char exe[4096];
            static int have_exe;
            if (!have_exe) {
                ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
                exe[n > 0 ? n : 0] = '\0';
                have_exe = 1;
            }
            if (exe[0] != '\0' && strcmp(info.dli_fname, exe) == 0)
                slot = 0;
        }
    }
    __atomic_fetch_add(&counters[slot], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&counters[3], bytes, __ATOMIC_RELAXED);
    inside = 0;
}

#define CALLER __builtin_extract_return_addr(__builtin_return_address(0))

void *malloc(size_t size)
{
    count(CALLER, size);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    count(CALLER, n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    count(CALLER, size);
    return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
    count(CALLER, size);
    return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
    count(CALLER, size);
    return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    count(CALLER, size);
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return 22; /* EINVAL */
    void *p = __libc_memalign(align, size);
    if (p == NULL)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void *valloc(size_t size)
{
    count(CALLER, size);
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    count(CALLER, size);
    return __libc_memalign(page, (size + page - 1) / page * page);
}
