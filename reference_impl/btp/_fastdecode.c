/*
 * The common case of decode_packet (reference_impl/btp/packet.py) in C.
 *
 * make_decoder(fallback, ProtocolDataEntry, Message, Response, Transfer)
 * returns a function with decode_packet's signature.  For the packets a BTP
 * link mostly carries -- a Message, Response or Transfer whose lengths are
 * in short form or the 0x81/0x82 long forms, at most 255 protocol data
 * entries with names of fewer than 128 IA5 bytes, and text entries that are
 * ASCII -- it builds the packet itself.  Everything else, *every* malformed
 * packet included, is handed to ``fallback`` (the pure-Python decode_packet)
 * with the caller's arguments untouched, so the rules, the error reasons and
 * their offsets live in one place.  This code only ever accepts a subset of
 * what the Python decoder accepts, and builds the same values from it;
 * tests/btp/test_fastdecode.py checks that on hypothesis-generated and
 * mutated packets, and that the typical packets never reach the fallback.
 *
 * The dataclasses are frozen and slotted: instances are allocated with the
 * type's tp_alloc (what object.__new__ does) and filled through the slots'
 * member descriptors (what packet.py's fast path does with ``__set__``),
 * so __init__ and __setattr__ are bypassed exactly as they are there.
 *
 * Every read is bounded by ``end`` (the end of the envelope), itself checked
 * against the buffer's size before anything is read past the header.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define NAME_CACHE_SLOTS 32
#define NAME_CACHE_MAX_LENGTH 64

typedef struct {
    unsigned char length;
    char bytes[NAME_CACHE_MAX_LENGTH];
    PyObject *text;
} CachedName;

typedef struct {
    PyObject_HEAD
    PyObject *fallback;
    PyTypeObject *entry_type, *message_type, *response_type, *transfer_type;
    /* member descriptors of the slots */
    PyObject *entry_name, *entry_content_type, *entry_data;
    PyObject *message_request_id, *message_protocol_data;
    PyObject *response_request_id, *response_protocol_data;
    PyObject *transfer_request_id, *transfer_amount, *transfer_protocol_data;
    PyObject *allow_trailing_name;
    /* Sub-protocol names are a small vocabulary ("auth", "ilp", ...): the
       first NAME_CACHE_SLOTS distinct ones are kept and never replaced, so
       a peer sending random names costs a bounded search, nothing more. */
    int cached;
    CachedName cache[NAME_CACHE_SLOTS];
} Decoder;

static PyTypeObject DecoderType;

static int
set_slot(PyObject *descr, PyObject *obj, PyObject *value)
{
    /* Steals ``value``. */
    int rc = Py_TYPE(descr)->tp_descr_set(descr, obj, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *
name_text(Decoder *self, const unsigned char *raw, Py_ssize_t length)
{
    for (int i = 0; i < self->cached; i++) {
        CachedName *slot = &self->cache[i];
        if (slot->length == length && memcmp(slot->bytes, raw, (size_t)length) == 0) {
            Py_INCREF(slot->text);
            return slot->text;
        }
    }
    PyObject *text = PyUnicode_DecodeASCII((const char *)raw, length, "strict");
    if (text != NULL && self->cached < NAME_CACHE_SLOTS && length <= NAME_CACHE_MAX_LENGTH) {
        CachedName *slot = &self->cache[self->cached++];
        slot->length = (unsigned char)length;
        memcpy(slot->bytes, raw, (size_t)length);
        Py_INCREF(text);
        slot->text = text;
    }
    return text;
}

static int
is_ascii(const unsigned char *p, Py_ssize_t n)
{
    unsigned char any = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        any |= p[i];
    return any < 0x80;
}

/* The value of the length determinant at d[*pos] (d[*pos] < end checked by
   the caller) in one of the forms handled here, advancing *pos; -1 means
   "another form": leave it to the Python decoder. */
static Py_ssize_t
common_length(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end)
{
    Py_ssize_t p = *pos;
    unsigned char first = d[p];
    if (first < 0x80) {
        *pos = p + 1;
        return first;
    }
    if (first == 0x81 && p + 1 < end && d[p + 1] >= 0x80) {
        *pos = p + 2;
        return d[p + 1];
    }
    if (first == 0x82 && p + 2 < end && d[p + 1] != 0) {
        *pos = p + 3;
        return ((Py_ssize_t)d[p + 1] << 8) | d[p + 2];
    }
    return -1;
}

#define FALL_BACK NULL   /* with no exception set */

/* The packet, or NULL: with an exception set on failure, without one when
   the input is not of the common shape. */
static PyObject *
decode_common(Decoder *self, const unsigned char *d, Py_ssize_t size, int allow_trailing)
{
    if (size < 6)
        return FALL_BACK;
    unsigned char kind = d[0];
    if (kind != 1 && kind != 6 && kind != 7)
        return FALL_BACK;
    unsigned long request_id = ((unsigned long)d[1] << 24) | ((unsigned long)d[2] << 16) |
                               ((unsigned long)d[3] << 8) | d[4];
    Py_ssize_t pos = 5;
    Py_ssize_t length = common_length(d, &pos, size);
    if (length < 0)
        return FALL_BACK;
    Py_ssize_t end = pos + length;
    if (end > size || (end < size && !allow_trailing))
        return FALL_BACK;
    unsigned long long amount = 0;
    if (kind == 7) {
        if (pos + 8 > end)
            return FALL_BACK;
        for (int i = 0; i < 8; i++)
            amount = (amount << 8) | d[pos + i];
        pos += 8;
    }
    /* protocolData: the count 01 nn */
    if (pos + 1 >= end || d[pos] != 1)
        return FALL_BACK;
    Py_ssize_t count = d[pos + 1];
    pos += 2;

    PyObject *entries = PyTuple_New(count);
    if (entries == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* protocolName IA5String, then the content type byte */
        if (pos >= end || d[pos] >= 0x80)
            goto fall_back;
        Py_ssize_t name_at = pos + 1;
        Py_ssize_t name_stop = name_at + d[pos];
        if (name_stop >= end || !is_ascii(d + name_at, name_stop - name_at))
            goto fall_back;
        unsigned char content_type = d[name_stop];
        /* data OCTET STRING */
        pos = name_stop + 1;
        if (pos >= end)
            goto fall_back;
        Py_ssize_t data_length = common_length(d, &pos, end);
        if (data_length < 0 || pos + data_length > end)
            goto fall_back;
        /* UTF-8 text that is not ASCII: the Python decoder validates it */
        if ((content_type == 1 || content_type == 2) && !is_ascii(d + pos, data_length))
            goto fall_back;

        PyObject *entry = self->entry_type->tp_alloc(self->entry_type, 0);
        if (entry == NULL)
            goto error;
        PyTuple_SET_ITEM(entries, i, entry);
        PyObject *name = name_text(self, d + name_at, name_stop - name_at);
        if (name == NULL || set_slot(self->entry_name, entry, name) < 0)
            goto error;
        PyObject *type_value = PyLong_FromLong(content_type);
        if (type_value == NULL || set_slot(self->entry_content_type, entry, type_value) < 0)
            goto error;
        PyObject *value = PyBytes_FromStringAndSize((const char *)d + pos, data_length);
        if (value == NULL || set_slot(self->entry_data, entry, value) < 0)
            goto error;
        pos += data_length;
    }
    /* Bytes left in the envelope after protocolData are a future version's
       fields: ignored, as packet.py's docstring explains. */

    PyTypeObject *cls;
    PyObject *id_descr, *pd_descr;
    if (kind == 6) {
        cls = self->message_type, id_descr = self->message_request_id, pd_descr = self->message_protocol_data;
    } else if (kind == 7) {
        cls = self->transfer_type, id_descr = self->transfer_request_id, pd_descr = self->transfer_protocol_data;
    } else {
        cls = self->response_type, id_descr = self->response_request_id, pd_descr = self->response_protocol_data;
    }
    PyObject *packet = cls->tp_alloc(cls, 0);
    if (packet == NULL)
        goto error;
    PyObject *id_value = PyLong_FromUnsignedLong(request_id);
    if (id_value == NULL || set_slot(id_descr, packet, id_value) < 0)
        goto packet_error;
    if (kind == 7) {
        PyObject *amount_value = PyLong_FromUnsignedLongLong(amount);
        if (amount_value == NULL || set_slot(self->transfer_amount, packet, amount_value) < 0)
            goto packet_error;
    }
    if (set_slot(pd_descr, packet, entries) < 0)   /* steals entries */
        goto packet_error_entries_gone;
    return packet;

packet_error:
    Py_DECREF(packet);
    goto error;
packet_error_entries_gone:
    Py_DECREF(packet);
    return NULL;
fall_back:
    Py_DECREF(entries);
    return FALL_BACK;
error:
    Py_DECREF(entries);
    return NULL;
}

static PyObject *
decoder_call(PyObject *module_self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Decoder *self = (Decoder *)module_self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* Anything but decode_packet(bytes) or decode_packet(bytes,
       allow_trailing=...) -- other types, wrong arguments -- is the Python
       function's to handle (and to reject with its own TypeError). */
    if (nargs == 1 && nkw <= 1 && PyBytes_CheckExact(args[0])) {
        int allow_trailing = 0;
        int understood = 1;
        if (nkw == 1) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, 0);
            if (key == self->allow_trailing_name ||
                PyUnicode_Compare(key, self->allow_trailing_name) == 0) {
                allow_trailing = PyObject_IsTrue(args[1]);
                if (allow_trailing < 0)
                    return NULL;
            } else {
                if (PyErr_Occurred())
                    return NULL;
                understood = 0;
            }
        }
        if (understood) {
            PyObject *packet = decode_common(self, (const unsigned char *)PyBytes_AS_STRING(args[0]),
                                             PyBytes_GET_SIZE(args[0]), allow_trailing);
            if (packet != NULL || PyErr_Occurred())
                return packet;
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyMethodDef decoder_call_def = {
    "decode_packet", (PyCFunction)(void (*)(void))decoder_call, METH_FASTCALL | METH_KEYWORDS,
    "decode_packet(data, /, *, allow_trailing=False)\n--\n\n"
    "reference_impl.btp.packet.decode_packet with its common case in C\n"
    "(reference_impl/btp/_fastdecode.c); same results, same errors.",
};

static int
decoder_traverse(Decoder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->entry_type);
    Py_VISIT(self->message_type);
    Py_VISIT(self->response_type);
    Py_VISIT(self->transfer_type);
    Py_VISIT(self->entry_name);
    Py_VISIT(self->entry_content_type);
    Py_VISIT(self->entry_data);
    Py_VISIT(self->message_request_id);
    Py_VISIT(self->message_protocol_data);
    Py_VISIT(self->response_request_id);
    Py_VISIT(self->response_protocol_data);
    Py_VISIT(self->transfer_request_id);
    Py_VISIT(self->transfer_amount);
    Py_VISIT(self->transfer_protocol_data);
    return 0;
}

static int
decoder_clear(Decoder *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->entry_type);
    Py_CLEAR(self->message_type);
    Py_CLEAR(self->response_type);
    Py_CLEAR(self->transfer_type);
    Py_CLEAR(self->entry_name);
    Py_CLEAR(self->entry_content_type);
    Py_CLEAR(self->entry_data);
    Py_CLEAR(self->message_request_id);
    Py_CLEAR(self->message_protocol_data);
    Py_CLEAR(self->response_request_id);
    Py_CLEAR(self->response_protocol_data);
    Py_CLEAR(self->transfer_request_id);
    Py_CLEAR(self->transfer_amount);
    Py_CLEAR(self->transfer_protocol_data);
    Py_CLEAR(self->allow_trailing_name);
    for (int i = 0; i < self->cached; i++)
        Py_CLEAR(self->cache[i].text);
    self->cached = 0;
    return 0;
}

static void
decoder_dealloc(Decoder *self)
{
    PyObject_GC_UnTrack(self);
    decoder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reference_impl.btp._fastdecode.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "State of one decode_packet made by make_decoder().",
    .tp_traverse = (traverseproc)decoder_traverse,
    .tp_clear = (inquiry)decoder_clear,
    .tp_dealloc = (destructor)decoder_dealloc,
};

/* The member descriptor of slot ``name`` of ``cls``, checked. */
static PyObject *
slot_descriptor(PyTypeObject *cls, const char *name)
{
    PyObject *descr = PyDict_GetItemString(cls->tp_dict, name);   /* borrowed */
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", cls->tp_name, name);
        return NULL;
    }
    Py_INCREF(descr);
    return descr;
}

static PyObject *
make_decoder(PyObject *module, PyObject *args)
{
    PyObject *fallback;
    PyTypeObject *entry, *message, *response, *transfer;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!:make_decoder", &fallback, &PyType_Type, &entry, &PyType_Type, &message,
                          &PyType_Type, &response, &PyType_Type, &transfer))
        return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "make_decoder: fallback must be callable");
        return NULL;
    }
    Decoder *self = PyObject_GC_New(Decoder, &DecoderType);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof(Decoder) - sizeof(PyObject));
    PyObject_GC_Track(self);
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(entry);
    self->entry_type = entry;
    Py_INCREF(message);
    self->message_type = message;
    Py_INCREF(response);
    self->response_type = response;
    Py_INCREF(transfer);
    self->transfer_type = transfer;
    if ((self->entry_name = slot_descriptor(entry, "name")) == NULL ||
        (self->entry_content_type = slot_descriptor(entry, "content_type")) == NULL ||
        (self->entry_data = slot_descriptor(entry, "data")) == NULL ||
        (self->message_request_id = slot_descriptor(message, "request_id")) == NULL ||
        (self->message_protocol_data = slot_descriptor(message, "protocol_data")) == NULL ||
        (self->response_request_id = slot_descriptor(response, "request_id")) == NULL ||
        (self->response_protocol_data = slot_descriptor(response, "protocol_data")) == NULL ||
        (self->transfer_request_id = slot_descriptor(transfer, "request_id")) == NULL ||
        (self->transfer_amount = slot_descriptor(transfer, "amount")) == NULL ||
        (self->transfer_protocol_data = slot_descriptor(transfer, "protocol_data")) == NULL ||
        (self->allow_trailing_name = PyUnicode_InternFromString("allow_trailing")) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject *function = PyCFunction_NewEx(&decoder_call_def, (PyObject *)self, NULL);
    Py_DECREF(self);
    return function;
}

static PyMethodDef module_methods[] = {
    {"make_decoder", make_decoder, METH_VARARGS,
     "make_decoder(fallback, ProtocolDataEntry, Message, Response, Transfer)\n--\n\n"
     "A decode_packet that builds the common packets in C and hands everything\n"
     "else to fallback(*args, **kwargs)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastdecode",
    "The common case of reference_impl.btp.packet.decode_packet in C.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__fastdecode(void)
{
    if (PyType_Ready(&DecoderType) < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
