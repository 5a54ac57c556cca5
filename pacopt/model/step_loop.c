/* The event loop of one training step (pacopt.model.step), compiled.
 *
 * The same rules and the same floating-point operations, in the same order, as the Python loop
 * in step.py (_loop_python), which is the specification: both give bit-identical results, and
 * tests/test_step_loop.py checks it. Everything the loop reads is prepared in step.py; here are
 * only heaps and arithmetic on doubles (build with -ffp-contract=off: no fused multiply-add).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t n_subs, n_deps, n_workers, n_channels;
    const int32_t *worker;     /* per sub-op: its worker, 0..n_workers-1 */
    const double *compute;     /* per sub-op, ms */
    const int64_t *alloc;      /* per sub-op: allocation rank (later allocated first on ties) */
    const int32_t *in_degree;  /* per sub-op: data dependencies it waits for */
    const int64_t *leave_start;/* per sub-op + 1: its leaving dependencies' range in leave */
    const int32_t *leave;
    const double *dep_ms;      /* per dependency: run time of a flow */
    const int32_t *channel;    /* per dependency: its channel, or -1 (takes no time) */
    const int32_t *dst;
    const int8_t *is_data;
} Job;

/* ----- heaps ----------------------------------------------------------------------------------- */
/* A worker's ready sub-ops: smaller compute first, then later allocation, then smaller index
 * (Python's tuple order on (compute, -alloc, s)). */
static inline int sub_before(const Job *job, int32_t a, int32_t b) {
    double ca = job->compute[a], cb = job->compute[b];
    if (ca < cb) return 1;
    if (cb < ca) return 0;
    if (job->alloc[a] != job->alloc[b]) return job->alloc[a] > job->alloc[b];
    return a < b;
}

/* A channel's ready flows: shorter run time first, then the later dependency. */
static inline int flow_before(const Job *job, int32_t a, int32_t b) {
    double ma = job->dep_ms[a], mb = job->dep_ms[b];
    if (ma < mb) return 1;
    if (mb < ma) return 0;
    return a > b;
}

#define DEFINE_INDEX_HEAP(NAME, BEFORE)                                                         \
    static void NAME##_push(const Job *job, int32_t *heap, int64_t *size, int32_t item) {      \
        int64_t i = (*size)++;                                                                  \
        while (i > 0) {                                                                         \
            int64_t parent = (i - 1) / 2;                                                       \
            if (!BEFORE(job, item, heap[parent])) break;                                        \
            heap[i] = heap[parent];                                                             \
            i = parent;                                                                         \
        }                                                                                       \
        heap[i] = item;                                                                         \
    }                                                                                           \
    static void NAME##_pop(const Job *job, int32_t *heap, int64_t *size) {                     \
        int64_t n = --(*size), i = 0;                                                           \
        if (n == 0) return;                                                                     \
        int32_t item = heap[n];                                                                 \
        for (;;) {                                                                              \
            int64_t child = 2 * i + 1;                                                          \
            if (child >= n) break;                                                              \
            if (child + 1 < n && BEFORE(job, heap[child + 1], heap[child])) child++;            \
            if (!BEFORE(job, heap[child], item)) break;                                         \
            heap[i] = heap[child];                                                              \
            i = child;                                                                          \
        }                                                                                       \
        heap[i] = item;                                                                         \
    }

DEFINE_INDEX_HEAP(subs, sub_before)
DEFINE_INDEX_HEAP(flows, flow_before)

/* Flows by finish time (ties in any order: a tick completes all of them at once). */
typedef struct { double fin; int32_t dep; } Due;
typedef struct { Due *items; int64_t size, capacity; } DueHeap;

/* Room for one more item in a growing array (doubled when full); 0, or -1 out of memory. */
static int reserve(void **items, int64_t size, int64_t *capacity, size_t item_size) {
    if (size < *capacity) return 0;
    int64_t grown = *capacity ? 2 * *capacity : 64;
    void *moved = realloc(*items, (size_t)grown * item_size);
    if (!moved) return -1;
    *items = moved;
    *capacity = grown;
    return 0;
}

/* Linked lists of flows in one growing pool: a group of leaders with the same finish time. */
typedef struct { int32_t dep, next; } Node;
typedef struct { Node *items; int64_t size, capacity; } Nodes;

static int32_t node_new(Nodes *n, int32_t dep, int32_t next) {
    if (reserve((void **)&n->items, n->size, &n->capacity, sizeof(Node))) return -1;
    n->items[n->size] = (Node){dep, next};
    return (int32_t)n->size++;
}

static int due_push(DueHeap *h, double fin, int32_t dep) {
    if (reserve((void **)&h->items, h->size, &h->capacity, sizeof(Due))) return -1;
    int64_t i = h->size++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!(fin < h->items[parent].fin)) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i].fin = fin;
    h->items[i].dep = dep;
    return 0;
}

static void due_pop(DueHeap *h) {
    int64_t n = --h->size, i = 0;
    if (n == 0) return;
    Due item = h->items[n];
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && h->items[child + 1].fin < h->items[child].fin) child++;
        if (!(h->items[child].fin < item.fin)) break;
        h->items[i] = h->items[child];
        i = child;
    }
    h->items[i] = item;
}

/* ----- the loop -------------------------------------------------------------------------------- */
enum { OK = 0, NO_MEMORY = 1, STUCK = 2 };

typedef struct {
    int32_t *sub_heap; int64_t *sub_base, *sub_size;    /* per worker, in one buffer */
    int32_t *flow_heap; int64_t *flow_base, *flow_size; /* per channel, in one buffer */
    double *rem, *fin_of;
    int32_t *pending, *running, *finished_ops, *finished_deps, *instant, *touched;
    int32_t *pushed;                                    /* per channel: its last leader pushed */
    int32_t *next_due;  /* per flow: the next flow of its group in in_flight (-1: the last) */
    uint8_t *done, *is_touched;
    /* One entry per group of flows with the same finish time. in_flight: flows released in
     * one tick, the entry naming the first and next_due the rest. leaders: channels' new
     * leaders, the entry naming a list in groups whose first member is the one checked. */
    DueHeap in_flight, leaders;
    Nodes groups;
} Work;

/* The first ready, unfinished flow of channel c (finished ones leave lazily), or -1. */
static inline int32_t leader(const Job *job, Work *w, int32_t c) {
    int32_t *heap = w->flow_heap + w->flow_base[c];
    while (w->flow_size[c] > 0 && w->done[heap[0]]) flows_pop(job, heap, &w->flow_size[c]);
    return w->flow_size[c] > 0 ? heap[0] : -1;
}

static int run(const Job *job, Work *w, double *t_out, double *exposed_out) {
    const int64_t S = job->n_subs, D = job->n_deps, W = job->n_workers;
    int64_t n_instant = 0, n_touched = 0;
    for (int64_t s = 0; s < S; s++) {
        w->rem[s] = job->compute[s];
        w->pending[s] = job->in_degree[s];
        if (w->pending[s] == 0) {
            int32_t k = job->worker[s];
            subs_push(job, w->sub_heap + w->sub_base[k], &w->sub_size[k], (int32_t)s);
        }
    }
    double t = 0.0, exposed = 0.0;
    int64_t remaining = S + D;
    while (remaining) {
        int64_t n_running = 0;
        double op_min = INFINITY;
        for (int64_t k = 0; k < W; k++) {
            if (w->sub_size[k] > 0) {
                int32_t s = w->sub_heap[w->sub_base[k]];
                w->running[n_running++] = (int32_t)k;
                if (w->rem[s] < op_min) op_min = w->rem[s];
            }
        }
        double tick;
        if (n_instant) {
            tick = 0.0;
        } else {
            double comm_min = INFINITY;
            if (w->in_flight.size > 0) {
                /* the first finish of a channel's leading flow: the first group with a
                 * member that still leads (members that do not are dropped as met) */
                for (;;) {
                    if (w->leaders.size == 0) return STUCK;
                    int32_t head = w->leaders.items[0].dep;
                    int32_t d = w->groups.items[head].dep;
                    if (!w->done[d] && leader(job, w, job->channel[d]) == d) {
                        comm_min = w->leaders.items[0].fin - t;
                        break;
                    }
                    int32_t next = w->groups.items[head].next;
                    if (next >= 0) {  /* the next member takes the head's place */
                        w->groups.items[head] = w->groups.items[next];
                    } else {
                        due_pop(&w->leaders);
                    }
                }
            }
            tick = op_min < comm_min ? op_min : comm_min;
            if (tick == INFINITY) return STUCK;
            if (!n_running && w->in_flight.size > 0) exposed += tick;
        }
        int64_t n_finished_ops = 0, n_finished_deps = 0;
        for (int64_t i = 0; i < n_running; i++) {
            int32_t k = w->running[i];
            int32_t s = w->sub_heap[w->sub_base[k]];
            double r = w->rem[s];
            r -= tick < r ? tick : r;
            w->rem[s] = r;
            if (r == 0.0) {
                subs_pop(job, w->sub_heap + w->sub_base[k], &w->sub_size[k]);
                w->finished_ops[n_finished_ops++] = s;
            }
        }
        if (n_instant) {
            memcpy(w->finished_deps, w->instant, (size_t)n_instant * sizeof(int32_t));
            n_finished_deps = n_instant;
            n_instant = 0;
        } else {
            double end = t + tick;
            while (w->in_flight.size > 0 && w->in_flight.items[0].fin <= end) {
                for (int32_t d = w->in_flight.items[0].dep; d >= 0; d = w->next_due[d])
                    w->finished_deps[n_finished_deps++] = d;
                due_pop(&w->in_flight);
            }
        }
        t += tick;
        remaining -= n_finished_ops + n_finished_deps;
        int32_t group = -1;  /* the first flow of the last group put in in_flight this tick */
        double group_fin = 0.0;
        for (int64_t i = 0; i < n_finished_ops; i++) {  /* release their dependencies */
            int32_t s = w->finished_ops[i];
            for (int64_t j = job->leave_start[s]; j < job->leave_start[s + 1]; j++) {
                int32_t d = job->leave[j];
                int32_t c = job->channel[d];
                if (c < 0) {
                    w->instant[n_instant++] = d;
                    continue;
                }
                double fin = t + job->dep_ms[d];
                w->fin_of[d] = fin;
                if (group >= 0 && fin == group_fin) {  /* a sub-op's flows mostly take as long */
                    w->next_due[d] = w->next_due[group];
                    w->next_due[group] = d;
                } else {
                    w->next_due[d] = -1;
                    if (due_push(&w->in_flight, fin, d)) return NO_MEMORY;
                    group = d;
                    group_fin = fin;
                }
                flows_push(job, w->flow_heap + w->flow_base[c], &w->flow_size[c], d);
                if (!w->is_touched[c]) { w->is_touched[c] = 1; w->touched[n_touched++] = c; }
            }
        }
        for (int64_t i = 0; i < n_finished_deps; i++) {
            int32_t d = w->finished_deps[i];
            w->done[d] = 1;
            int32_t c = job->channel[d];
            if (c >= 0 && !w->is_touched[c]) { w->is_touched[c] = 1; w->touched[n_touched++] = c; }
            if (job->is_data[d]) {
                int32_t child = job->dst[d];
                if (--w->pending[child] == 0) {
                    int32_t k = job->worker[child];
                    subs_push(job, w->sub_heap + w->sub_base[k], &w->sub_size[k], child);
                }
            }
        }
        /* every channel whose flows changed: its leader among the candidates, if new (a
         * leader only changes when its channel is touched, so the last one pushed is still
         * there while it leads: pushing it again would only add a duplicate to drop) */
        int32_t head = -1;  /* the group of the last leader put in this tick */
        double head_fin = 0.0;
        for (int64_t i = 0; i < n_touched; i++) {
            int32_t c = w->touched[i];
            w->is_touched[c] = 0;
            int32_t d = leader(job, w, c);
            if (d < 0 || d == w->pushed[c]) continue;
            w->pushed[c] = d;
            double fin = w->fin_of[d];
            if (head >= 0 && fin == head_fin) {
                int32_t node = node_new(&w->groups, d, w->groups.items[head].next);
                if (node < 0) return NO_MEMORY;
                w->groups.items[head].next = node;
            } else {
                head = node_new(&w->groups, d, -1);
                if (head < 0 || due_push(&w->leaders, fin, head)) return NO_MEMORY;
                head_fin = fin;
            }
        }
        n_touched = 0;
    }
    *t_out = t;
    *exposed_out = exposed;
    return OK;
}

/* Per-key buffers of a CSR layout: base[k] = first slot of key k, sized by its count. */
static int64_t *bases(const int32_t *keys, int64_t n, int64_t n_keys) {
    int64_t *base = calloc((size_t)n_keys + 1, sizeof(int64_t));
    if (!base) return NULL;
    for (int64_t i = 0; i < n; i++) if (keys[i] >= 0) base[keys[i] + 1]++;
    for (int64_t k = 0; k < n_keys; k++) base[k + 1] += base[k];
    return base;
}

static int simulate(const Job *job, double *t, double *exposed) {
    const int64_t S = job->n_subs, D = job->n_deps, W = job->n_workers, C = job->n_channels;
    Work w;
    memset(&w, 0, sizeof w);
    int status = NO_MEMORY;
    w.sub_heap = malloc((size_t)(S + 1) * sizeof(int32_t));
    w.sub_base = bases(job->worker, S, W);
    w.sub_size = calloc((size_t)W + 1, sizeof(int64_t));
    w.flow_heap = malloc((size_t)(D + 1) * sizeof(int32_t));
    w.flow_base = bases(job->channel, D, C);
    w.flow_size = calloc((size_t)C + 1, sizeof(int64_t));
    w.rem = malloc((size_t)(S + 1) * sizeof(double));
    w.fin_of = malloc((size_t)(D + 1) * sizeof(double));
    w.pending = malloc((size_t)(S + 1) * sizeof(int32_t));
    w.running = malloc((size_t)(W + 1) * sizeof(int32_t));
    w.finished_ops = malloc((size_t)(W + 1) * sizeof(int32_t));
    w.finished_deps = malloc((size_t)(D + 1) * sizeof(int32_t));
    w.instant = malloc((size_t)(D + 1) * sizeof(int32_t));
    w.touched = malloc((size_t)(C + 1) * sizeof(int32_t));
    w.pushed = malloc((size_t)(C + 1) * sizeof(int32_t));
    w.next_due = malloc((size_t)(D + 1) * sizeof(int32_t));
    if (w.pushed) for (int64_t c = 0; c <= C; c++) w.pushed[c] = -1;
    w.done = calloc((size_t)D + 1, 1);
    w.is_touched = calloc((size_t)C + 1, 1);
    if (w.sub_heap && w.sub_base && w.sub_size && w.flow_heap && w.flow_base && w.flow_size
        && w.rem && w.fin_of && w.pending && w.running && w.finished_ops && w.finished_deps
        && w.instant && w.touched && w.pushed && w.next_due && w.done && w.is_touched)
        status = run(job, &w, t, exposed);
    free(w.sub_heap); free(w.sub_base); free(w.sub_size); free(w.flow_heap);
    free(w.flow_base); free(w.flow_size); free(w.rem); free(w.fin_of); free(w.pending);
    free(w.running); free(w.finished_ops); free(w.finished_deps); free(w.instant);
    free(w.touched); free(w.pushed); free(w.next_due); free(w.done); free(w.is_touched);
    free(w.in_flight.items); free(w.leaders.items); free(w.groups.items);
    return status;
}

/* ----- Python ---------------------------------------------------------------------------------- */
static int take(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t n,
                const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize || view->len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %zd bytes", name, n, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *py_simulate(PyObject *self, PyObject *args) {
    Py_ssize_t S, D, W, C;
    PyObject *objs[10];
    if (!PyArg_ParseTuple(args, "nnnnOOOOOOOOOO", &S, &D, &W, &C, &objs[0], &objs[1], &objs[2],
                          &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9]))
        return NULL;
    static const char *names[10] = {"worker", "compute", "alloc", "in_degree", "leave_start",
                                    "leave", "dep_ms", "channel", "dst", "is_data"};
    const Py_ssize_t sizes[10] = {4, 8, 8, 4, 8, 4, 8, 4, 4, 1};
    const Py_ssize_t counts[10] = {S, S, S, S, S + 1, D, D, D, D, D};
    Py_buffer views[10];
    int taken = 0;
    for (; taken < 10; taken++)
        if (take(objs[taken], &views[taken], sizes[taken], counts[taken], names[taken]) < 0) break;
    PyObject *result = NULL;
    if (taken == 10) {
        Job job = {S, D, W, C, views[0].buf, views[1].buf, views[2].buf, views[3].buf,
                   views[4].buf, views[5].buf, views[6].buf, views[7].buf, views[8].buf,
                   views[9].buf};
        double t = 0.0, exposed = 0.0;
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = simulate(&job, &t, &exposed);
        Py_END_ALLOW_THREADS
        if (status == OK) result = Py_BuildValue("dd", t, exposed);
        else if (status == STUCK) PyErr_SetString(PyExc_RuntimeError, "stuck");
        else PyErr_NoMemory();
    }
    for (int i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"simulate", py_simulate, METH_VARARGS,
     "simulate(subs, deps, workers, channels, worker, compute, alloc, in_degree, leave_start, "
     "leave, dep_ms, channel, dst, is_data) -> (step_ms, exposed_comm_ms)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "step_loop",
                                    "The step simulation's event loop, compiled.", -1, methods};

PyMODINIT_FUNC PyInit_step_loop(void) { return PyModule_Create(&module); }
