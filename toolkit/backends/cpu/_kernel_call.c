/* The hot path of a compiled kernel call: ``call(address, start, end, *arrays)`` calls the
 * kernel at ``address`` with the arrays' data pointers and the row range, without ctypes'
 * argument conversion (about 1.6 µs a call through ctypes, about 0.1 µs here). The GIL is
 * released while the kernel runs, as ctypes does. Built from source by pip when a C compiler
 * is present; toolkit falls back to ctypes when it is not (``executor._native_call``). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define MAX_POINTERS 16
/* a kernel of more buffers (a fusion given many offsets as operands) is called through its
 * packed entry, ``name__packed(P *buffers, start, end)``, which native_loop encodes instead */
#define MAX_KERNEL_POINTERS 128
typedef void *P;
typedef int64_t I;

static int call_with(void *fn, Py_ssize_t n, P *p, I start, I end) {
    switch (n) {
    case 1: ((void (*)(P, I, I))fn)(p[0], start, end); return 0;
    case 2: ((void (*)(P, P, I, I))fn)(p[0], p[1], start, end); return 0;
    case 3: ((void (*)(P, P, P, I, I))fn)(p[0], p[1], p[2], start, end); return 0;
    case 4: ((void (*)(P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], start, end); return 0;
    case 5: ((void (*)(P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], start, end); return 0;
    case 6: ((void (*)(P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], start, end); return 0;
    case 7: ((void (*)(P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], start, end); return 0;
    case 8: ((void (*)(P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], start, end); return 0;
    case 9: ((void (*)(P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], start, end); return 0;
    case 10: ((void (*)(P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], start, end); return 0;
    case 11: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], start, end); return 0;
    case 12: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], start, end); return 0;
    case 13: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], start, end); return 0;
    case 14: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], start, end); return 0;
    case 15: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], start, end); return 0;
    case 16: ((void (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, I, I))fn)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], start, end); return 0;
    default: return -1;
    }
}

static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4 || nargs - 3 > MAX_POINTERS) {
        PyErr_SetString(PyExc_TypeError, "call(address, start, end, *arrays): 1 to 16 arrays");
        return NULL;
    }
    void *fn = PyLong_AsVoidPtr(args[0]);
    I start = PyLong_AsLongLong(args[1]);
    I end = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n = nargs - 3;
    Py_buffer views[MAX_POINTERS];
    P pointers[MAX_POINTERS];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GetBuffer(args[3 + i], &views[i], PyBUF_ANY_CONTIGUOUS) < 0) {
            for (Py_ssize_t j = 0; j < i; j++) PyBuffer_Release(&views[j]);
            return NULL;
        }
        pointers[i] = views[i].buf;
    }
    Py_BEGIN_ALLOW_THREADS
    call_with(fn, n, pointers, start, end);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) PyBuffer_Release(&views[i]);
    Py_RETURN_NONE;
}

/* ---- run_loop: a while loop driven natively --------------------------------------------------
 * ``run_loop(program, buffers, limit)`` runs a loop whose condition and body are each a list of
 * kernel calls, BLAS matrix products and copies over a table of buffers (native_loop.py builds
 * both), until the condition's predicate byte is 0 or ``limit`` trips; returns the trips.
 * program (int64): [n_cond, n_body, predicate index, then the ops]; an op is
 *   0 kernel: address, start, end, n, index * n (n > MAX_POINTERS: the packed entry's address)
 *   1 gemm:   address, ilp64, type, trans_a, trans_b, m, n, k, lda, ldb, ldc, a, b, c
 *   2 copy:   destination, source, bytes
 *   3 dot:    address, ilp64, type, n, x, y, out (a vector dot product)
 *   4 gemv:   address, ilp64, type, order, m, n, lda, incx, incy, a, x, y (y = A^T x, A m x n)
 *   5 gemm of views: as 1, with a, a offset, b, b offset, c (offsets in elements)
 *   6 dot of views:  address, ilp64, type, n, x, x offset, incx, y, y offset, incy, out
 *   7 gemv of views: as 4, with a, a offset, x, x offset, y
 *   8 while:  a loop inside a program (run_while)
 *   9 split kernel: address, start, end, grain, threads, linger, n, index * n: op 0's kernel
 *     with its range cut into chunks (multiples of grain) that up to ``threads`` threads take
 *     (run_split); linger 1: another split kernel follows soon, so the helpers spin for it
 *  10 batched gemm of views: as 5, then batch, a stride, b stride, c stride: op 5 once per
 *     batch element, each operand and the result that many elements further on (a strided
 *     batched product, one GEMM a batch element as NumPy's matmul makes them)
 * (an op code a build does not know would be read as a copy: OP_CODES says which it knows) */
typedef void (*sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                          const float *, int64_t, float, float *, int64_t);
typedef void (*dgemm64_t)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                          const double *, int64_t, double, double *, int64_t);
typedef void (*sgemm32_t)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                          float *, int);
typedef void (*dgemm32_t)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                          double, double *, int);
/* the complex routines take alpha and beta by address (cblas_cgemm, cblas_zgemm) */
typedef void (*xgemm64_t)(int, int, int, int64_t, int64_t, int64_t, const void *, const void *, int64_t,
                          const void *, int64_t, const void *, void *, int64_t);
typedef void (*xgemm32_t)(int, int, int, int, int, int, const void *, const void *, int, const void *, int,
                          const void *, void *, int);

typedef double (*ddot64_t)(int64_t, const double *, int64_t, const double *, int64_t);
typedef float (*sdot64_t)(int64_t, const float *, int64_t, const float *, int64_t);
typedef double (*ddot32_t)(int, const double *, int, const double *, int);
typedef float (*sdot32_t)(int, const float *, int, const float *, int);
/* cblas_cdotu_sub, cblas_zdotu_sub: the unconjugated product, written through the last argument */
typedef void (*xdot64_t)(int64_t, const void *, int64_t, const void *, int64_t, void *);
typedef void (*xdot32_t)(int, const void *, int, const void *, int, void *);

typedef void (*sgemv64_t)(int, int, int64_t, int64_t, float, const float *, int64_t, const float *,
                          int64_t, float, float *, int64_t);
typedef void (*dgemv64_t)(int, int, int64_t, int64_t, double, const double *, int64_t,
                          const double *, int64_t, double, double *, int64_t);
typedef void (*sgemv32_t)(int, int, int, int, float, const float *, int, const float *, int, float,
                          float *, int);
typedef void (*dgemv32_t)(int, int, int, int, double, const double *, int, const double *, int,
                          double, double *, int);
typedef void (*xgemv64_t)(int, int, int64_t, int64_t, const void *, const void *, int64_t,
                          const void *, int64_t, const void *, void *, int64_t);
typedef void (*xgemv32_t)(int, int, int, int, const void *, const void *, int, const void *, int,
                          const void *, void *, int);

/* The element type of a BLAS op (its ``type`` field): 0 float32, 1 float64, 2 complex64,
 * 3 complex128, NumPy's four BLAS types (BLAS_TYPES says a build knows all four; one before it
 * read the field as "float64 or not"). */
#define BLAS_COMPLEX(type) ((type) >= 2)
static const float ONE_C64[2] = {1.f, 0.f}, ZERO_C64[2] = {0.f, 0.f};
static const double ONE_C128[2] = {1., 0.}, ZERO_C128[2] = {0., 0.};

/* NumPy's oneF/oneD and zeroF/zeroD: the complex routines' alpha and beta, by address */
static const void *complex_one(I type) {
    return type == 3 ? (const void *)ONE_C128 : (const void *)ONE_C64;
}

static const void *complex_zero(I type) {
    return type == 3 ? (const void *)ZERO_C128 : (const void *)ZERO_C64;
}

static size_t element_bytes(I type) {
    return type == 0 ? 4 : type == 3 ? 16 : 8;
}

/* The BLAS calls of ops 1, 3 and 4 and of their view forms 5, 6 and 7 (an operand read in place
 * in a larger buffer: its pointer plus an element offset, with that buffer's leading dimension
 * or increment, as NumPy's matmul passes a view: native_loop._gemm_op). Alpha 1 and beta 0, as
 * NumPy passes them (its oneF/oneD and zeroF/zeroD for the complex types). */
static void blas_gemm(const I *op, int ta, int tb, P a, P b, P c) {
    void *fn = (void *)op[1];
    const I type = op[3];
    if (BLAS_COMPLEX(type)) {
        const void *one = complex_one(type), *zero = complex_zero(type);
        if (op[2])
            ((xgemm64_t)fn)(101, ta, tb, op[6], op[7], op[8], one, a, op[9], b, op[10], zero, c,
                            op[11]);
        else
            ((xgemm32_t)fn)(101, ta, tb, (int)op[6], (int)op[7], (int)op[8], one, a, (int)op[9],
                            b, (int)op[10], zero, c, (int)op[11]);
    } else if (op[2] && type)
        ((dgemm64_t)fn)(101, ta, tb, op[6], op[7], op[8], 1.0, a, op[9], b, op[10], 0.0, c, op[11]);
    else if (op[2])
        ((sgemm64_t)fn)(101, ta, tb, op[6], op[7], op[8], 1.0f, a, op[9], b, op[10], 0.0f, c, op[11]);
    else if (type)
        ((dgemm32_t)fn)(101, ta, tb, (int)op[6], (int)op[7], (int)op[8], 1.0, a, (int)op[9], b,
                        (int)op[10], 0.0, c, (int)op[11]);
    else
        ((sgemm32_t)fn)(101, ta, tb, (int)op[6], (int)op[7], (int)op[8], 1.0f, a, (int)op[9], b,
                        (int)op[10], 0.0f, c, (int)op[11]);
}

/* a vector dot product as NumPy's matmul computes one: 0 + BLAS dot (so -0.0 sums to +0.0, as
 * NumPy's accumulator starting at zero gives); a complex one sums each part in a double, as
 * NumPy's CFLOAT_dot and CDOUBLE_dot do */
static void blas_dot(void *fn, I ilp64, I type, I n, P x, I incx, P y, I incy, P out) {
    if (type == 3) {
        double got[2];
        if (ilp64) ((xdot64_t)fn)(n, x, incx, y, incy, got);
        else ((xdot32_t)fn)((int)n, x, (int)incx, y, (int)incy, got);
        ((double *)out)[0] = 0. + got[0];
        ((double *)out)[1] = 0. + got[1];
    } else if (type == 2) {
        float got[2];
        if (ilp64) ((xdot64_t)fn)(n, x, incx, y, incy, got);
        else ((xdot32_t)fn)((int)n, x, (int)incx, y, (int)incy, got);
        ((float *)out)[0] = (float)(0. + (double)got[0]);
        ((float *)out)[1] = (float)(0. + (double)got[1]);
    } else if (type) {
        double sum = 0.;
        sum += ilp64 ? ((ddot64_t)fn)(n, x, incx, y, incy)
                     : ((ddot32_t)fn)((int)n, x, (int)incx, y, (int)incy);
        *(double *)out = sum;
    } else {
        float sum = 0.f;
        sum += ilp64 ? ((sdot64_t)fn)(n, x, incx, y, incy)
                     : ((sdot32_t)fn)((int)n, x, (int)incx, y, (int)incy);
        *(float *)out = sum;
    }
}

/* a matrix-vector product as NumPy's matmul makes it: cblas_?gemv(order, CblasTrans, ...),
 * alpha 1, beta 0 (native_loop._gemv_op). y is zeroed first: beta 0 must not let a NaN left in
 * a reused buffer through, whatever the BLAS does with it. op: the gemv fields from op[3] on. */
static void blas_gemv(void *fn, I ilp64, const I *f, P a, P x, P y) {
    I type = f[0], m = f[2], n = f[3], lda = f[4], incx = f[5], incy = f[6];
    int order = (int)f[1];
    size_t bytes = element_bytes(type);
    for (I i = 0; i < n; i++) memset((char *)y + (size_t)(i * incy) * bytes, 0, bytes);
    if (BLAS_COMPLEX(type)) {
        const void *one = complex_one(type), *zero = complex_zero(type);
        if (ilp64)
            ((xgemv64_t)fn)(order, 112, m, n, one, a, lda, x, incx, zero, y, incy);
        else
            ((xgemv32_t)fn)(order, 112, (int)m, (int)n, one, a, (int)lda, x, (int)incx, zero, y,
                            (int)incy);
    } else if (ilp64 && type)
        ((dgemv64_t)fn)(order, 112, m, n, 1.0, a, lda, x, incx, 0.0, y, incy);
    else if (ilp64)
        ((sgemv64_t)fn)(order, 112, m, n, 1.0f, a, lda, x, incx, 0.0f, y, incy);
    else if (type)
        ((dgemv32_t)fn)(order, 112, (int)m, (int)n, 1.0, a, (int)lda, x, (int)incx, 0.0, y,
                        (int)incy);
    else
        ((sgemv32_t)fn)(order, 112, (int)m, (int)n, 1.0f, a, (int)lda, x, (int)incx, 0.0f, y,
                        (int)incy);
}

/* the element at ``offset`` (in elements of the op's type) of the buffer at table[index] */
static P at(P *table, I index, I offset, I type) {
    return (char *)table[index] + (size_t)offset * element_bytes(type);
}

/* ---- split kernels: a native worker pool --------------------------------------------------
 * A kernel of mid-size work (op 9) runs split over threads from inside run_ops, with the GIL
 * released: the calling thread and up to ``threads - 1`` helpers take chunks of its range in
 * turn until none is left. Handing work to Python's pool cost ~70 µs (executor.py); a helper
 * that is spinning takes a chunk within a microsecond, one that sleeps within ~20 µs, and the
 * caller does not wait for a helper that has not woken: it takes the chunks itself.
 * The chunks cover the range exactly, each written by one thread, so the bits are those of one
 * call over the whole range (the kernels split over rows or elements, never inside a sum).
 * One split runs at a time: a second caller thread (host devices of an SPMD run) runs its
 * kernel on its own thread, as it would with a budget of one. */
/* a spin-wait's pause: x86's PAUSE, AArch64's YIELD, nothing elsewhere (the file builds on any
 * platform a C compiler targets; the extension is optional, so a build error would silently
 * lose every native path) */
#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif
#define MAX_HELPERS 63
#define CHUNKS_PER_THREAD 4
#define LINGER_SECONDS 50e-6 /* a helper told to linger spins this long for the next split */

typedef struct {
    void *fn;
    I n;
    P pointers[MAX_KERNEL_POINTERS];
    I start, chunk, end, chunks, helpers;
    int linger;
} Split;

static Split split_job;
/* the generation of the posted split (high 32 bits) and its next unclaimed chunk (low 32) */
static _Atomic uint64_t split_claim;
static atomic_llong split_finished; /* chunks of the posted split that are done */
static atomic_int split_sleepers;
static pthread_mutex_t split_lock = PTHREAD_MUTEX_INITIALIZER; /* one split at a time */
static pthread_mutex_t split_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t split_wake = PTHREAD_COND_INITIALIZER;
static int split_helpers; /* helper threads started in this process */
static _Thread_local int thread_budget; /* 0: no cap (executor.kernel_threads sets one) */

static double seconds_now(void);

static void split_chunk(const Split *job, I k) {
    I begin = job->start + k * job->chunk;
    I end = begin + job->chunk < job->end ? begin + job->chunk : job->end;
    if (job->n <= MAX_POINTERS)
        call_with(job->fn, (Py_ssize_t)job->n, (P *)job->pointers, begin, end);
    else
        ((void (*)(P *, I, I))job->fn)((P *)job->pointers, begin, end);
}

/* take chunks of generation ``generation`` until none is left (or it is no longer posted) */
static void split_take(uint64_t generation) {
    for (;;) {
        uint64_t seen = atomic_load(&split_claim);
        if ((seen >> 32) != generation) return;
        I k = (I)(seen & 0xffffffffu);
        if (k >= split_job.chunks) return; /* (a newer job's count: the exchange below fails) */
        if (!atomic_compare_exchange_weak(&split_claim, &seen, seen + 1)) continue;
        split_chunk(&split_job, k);
        atomic_fetch_add(&split_finished, 1);
    }
}

static void *split_helper(void *arg) {
    const I id = (I)(intptr_t)arg;
    uint64_t last = atomic_load(&split_claim) >> 32;
    for (;;) {
        uint64_t generation = atomic_load(&split_claim) >> 32;
        if (generation == last) {
            /* spin while the last split asked to linger, then sleep until the next is posted */
            /* (a helper past the split's budget sleeps at once: its cores are another's) */
            int linger = split_job.linger && id < split_job.helpers;
            double until = linger ? seconds_now() + LINGER_SECONDS : 0.;
            while ((atomic_load(&split_claim) >> 32) == last && linger && seconds_now() < until)
                for (int i = 0; i < 64; i++) CPU_RELAX();
            pthread_mutex_lock(&split_sleep_lock);
            atomic_fetch_add(&split_sleepers, 1);
            while ((atomic_load(&split_claim) >> 32) == last)
                pthread_cond_wait(&split_wake, &split_sleep_lock);
            atomic_fetch_sub(&split_sleepers, 1);
            pthread_mutex_unlock(&split_sleep_lock);
            continue;
        }
        last = generation;
        if (id < split_job.helpers) split_take(generation);
    }
    return NULL;
}

static void split_after_fork(void) { /* the child has none of the parent's helpers */
    split_helpers = 0;
    atomic_store(&split_sleepers, 0);
    pthread_mutex_init(&split_lock, NULL);
    pthread_mutex_init(&split_sleep_lock, NULL);
    pthread_cond_init(&split_wake, NULL);
}

/* op 9: see run_ops; returns the next op */
static const I *run_split(const I *op, P *table) {
    const I start = op[2], end = op[3], grain = op[4] > 0 ? op[4] : 1, n = op[7];
    I threads = op[5];
    if (thread_budget > 0 && thread_budget < threads) threads = thread_budget;
    if (threads > MAX_HELPERS + 1) threads = MAX_HELPERS + 1;
    const I units = (end - start + grain - 1) / grain;
    if (threads > units) threads = units;
    if (threads <= 1 || pthread_mutex_trylock(&split_lock) != 0) {
        P pointers[MAX_KERNEL_POINTERS];
        for (I i = 0; i < n; i++) pointers[i] = table[op[8 + i]];
        if (n <= MAX_POINTERS) call_with((void *)op[1], (Py_ssize_t)n, pointers, start, end);
        else ((void (*)(P *, I, I))(void *)op[1])(pointers, start, end);
        return op + 8 + n;
    }
    while (split_helpers < threads - 1) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thread, &attributes, split_helper,
                                    (void *)(intptr_t)split_helpers);
        pthread_attr_destroy(&attributes);
        if (failed) break;
        split_helpers++;
    }
    Split *job = &split_job;
    job->fn = (void *)op[1];
    job->n = n;
    for (I i = 0; i < n; i++) job->pointers[i] = table[op[8 + i]];
    I chunks = threads * CHUNKS_PER_THREAD < units ? threads * CHUNKS_PER_THREAD : units;
    job->chunk = (units + chunks - 1) / chunks * grain;
    job->chunks = (end - start + job->chunk - 1) / job->chunk;
    job->start = start;
    job->end = end;
    job->helpers = split_helpers < threads - 1 ? split_helpers : threads - 1;
    job->linger = (int)op[6];
    atomic_store(&split_finished, 0);
    /* (32 bits of generation, wrapping: compared as the claim word's high half holds them) */
    uint64_t generation = (uint32_t)((atomic_load(&split_claim) >> 32) + 1);
    atomic_store(&split_claim, generation << 32); /* posts the job (sequentially consistent) */
    if (atomic_load(&split_sleepers) > 0) {
        pthread_mutex_lock(&split_sleep_lock);
        pthread_cond_broadcast(&split_wake);
        pthread_mutex_unlock(&split_sleep_lock);
    }
    split_take(generation);
    /* (a helper that claimed a chunk may have been preempted: yield rather than spin long) */
    for (long spins = 0; atomic_load(&split_finished) < job->chunks; spins++)
        if (spins < 64) CPU_RELAX();
        else sched_yield();
    pthread_mutex_unlock(&split_lock);
    return op + 8 + n;
}

static const I *run_while(const I *op, P *table, I *trips);

static const I *run_ops(const I *op, I count, P *table) {
    P pointers[MAX_KERNEL_POINTERS];
    for (I o = 0; o < count; o++) {
        if (op[0] == 0) {
            I n = op[4];
            for (I i = 0; i < n; i++) pointers[i] = table[op[5 + i]];
            if (n <= MAX_POINTERS)
                call_with((void *)op[1], (Py_ssize_t)n, pointers, op[2], op[3]);
            else /* the packed entry: the buffers as one array */
                ((void (*)(P *, I, I))(void *)op[1])(pointers, op[2], op[3]);
            op += 5 + n;
        } else if (op[0] == 1 || op[0] == 5) {
            int ta = op[4] ? 112 : 111, tb = op[5] ? 112 : 111; /* CblasTrans : CblasNoTrans */
            if (op[0] == 1) {
                blas_gemm(op, ta, tb, table[op[12]], table[op[13]], table[op[14]]);
                op += 15;
            } else {
                blas_gemm(op, ta, tb, at(table, op[12], op[13], op[3]),
                          at(table, op[14], op[15], op[3]), table[op[16]]);
                op += 17;
            }
        } else if (op[0] == 3) {
            blas_dot((void *)op[1], op[2], op[3], op[4], table[op[5]], 1, table[op[6]], 1,
                     table[op[7]]);
            op += 8;
        } else if (op[0] == 6) {
            blas_dot((void *)op[1], op[2], op[3], op[4], at(table, op[5], op[6], op[3]), op[7],
                     at(table, op[8], op[9], op[3]), op[10], table[op[11]]);
            op += 12;
        } else if (op[0] == 4) {
            blas_gemv((void *)op[1], op[2], op + 3, table[op[10]], table[op[11]], table[op[12]]);
            op += 13;
        } else if (op[0] == 7) {
            blas_gemv((void *)op[1], op[2], op + 3, at(table, op[10], op[11], op[3]),
                      at(table, op[12], op[13], op[3]), table[op[14]]);
            op += 15;
        } else if (op[0] == 8) {
            op = run_while(op, table, NULL);
        } else if (op[0] == 9) {
            op = run_split(op, table);
        } else if (op[0] == 10) {
            int ta = op[4] ? 112 : 111, tb = op[5] ? 112 : 111;
            for (I b = 0; b < op[17]; b++)
                blas_gemm(op, ta, tb, at(table, op[12], op[13] + b * op[18], op[3]),
                          at(table, op[14], op[15] + b * op[19], op[3]),
                          at(table, op[16], b * op[20], op[3]));
            op += 21;
        } else {
            memcpy(table[op[1]], table[op[2]], (size_t)op[3]);
            op += 4;
        }
    }
    return op;
}

/* op 8, a while loop inside a program (native_program.while_op):
 *   8, n_local, n_state, arena bytes, program length,
 *   n_local entries (kind, value): 0 this table's buffer value, 1 the address value (a
 *     constant, or 0), 2 the arena at offset value, 3 state element value;
 *   n_state entries (mode, in, out, bytes): 0 the loop runs in table[in] (the plan gave it that
 *     buffer), 1 table[in] is copied into table[out] and the loop runs there, 2 the loop only
 *     reads table[in], 3 as 2 and table[in] is copied into table[out] (read after the loop);
 *   the loop's own program over its table: n_cond, n_body, predicate, then the ops (run_loop's).
 * The loop's temporaries live in an arena allocated for the run. */
static const I *run_while(const I *op, P *table, I *trips) {
    const I n_local = op[1], n_state = op[2], arena_bytes = op[3], length = op[4];
    const I *entries = op + 5;
    const I *states = entries + 2 * n_local;
    const I *code = states + 4 * n_state;
    char *arena = arena_bytes ? (char *)malloc((size_t)arena_bytes) : NULL;
    P *local = (P *)malloc((size_t)(n_local ? n_local : 1) * sizeof(P));
    if ((arena_bytes && arena == NULL) || local == NULL) abort(); /* (no memory: as NumPy would) */
    for (I k = 0; k < n_state; k++) {
        const I *st = states + 4 * k;
        if (st[0] == 1 || st[0] == 3) memcpy(table[st[2]], table[st[1]], (size_t)st[3]);
    }
    for (I i = 0; i < n_local; i++) {
        const I kind = entries[2 * i], value = entries[2 * i + 1];
        if (kind == 0) local[i] = table[value];
        else if (kind == 1) local[i] = (P)value;
        else if (kind == 2) local[i] = arena + value;
        else {
            const I *st = states + 4 * value;
            local[i] = table[st[0] == 1 ? st[2] : st[1]];
        }
    }
    const I n_cond = code[0], n_body = code[1], predicate = code[2];
    I done = 0;
    for (;;) {
        const I *body_ops = run_ops(code + 3, n_cond, local);
        if (!*(const unsigned char *)local[predicate]) break;
        run_ops(body_ops, n_body, local);
        done++;
    }
    if (trips != NULL) *trips = done;
    free(local);
    free(arena);
    return code + length;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* time.perf_counter's clock on Linux */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* run_ops, timing each op: times[3k..3k+2] = op k's start and end (seconds of the monotonic
 * clock) and, for a while loop, its trips (else 0). A profiled call runs the very program an
 * unprofiled one runs (the same BLAS calls on the same windows), so it computes the same bits. */
static void run_ops_timed(const I *op, I count, P *table, double *times) {
    for (I o = 0; o < count; o++) {
        I trips = 0;
        double start = seconds_now();
        op = op[0] == 8 ? run_while(op, table, &trips) : run_ops(op, 1, table);
        times[3 * o] = start;
        times[3 * o + 1] = seconds_now();
        times[3 * o + 2] = (double)trips;
    }
}

/* The buffers of a list (one array, or None, per slot) as a table of pointers; every view is
 * held until release_table. */
typedef struct {
    Py_ssize_t n;
    Py_buffer *views;
    P *table;
    char *held;
} Table;

static void release_table(Table *t) {
    if (t->held != NULL)
        for (Py_ssize_t i = 0; i < t->n; i++)
            if (t->held[i]) PyBuffer_Release(&t->views[i]);
    PyMem_Free(t->views);
    PyMem_Free(t->table);
    PyMem_Free(t->held);
}

static int fill_table(Table *t, PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    t->n = n;
    t->views = (Py_buffer *)PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    t->table = (P *)PyMem_Calloc(n ? n : 1, sizeof(P));
    t->held = (char *)PyMem_Calloc(n ? n : 1, 1);
    if (t->views == NULL || t->table == NULL || t->held == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (item == Py_None) continue;
        if (PyObject_GetBuffer(item, &t->views[i], PyBUF_ANY_CONTIGUOUS) < 0) return -1;
        t->held[i] = 1;
        t->table[i] = t->views[i].buf;
    }
    return 0;
}

/* ``run_loop(program, buffers, limit)``: ``buffers`` is a list with one array (or None) per
 * slot of the table (the body's slots, then the condition's), as run_steps takes them: the
 * pointers are read here, not by Python (which spent about 3 µs a buffer on ``ctypes.data``). */
static PyObject *run_loop(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "run_loop(program, buffers: list, limit)");
        return NULL;
    }
    I limit = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer program;
    if (PyObject_GetBuffer(args[0], &program, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Table t = {0, NULL, NULL, NULL};
    PyObject *result = NULL;
    if (fill_table(&t, args[1]) < 0) goto done;
    const I *code = (const I *)program.buf;
    P *table = t.table;
    I trips = 0;
    Py_BEGIN_ALLOW_THREADS
    const I n_cond = code[0], n_body = code[1], predicate = code[2];
    const I *cond_ops = code + 3;
    while (trips < limit) {
        const I *body_ops = run_ops(cond_ops, n_cond, table);
        if (!*(const unsigned char *)table[predicate]) break;
        run_ops(body_ops, n_body, table);
        trips++;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(trips);
done:
    release_table(&t);
    PyBuffer_Release(&program);
    return result;
}

/* ---- run_steps: a whole program in one call ------------------------------------------------
 * ``run_steps(program, buffers)`` runs a program's kernel calls, BLAS matrix products and copies
 * (run_ops' format; program = [n_ops, then the ops]) over ``buffers``, a list with one array (or
 * None) per buffer slot, with the GIL released: a program of many small steps costs the steps,
 * not a trip through Python for each (native_program.py). */
static PyObject *run_steps(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 2 && nargs != 3) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "run_steps(program, buffers: list[, times])");
        return NULL;
    }
    Py_buffer program, times = {0};
    if (PyObject_GetBuffer(args[0], &program, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const I *code = (const I *)program.buf;
    if (nargs == 3) { /* float64, 3 per op: where the timed run writes (run_ops_timed) */
        if (PyObject_GetBuffer(args[2], &times, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
            PyBuffer_Release(&program);
            return NULL;
        }
        if (times.len < (Py_ssize_t)(3 * code[0] * sizeof(double))) {
            PyErr_SetString(PyExc_ValueError, "run_steps: times holds fewer than 3 per op");
            PyBuffer_Release(&times);
            PyBuffer_Release(&program);
            return NULL;
        }
    }
    Table t = {0, NULL, NULL, NULL};
    PyObject *result = NULL;
    if (fill_table(&t, args[1]) < 0) goto done;
    P *table = t.table;
    Py_BEGIN_ALLOW_THREADS
    if (nargs == 3)
        run_ops_timed(code + 1, code[0], table, (double *)times.buf);
    else
        run_ops(code + 1, code[0], table);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    release_table(&t);
    if (nargs == 3) PyBuffer_Release(&times);
    PyBuffer_Release(&program);
    return result;
}

/* ``set_thread_budget(n)``: split kernels called from this thread use at most n threads (0: no
 * cap); executor.kernel_threads sets it, as it caps the Python pool's splits */
static PyObject *set_thread_budget(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    thread_budget = n > 0 ? (int)n : 0;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_thread_budget", (PyCFunction)set_thread_budget, METH_O, "set_thread_budget(n)"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(address, start, end, *arrays)"},
    {"run_loop", (PyCFunction)(void (*)(void))run_loop, METH_FASTCALL, "run_loop(program, buffers, limit)"},
    {"run_steps", (PyCFunction)(void (*)(void))run_steps, METH_FASTCALL, "run_steps(program, buffers[, times])"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel_call", NULL, -1, methods};

/* OP_CODES: how many of run_ops' op codes this build knows (native_loop emits no other; 10:
 * split kernels; 11: batched products). BLAS_TYPES: how many element types its BLAS ops know (4: the complex ones) */
PyMODINIT_FUNC PyInit__kernel_call(void) {
    PyObject *m = PyModule_Create(&module);
    static int registered = 0;
    if (!registered && pthread_atfork(NULL, NULL, split_after_fork) == 0) registered = 1;
    /* TIMED: run_steps takes a times buffer (a profiled call runs the program it times) */
    /* KERNEL_POINTERS: the most buffers a kernel op may name (past MAX_POINTERS, the op's
     * address is the kernel's packed entry) */
    if (m != NULL && (PyModule_AddIntConstant(m, "OP_CODES", 11) < 0 ||
                      PyModule_AddIntConstant(m, "TIMED", 1) < 0 ||
                      PyModule_AddIntConstant(m, "BLAS_TYPES", 4) < 0 ||
                      PyModule_AddIntConstant(m, "KERNEL_POINTERS", MAX_KERNEL_POINTERS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
