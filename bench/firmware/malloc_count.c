/* The C heap in use, for bench/firmware/tls.py: an LD_PRELOAD shim counting glibc's
 * malloc/calloc/realloc/free (usable sizes) in the MicroPython unix port's process, read
 * back through getenv("MALLOC_IN_USE") (os.getenv on the board). mbedTLS allocates there
 * on the unix port; on a Pico W it allocates from the MicroPython heap instead. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern char **environ;
static long in_use;
void *malloc(size_t n) { void *p = __libc_malloc(n); if (p) __atomic_add_fetch(&in_use, (long)malloc_usable_size(p), __ATOMIC_RELAXED); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); if (p) __atomic_add_fetch(&in_use, (long)malloc_usable_size(p), __ATOMIC_RELAXED); return p; }
void free(void *p) { if (p) __atomic_sub_fetch(&in_use, (long)malloc_usable_size(p), __ATOMIC_RELAXED); __libc_free(p); }
void *realloc(void *p, size_t n) { long old = p ? (long)malloc_usable_size(p) : 0; void *q = __libc_realloc(p, n); if (q) __atomic_add_fetch(&in_use, (long)malloc_usable_size(q) - old, __ATOMIC_RELAXED); else if (p && n == 0) __atomic_sub_fetch(&in_use, old, __ATOMIC_RELAXED); return q; }
char *getenv(const char *name) {
    static char buf[32];
    if (strcmp(name, "MALLOC_IN_USE") == 0) { snprintf(buf, sizeof buf, "%ld", in_use); return buf; }
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++) if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}
