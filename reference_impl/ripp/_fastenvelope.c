/* Optional C accelerator of reference_impl.ripp.envelope.decode_envelope.
 *
 * decode(data, *, max_payload) returns the Envelope of a sound envelope; when
 * ANY check fails it hands the bytes to the Python decoder
 * (envelope.decode_envelope_python), which runs the checks one by one in the
 * profile's order to name the refusal, so the order and the error texts live
 * in one place.  The CRC-32C is google-crc32c's
 * (the function is handed over by setup()), computed over the whole message:
 * a message followed by its own CRC-32C, little-endian, always gives the
 * residue 0x48674BC7.  Nothing here allocates before every check passed. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 59
#define OVERHEAD 63
#define CRC_RESIDUE 0x48674BC7UL

static PyTypeObject *envelope_type = NULL; /* the Envelope NamedTuple (a tuple subclass) */
static PyObject *crc_value = NULL;         /* google_crc32c.value */
static PyObject *slow_decode = NULL;       /* envelope.decode_envelope_python(data, max_payload) */
static PyObject *default_max = NULL;       /* envelope.MAX_PAYLOAD */

static PyObject *
fast_setup(PyObject *self, PyObject *args)
{
    PyObject *t, *f, *slow, *dmax;
    if (!PyArg_ParseTuple(args, "O!OOO!", &PyType_Type, &t, &f, &slow, &PyLong_Type, &dmax))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)t, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Envelope must be a tuple subclass");
        return NULL;
    }
    Py_INCREF(t);
    Py_INCREF(f);
    Py_INCREF(slow);
    Py_INCREF(dmax);
    Py_XSETREF(envelope_type, (PyTypeObject *)t);
    Py_XSETREF(crc_value, f);
    Py_XSETREF(slow_decode, slow);
    Py_XSETREF(default_max, dmax);
    Py_RETURN_NONE;
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline int64_t
le64(const unsigned char *p)
{
    return (int64_t)((uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32));
}

static PyObject *
fast_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs != 1 || nkw > 1 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "max_payload") != 0)) {
        PyErr_SetString(PyExc_TypeError, "decode_envelope(data, *, max_payload=MAX_PAYLOAD)");
        return NULL;
    }
    if (envelope_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() was not called");
        return NULL;
    }
    PyObject *data = args[0];
    PyObject *maxobj = nkw == 1 ? args[1] : default_max;
    long long max_payload = PyLong_AsLongLong(maxobj);
    if (max_payload == -1 && PyErr_Occurred())
        return NULL;
    if (!PyBytes_CheckExact(data))
        goto slow;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (n < OVERHEAD)
        goto slow;
    int32_t length = (int32_t)le32(p + 55);
    if (length < 0 || (long long)length > max_payload || n != OVERHEAD + (Py_ssize_t)length)
        goto slow;
    if (memcmp(p, "RIPP", 4) != 0)
        goto slow;
    PyObject *crc = PyObject_CallOneArg(crc_value, data);
    if (crc == NULL)
        return NULL;
    unsigned long c = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (c == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (c != CRC_RESIDUE || p[4] != 1 || p[5] > 5 || p[6] != 0)
        goto slow;

    /* What tuple.__new__ does for a subclass: allocate, then fill. */
    PyObject *items[7];
    items[0] = PyLong_FromLong(p[4]);
    items[1] = PyLong_FromLong(p[5]);
    items[2] = PyLong_FromLong(p[6]);
    items[3] = PyLong_FromLongLong(le64(p + 7));
    items[4] = PyLong_FromLongLong(le64(p + 15));
    items[5] = PyBytes_FromStringAndSize((const char *)p + 23, 32);
    items[6] = PyBytes_FromStringAndSize((const char *)p + HEADER_SIZE, length);
    PyObject *env = envelope_type->tp_alloc(envelope_type, 7);
    for (int i = 0; i < 7; i++) {
        if (items[i] == NULL || env == NULL) {
            for (int j = 0; j < 7; j++)
                Py_XDECREF(items[j]);
            Py_XDECREF(env);
            return NULL;
        }
    }
    for (int i = 0; i < 7; i++)
        PyTuple_SET_ITEM(env, i, items[i]);
    return env;

slow:
    /* Some check failed (or data is not exactly bytes): the Python decoder
       names the first failing check, in order, and raises. */
    return PyObject_CallFunctionObjArgs(slow_decode, data, maxobj, NULL);
}

static PyMethodDef methods[] = {
    {"setup", fast_setup, METH_VARARGS, "setup(Envelope, crc32c_value, decode_envelope_python, MAX_PAYLOAD)"},
    {"decode", (PyCFunction)(void (*)(void))fast_decode, METH_FASTCALL | METH_KEYWORDS,
     "decode(data, *, max_payload=MAX_PAYLOAD) -> Envelope; refusals are raised by the Python decoder"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastenvelope", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__fastenvelope(void)
{
    return PyModule_Create(&module);
}
