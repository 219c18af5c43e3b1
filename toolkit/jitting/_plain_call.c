/* The dispatch fast path of a jitted function, in C: ``plain_call(table, arguments, weak_ints,
 * miss)`` finds the program of a plain call (positional NumPy arrays, NumPy scalars and Python
 * floats and ints) by its abstract signature and runs it, or returns ``miss``.
 *
 * A cache hit in Python builds a tuple of (shape, dtype, weak) triples and hashes it: about
 * 1 µs for three arguments, a third of a small program's whole call. Here the signature is a
 * few machine words packed into one bytes object (hashed once, compared with memcmp): about
 * 0.1 µs. ``signature_key`` in plain_index.py packs the same words from a key's abstract
 * values, so that the table is filled where programs are compiled.
 *
 * One argument's words: a header (what it is, its dtype's kind, byte order and item size, its
 * rank) and then its dimensions. An array or NumPy scalar of a non-native byte order, of any
 * kind but bool, int, uint, float and complex, and every other Python object end the fast path
 * (``miss``): the full path decides what they mean. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define NPY_TARGET_VERSION NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <stdint.h>

/* the most words one call's signature takes (a header and NPY_MAXDIMS dimensions for each of
 * 16 arguments); longer calls take the full path */
#define MAX_ARGUMENTS 16
#define MAX_WORDS (MAX_ARGUMENTS * (1 + NPY_MAXDIMS))

enum { ARRAY = 'a', SCALAR = 's', WEAK_FLOAT = 'f', WEAK_INT = 'i' };

static int64_t header(int what, char kind, char byteorder, int64_t itemsize, int64_t rank) {
    return (int64_t)what | ((int64_t)(unsigned char)kind << 8)
        | ((int64_t)(unsigned char)byteorder << 16) | (itemsize << 24) | (rank << 48);
}

/* 1 where ``descr`` is a dtype the fast path may serve, 0 where the full path must decide */
static int plain_dtype(PyArray_Descr *descr) {
    char kind = descr->kind;
    return PyArray_ISNBO(descr->byteorder) && PyDataType_ISLEGACY(descr)
        && !PyDataType_HASFIELDS(descr) && !PyDataType_HASSUBARRAY(descr)
        && (kind == 'b' || kind == 'i' || kind == 'u' || kind == 'f' || kind == 'c');
}

static PyObject *plain_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_call(table: dict, arguments: tuple, weak_ints: bool, miss)");
        return NULL;
    }
    PyObject *table = args[0], *arguments = args[1], *miss = args[3];
    int weak_ints = PyObject_IsTrue(args[2]);
    if (weak_ints < 0) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(arguments);
    if (n > MAX_ARGUMENTS || PyDict_GET_SIZE(table) == 0) return Py_NewRef(miss);
    int64_t words[MAX_WORDS];
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(arguments, i);
        if (PyArray_CheckExact(a)) {
            PyArrayObject *array = (PyArrayObject *)a;
            PyArray_Descr *descr = PyArray_DESCR(array);
            if (!plain_dtype(descr)) return Py_NewRef(miss);
            int rank = PyArray_NDIM(array);
            words[used++] = header(ARRAY, descr->kind, descr->byteorder,
                                   PyDataType_ELSIZE(descr), rank);
            npy_intp *dims = PyArray_DIMS(array);
            for (int d = 0; d < rank; d++) words[used++] = dims[d];
        } else if (PyFloat_CheckExact(a)) {
            words[used++] = header(WEAK_FLOAT, 0, 0, 0, 0);
        } else if (PyLong_CheckExact(a) && weak_ints) {
            int overflow = 0;
            PyLong_AsLongLongAndOverflow(a, &overflow);
            if (overflow) return Py_NewRef(miss);  /* (beyond int64: the full path says so) */
            words[used++] = header(WEAK_INT, 0, 0, 0, 0);
        } else if (PyArray_IsScalar(a, Generic)) {  /* a NumPy scalar (traced as one) */
            PyArray_Descr *descr = PyArray_DescrFromScalar(a);
            if (descr == NULL) return NULL;
            int plain = plain_dtype(descr);
            if (plain) words[used++] = header(SCALAR, descr->kind, descr->byteorder,
                                              PyDataType_ELSIZE(descr), 0);
            Py_DECREF(descr);
            if (!plain) return Py_NewRef(miss);
        } else {
            return Py_NewRef(miss);
        }
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)words,
                                              used * (Py_ssize_t)sizeof(int64_t));
    if (key == NULL) return NULL;
    PyObject *run = PyDict_GetItemWithError(table, key);  /* (borrowed) */
    Py_DECREF(key);
    if (run == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(miss);
    Py_INCREF(run);  /* (the program may be dropped from the table while it runs) */
    PyObject *leaves = PySequence_List(arguments);
    if (leaves == NULL) {
        Py_DECREF(run);
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(run, leaves);
    Py_DECREF(leaves);
    Py_DECREF(run);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_call", (PyCFunction)(void (*)(void))plain_call, METH_FASTCALL,
     "plain_call(table, arguments, weak_ints, miss): run the program ``table`` holds for the "
     "arguments' signature, or return ``miss``"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_plain_call", "A jitted function's dispatch fast path.", -1, methods,
};

PyMODINIT_FUNC PyInit__plain_call(void) {
    import_array();
    return PyModule_Create(&module);
}
