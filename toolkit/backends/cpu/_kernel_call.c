/* The hot path of a compiled kernel call: ``call(address, start, end, *arrays)`` calls the
 * kernel at ``address`` with the arrays' data pointers and the row range, without ctypes'
 * argument conversion (about 1.6 µs a call through ctypes, about 0.1 µs here). The GIL is
 * released while the kernel runs, as ctypes does. Built from source by pip when a C compiler
 * is present; toolkit falls back to ctypes when it is not (``executor._native_call``). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_POINTERS 16
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

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(address, start, end, *arrays)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel_call", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernel_call(void) { return PyModule_Create(&module); }
