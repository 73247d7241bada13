/*
 * The common cases of decode_packet and encode_packet
 * (reference_impl/btp/packet.py) in C.
 *
 * make_codec(decode_fallback, encode_fallback, ProtocolDataEntry, Message,
 * Response, Transfer, ContentType) returns (decode_packet, encode_packet),
 * two functions with the signatures of the Python ones.
 *
 * Decoding: for the packets a BTP link mostly carries -- a Message,
 * Response or Transfer whose lengths are in short form or the 0x81/0x82
 * long forms, at most 255 protocol data entries with names of fewer than
 * 128 IA5 bytes, and text entries that are ASCII -- it builds the packet
 * itself.  Everything else, *every* malformed packet included, is handed to
 * ``decode_fallback`` (the pure-Python decode_packet) with the caller's
 * arguments untouched, so the rules, the error reasons and their offsets
 * live in one place.
 *
 * Encoding: a Message, Response or Transfer (exact types) with an exact-int
 * request id and amount in range, a tuple of at most 255 ProtocolDataEntry
 * whose names are ASCII str, content types int or ContentType in 0..255,
 * data exact bytes, ASCII when the content type is 1 or 2 (text), and
 * validate left at True, is written here; anything else -- every value the
 * Python encoder would reject, forging with validate=False, bytearray data,
 * non-ASCII UTF-8 text -- goes to ``encode_fallback`` untouched.
 *
 * Either way this code only handles a subset of what the Python functions
 * accept, and produces the same values from it; tests/btp/test_fastcodec.py
 * checks that on hypothesis-generated and mutated packets, and that the
 * typical packets never reach the fallbacks.
 *
 * The dataclasses are frozen and slotted: instances are allocated with the
 * type's tp_alloc (what object.__new__ does) and filled and read through the
 * slots' member descriptors (what packet.py's fast path does with
 * ``__set__``), so __init__ and __setattr__ are bypassed exactly as they are
 * there.
 *
 * Every read of a packet's bytes is bounded by ``end`` (the end of the
 * envelope), itself checked against the buffer's size before anything is
 * read past the header.
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

/* One packet class handled here: its type byte, its type and the member
   descriptors of the slots every one of them has. */
typedef struct {
    unsigned char kind;
    PyTypeObject *type;
    PyObject *request_id, *protocol_data;
} PacketClass;

enum { RESPONSE, MESSAGE, TRANSFER, PACKET_CLASSES };
static const unsigned char PACKET_KINDS[PACKET_CLASSES] = {1, 6, 7};

typedef struct {
    PyObject_HEAD
    PyObject *decode_fallback, *encode_fallback;
    PyTypeObject *content_type_type, *entry_type;
    PacketClass classes[PACKET_CLASSES];
    /* member descriptors of the other slots */
    PyObject *entry_name, *entry_content_type, *entry_data, *transfer_amount;
    PyObject *validate_name;
    /* Sub-protocol names are a small vocabulary ("auth", "ilp", ...): the
       first NAME_CACHE_SLOTS distinct ones are kept and never replaced, so
       a peer sending random names costs a bounded search, nothing more. */
    int cached;
    CachedName cache[NAME_CACHE_SLOTS];
} Codec;

static PyTypeObject CodecType;

static int
set_slot(PyObject *descr, PyObject *obj, PyObject *value)
{
    /* Steals ``value``. */
    int rc = Py_TYPE(descr)->tp_descr_set(descr, obj, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *
name_text(Codec *self, const unsigned char *raw, Py_ssize_t length)
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
decode_common(Codec *self, const unsigned char *d, Py_ssize_t size)
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
    /* Bytes after the envelope are ignored (packet.py's docstring, erratum
       BTP-E3): everything below reads up to ``end`` only. */
    if (end > size)
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

    const PacketClass *packet_class = &self->classes[kind == 6 ? MESSAGE : kind == 7 ? TRANSFER : RESPONSE];
    PyObject *packet = packet_class->type->tp_alloc(packet_class->type, 0);
    if (packet == NULL)
        goto error;
    PyObject *id_value = PyLong_FromUnsignedLong(request_id);
    if (id_value == NULL || set_slot(packet_class->request_id, packet, id_value) < 0)
        goto packet_error;
    if (kind == 7) {
        PyObject *amount_value = PyLong_FromUnsignedLongLong(amount);
        if (amount_value == NULL || set_slot(self->transfer_amount, packet, amount_value) < 0)
            goto packet_error;
    }
    if (set_slot(packet_class->protocol_data, packet, entries) < 0)   /* steals entries */
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

/* Whether the one keyword argument in ``kwnames`` is ``name`` (interned).
   Keyword names are str, so the comparison cannot fail; were it to, the
   answer is "no" and the Python function deals with the call. */
static int
only_keyword_is(PyObject *kwnames, PyObject *name)
{
    PyObject *key = PyTuple_GET_ITEM(kwnames, 0);
    if (key == name)
        return 1;
    int equal = PyUnicode_Compare(key, name);
    if (equal == -1 && PyErr_Occurred())
        PyErr_Clear();
    return equal == 0;
}

static PyObject *
decode_call(PyObject *module_self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Codec *self = (Codec *)module_self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* Anything but decode_packet(bytes) -- other types, keyword arguments,
       wrong arguments -- is the Python function's to handle (and to reject
       with its own TypeError). */
    if (nargs == 1 && nkw == 0 && PyBytes_CheckExact(args[0])) {
        PyObject *packet = decode_common(self, (const unsigned char *)PyBytes_AS_STRING(args[0]),
                                         PyBytes_GET_SIZE(args[0]));
        if (packet != NULL || PyErr_Occurred())
            return packet;
    }
    return PyObject_Vectorcall(self->decode_fallback, args, nargsf, kwnames);
}

static PyMethodDef decode_call_def = {
    "decode_packet", (PyCFunction)(void (*)(void))decode_call, METH_FASTCALL | METH_KEYWORDS,
    "decode_packet(data, *, lenient_error_form=False)\n--\n\n"
    "reference_impl.btp.packet.decode_packet with its common case in C\n"
    "(reference_impl/btp/_fastcodec.c); same results, same errors.",
};


/* ------------------------------------------------------------------ encoding */

/* A slot's value through its member descriptor; NULL with AttributeError
   set when the slot is empty (the types define no __getattribute__, so this
   is what ``packet.field`` does, and it runs no Python code). */
static PyObject *
get_slot(PyObject *descr, PyObject *obj)
{
    return Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)Py_TYPE(obj));
}

/* Size of the canonical length determinant of n (oer.encode_length). */
static Py_ssize_t
length_size(Py_ssize_t n)
{
    if (n < 128)
        return 1;
    Py_ssize_t size = 1;
    for (size_t v = (size_t)n; v != 0; v >>= 8)
        size++;
    return size;
}

static unsigned char *
put_length(unsigned char *p, Py_ssize_t n)
{
    if (n < 128) {
        *p++ = (unsigned char)n;
        return p;
    }
    int bytes = 0;
    for (size_t v = (size_t)n; v != 0; v >>= 8)
        bytes++;
    *p++ = (unsigned char)(0x80 | bytes);
    for (int i = bytes - 1; i >= 0; i--)
        *p++ = (unsigned char)((size_t)n >> (8 * i));
    return p;
}

/* 0 and *out set for an exact int in 0..high, else -1 with no exception set. */
static int
small_uint(PyObject *value, unsigned long long high, unsigned long long *out)
{
    if (!PyLong_CheckExact(value))
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();   /* negative or too big: the Python encoder says so */
        return -1;
    }
    if (v > high)
        return -1;
    *out = v;
    return 0;
}

#define MAX_FAST_ENTRIES 255

/* The encoding, or NULL: with an exception set on failure (memory), without
   one when the packet is not of the common shape. */
static PyObject *
encode_common(Codec *self, PyObject *packet)
{
    const PacketClass *packet_class = NULL;
    for (int i = 0; i < PACKET_CLASSES; i++)
        if (Py_TYPE(packet) == self->classes[i].type)
            packet_class = &self->classes[i];
    if (packet_class == NULL)
        return FALL_BACK;
    unsigned char kind = packet_class->kind;

    /* New references, all released at the end: a finalizer run by the
       allocation below cannot pull a field out from under the writer. */
    PyObject *names[MAX_FAST_ENTRIES], *datas[MAX_FAST_ENTRIES];
    unsigned char types[MAX_FAST_ENTRIES];
    Py_ssize_t held = 0;
    PyObject *entries = NULL, *result = NULL;
    unsigned long long request_id, amount = 0;

    PyObject *value = get_slot(packet_class->request_id, packet);
    if (value == NULL)
        goto fall_back_clear;
    int ok = small_uint(value, 0xFFFFFFFFULL, &request_id);
    Py_DECREF(value);
    if (ok < 0)
        goto fall_back;
    if (kind == 7) {
        value = get_slot(self->transfer_amount, packet);
        if (value == NULL)
            goto fall_back_clear;
        ok = small_uint(value, 0xFFFFFFFFFFFFFFFFULL, &amount);
        Py_DECREF(value);
        if (ok < 0)
            goto fall_back;
    }
    entries = get_slot(packet_class->protocol_data, packet);
    if (entries == NULL)
        goto fall_back_clear;
    if (!PyTuple_CheckExact(entries) || PyTuple_GET_SIZE(entries) > MAX_FAST_ENTRIES)
        goto fall_back;
    Py_ssize_t count = PyTuple_GET_SIZE(entries);

    /* protocolData count (01 nn), then the amount for a Transfer */
    Py_ssize_t body = 2 + (kind == 7 ? 8 : 0);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyTuple_GET_ITEM(entries, i);
        if (Py_TYPE(entry) != self->entry_type)
            goto fall_back;
        PyObject *name = get_slot(self->entry_name, entry);
        if (name == NULL)
            goto fall_back_clear;
        PyObject *data = get_slot(self->entry_data, entry);
        if (data == NULL) {
            Py_DECREF(name);
            goto fall_back_clear;
        }
        names[held] = name, datas[held] = data, held++;
        PyObject *content_type = get_slot(self->entry_content_type, entry);
        if (content_type == NULL)
            goto fall_back_clear;
        long type_value = -1;
        if (PyLong_CheckExact(content_type) || Py_TYPE(content_type) == self->content_type_type) {
            type_value = PyLong_AsLong(content_type);
            if (type_value == -1 && PyErr_Occurred())
                PyErr_Clear();
        }
        Py_DECREF(content_type);
        if (type_value < 0 || type_value > 255)
            goto fall_back;
        types[i] = (unsigned char)type_value;

        /* IA5 name (check_ia5: ASCII) */
        if (!PyUnicode_CheckExact(name))
            goto fall_back;
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(name) < 0)
            goto fall_back_clear;
#endif
        if (!PyUnicode_IS_ASCII(name))
            goto fall_back;
        /* bytes; text (content type 1 or 2) that is not ASCII is checked
           for UTF-8 by the Python encoder */
        if (!PyBytes_CheckExact(data))
            goto fall_back;
        Py_ssize_t name_length = PyUnicode_GET_LENGTH(name);
        Py_ssize_t data_length = PyBytes_GET_SIZE(data);
        if ((type_value == 1 || type_value == 2) &&
            !is_ascii((const unsigned char *)PyBytes_AS_STRING(data), data_length))
            goto fall_back;
        Py_ssize_t entry_size = length_size(name_length) + name_length + 1 + length_size(data_length) + data_length;
        if (body > PY_SSIZE_T_MAX / 2 - entry_size)
            goto fall_back;
        body += entry_size;
    }

    result = PyBytes_FromStringAndSize(NULL, 5 + length_size(body) + body);
    if (result == NULL)
        goto release;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(result);
    *p++ = kind;
    for (int shift = 24; shift >= 0; shift -= 8)
        *p++ = (unsigned char)(request_id >> shift);
    p = put_length(p, body);
    if (kind == 7)
        for (int shift = 56; shift >= 0; shift -= 8)
            *p++ = (unsigned char)(amount >> shift);
    *p++ = 1;
    *p++ = (unsigned char)count;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t name_length = PyUnicode_GET_LENGTH(names[i]);
        p = put_length(p, name_length);
        memcpy(p, PyUnicode_1BYTE_DATA(names[i]), (size_t)name_length);
        p += name_length;
        *p++ = types[i];
        Py_ssize_t data_length = PyBytes_GET_SIZE(datas[i]);
        p = put_length(p, data_length);
        memcpy(p, PyBytes_AS_STRING(datas[i]), (size_t)data_length);
        p += data_length;
    }
    goto release;

fall_back_clear:
    PyErr_Clear();   /* an empty slot: the Python encoder raises its own error */
fall_back:
    result = FALL_BACK;
release:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(names[i]);
        Py_DECREF(datas[i]);
    }
    Py_XDECREF(entries);
    return result;
}

static PyObject *
encode_call(PyObject *module_self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Codec *self = (Codec *)module_self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* encode_packet(packet) or encode_packet(packet, validate=True) only:
       validate=False (forging) and any other argument are the Python
       function's. */
    int understood = nargs == 1 && nkw == 0;
    if (nargs == 1 && nkw == 1 && args[1] == Py_True)
        understood = only_keyword_is(kwnames, self->validate_name);
    if (understood) {
        PyObject *encoded = encode_common(self, args[0]);
        if (encoded != NULL || PyErr_Occurred())
            return encoded;
    }
    return PyObject_Vectorcall(self->encode_fallback, args, nargsf, kwnames);
}

static PyMethodDef encode_call_def = {
    "encode_packet", (PyCFunction)(void (*)(void))encode_call, METH_FASTCALL | METH_KEYWORDS,
    "encode_packet(packet, *, validate=True)\n--\n\n"
    "reference_impl.btp.packet.encode_packet with its common case in C\n"
    "(reference_impl/btp/_fastcodec.c); same results, same errors.",
};

/* ---------------------------------------------------------------- the codec */

static int
codec_traverse(Codec *self, visitproc visit, void *arg)
{
    Py_VISIT(self->decode_fallback);
    Py_VISIT(self->encode_fallback);
    Py_VISIT(self->content_type_type);
    Py_VISIT(self->entry_type);
    for (int i = 0; i < PACKET_CLASSES; i++) {
        Py_VISIT(self->classes[i].type);
        Py_VISIT(self->classes[i].request_id);
        Py_VISIT(self->classes[i].protocol_data);
    }
    Py_VISIT(self->entry_name);
    Py_VISIT(self->entry_content_type);
    Py_VISIT(self->entry_data);
    Py_VISIT(self->transfer_amount);
    return 0;
}

static int
codec_clear(Codec *self)
{
    Py_CLEAR(self->decode_fallback);
    Py_CLEAR(self->encode_fallback);
    Py_CLEAR(self->content_type_type);
    Py_CLEAR(self->entry_type);
    for (int i = 0; i < PACKET_CLASSES; i++) {
        Py_CLEAR(self->classes[i].type);
        Py_CLEAR(self->classes[i].request_id);
        Py_CLEAR(self->classes[i].protocol_data);
    }
    Py_CLEAR(self->entry_name);
    Py_CLEAR(self->entry_content_type);
    Py_CLEAR(self->entry_data);
    Py_CLEAR(self->transfer_amount);
    Py_CLEAR(self->validate_name);
    for (int i = 0; i < self->cached; i++)
        Py_CLEAR(self->cache[i].text);
    self->cached = 0;
    return 0;
}

static void
codec_dealloc(Codec *self)
{
    PyObject_GC_UnTrack(self);
    codec_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject CodecType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reference_impl.btp._fastcodec.Codec",
    .tp_basicsize = sizeof(Codec),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What the decode_packet and encode_packet made by make_codec() share.",
    .tp_traverse = (traverseproc)codec_traverse,
    .tp_clear = (inquiry)codec_clear,
    .tp_dealloc = (destructor)codec_dealloc,
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
make_codec(PyObject *module, PyObject *args)
{
    PyObject *decode_fallback, *encode_fallback;
    PyTypeObject *entry, *message, *response, *transfer, *content_type;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!O!:make_codec", &decode_fallback, &encode_fallback,
                          &PyType_Type, &entry, &PyType_Type, &message, &PyType_Type, &response,
                          &PyType_Type, &transfer, &PyType_Type, &content_type))
        return NULL;
    if (!PyCallable_Check(decode_fallback) || !PyCallable_Check(encode_fallback)) {
        PyErr_SetString(PyExc_TypeError, "make_codec: the fallbacks must be callable");
        return NULL;
    }
    if (!PyType_IsSubtype(content_type, &PyLong_Type)) {
        PyErr_SetString(PyExc_TypeError, "make_codec: ContentType must be an int subclass");
        return NULL;
    }
    Codec *self = PyObject_GC_New(Codec, &CodecType);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof(Codec) - sizeof(PyObject));
    PyObject_GC_Track(self);
    self->decode_fallback = Py_NewRef(decode_fallback);
    self->encode_fallback = Py_NewRef(encode_fallback);
    self->entry_type = (PyTypeObject *)Py_NewRef(entry);
    self->content_type_type = (PyTypeObject *)Py_NewRef(content_type);
    PyObject *decode = NULL, *encode = NULL, *pair = NULL;
    PyTypeObject *types[PACKET_CLASSES] = {[RESPONSE] = response, [MESSAGE] = message, [TRANSFER] = transfer};
    for (int i = 0; i < PACKET_CLASSES; i++) {
        PacketClass *packet_class = &self->classes[i];
        packet_class->kind = PACKET_KINDS[i];
        packet_class->type = (PyTypeObject *)Py_NewRef(types[i]);
        if ((packet_class->request_id = slot_descriptor(types[i], "request_id")) == NULL ||
            (packet_class->protocol_data = slot_descriptor(types[i], "protocol_data")) == NULL)
            goto done;
    }
    if ((self->entry_name = slot_descriptor(entry, "name")) == NULL ||
        (self->entry_content_type = slot_descriptor(entry, "content_type")) == NULL ||
        (self->entry_data = slot_descriptor(entry, "data")) == NULL ||
        (self->transfer_amount = slot_descriptor(transfer, "amount")) == NULL ||
        (self->validate_name = PyUnicode_InternFromString("validate")) == NULL ||
        (decode = PyCFunction_NewEx(&decode_call_def, (PyObject *)self, NULL)) == NULL ||
        (encode = PyCFunction_NewEx(&encode_call_def, (PyObject *)self, NULL)) == NULL)
        goto done;
    pair = PyTuple_Pack(2, decode, encode);
done:
    Py_XDECREF(decode);
    Py_XDECREF(encode);
    Py_DECREF(self);
    return pair;
}

static PyMethodDef module_methods[] = {
    {"make_codec", make_codec, METH_VARARGS,
     "make_codec(decode_fallback, encode_fallback, ProtocolDataEntry, Message, Response, Transfer, ContentType)\n--\n\n"
     "(decode_packet, encode_packet) that handle the common packets in C and hand\n"
     "everything else to the fallbacks, called with the caller's arguments."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastcodec",
    "The common cases of reference_impl.btp.packet.decode_packet and encode_packet in C.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__fastcodec(void)
{
    if (PyType_Ready(&CodecType) < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
