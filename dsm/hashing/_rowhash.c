/* The compiled kernel of the row fingerprint dsm-rows-v1 (docs/fingerprint.md).
 *
 * It computes, straight from Arrow buffers and with the GIL released, the per-value hashes that the
 * pure-Python path in dsm/hashing/fingerprint.py computes one value at a time: XXH3 of each string or binary value
 * (offsets, views and fixed-size layouts), XXH3 of each decimal's normalised text, and the sums over the
 * elements of each list. Every function takes the buffers, the first slot and the slot count, and writes
 * one uint64 per slot into a caller-allocated writable buffer, so the kernel needs neither NumPy nor
 * pyarrow headers. Null slots are hashed like any other (their bytes are whatever the buffer holds); the
 * caller overwrites them with the null hash. Offsets and views are bounds-checked: a malformed array
 * raises ValueError instead of reading outside its buffers. For number, date and instant fields,
 * fold_numbers and fold_instants do the hashing, the null hash and the fold into the row hashes in one
 * pass, with no array of value hashes between them.
 *
 * Beside the fingerprint it computes the read order's block permutation (keyed_order), which the shuffled
 * iterator needs once per block of rows and NumPy's argsort made a quarter of a shuffled epoch's time.
 *
 * xxHash comes from the system's xxhash.h (Debian: libxxhash-dev), inlined, so the built module does not
 * depend on a shared library at run time. xxhash.h picks its vector code when it is compiled, and a build
 * for any x86-64 gets SSE2; values longer than 240 bytes (most text) are hashed by the AVX-512 or AVX2 form
 * where the CPU has it, chosen when the module loads (see long_hash).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
#define LONG_HASH_DISPATCH 1
#define XXH_X86DISPATCH 1
#include <immintrin.h>
#define XXH_DISPATCH_AVX2 1
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#define XXH_TARGET_AVX512 __attribute__((__target__("avx512f")))
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#if !defined(__SIZEOF_INT128__)
#error "the dsm row-hash kernel needs a compiler with 128-bit integers"
#endif

typedef unsigned __int128 u128;

static inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The loops that apply fmix64 to every slot of a column are built several times, for x86-64-v4 (AVX-512:
 * eight 64-bit multiplies at once), v3 (AVX2) and the baseline, and the loader picks the one the CPU runs
 * (GCC's function multi-versioning): the vector forms hashed numbers in about half the time. Integer
 * arithmetic only, so every form gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

/* XXH3-64 with a seed, as XXH3_64bits_withSeed, but with the seed's secret made once per array rather than
 * once per value longer than 240 bytes (xxhash.h documents the two as giving identical results). */
typedef struct {
    uint64_t seed;
    unsigned char secret[XXH3_SECRET_DEFAULT_SIZE];
} seeded_hash;

static void seeded_init(seeded_hash *h, uint64_t seed) {
    h->seed = seed;
    XXH3_generateSecret_fromSeed(h->secret, seed);
}

/* XXH3-64 of an input longer than XXH3_MIDSIZE_MAX (240 bytes) with a secret, as
 * XXH3_64bits_withSecretandSeed computes it there (the seed is not used), by xxhash.h's loop over stripes
 * with the accumulate and scramble steps of one instruction set. xxhash.h gives every form the same bits
 * (tests/test_fingerprint_kernel.py compares each form the CPU runs with xxhash's own digest). The AVX2 and
 * AVX-512 forms are built where xxhash.h is the version whose internal names they use (0.8.1); the
 * "default" form, the header's own (SSE2 on any x86-64), is always built. */
typedef uint64_t (*long_hash_fn)(const void *, size_t, const void *, size_t);

static uint64_t long_hash_default(const void *data, size_t len, const void *secret, size_t size) {
    return XXH3_64bits_withSecretandSeed(data, len, secret, size, 0);
}

#if defined(LONG_HASH_DISPATCH) && XXH_VERSION_NUMBER == 801
#define LONG_HASH_FORMS 1
__attribute__((__target__("avx2"), noinline)) static uint64_t long_hash_avx2(const void *data, size_t len,
                                                                            const void *secret, size_t size) {
    return XXH3_hashLong_64b_internal(data, len, secret, size, XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}

__attribute__((__target__("avx512f"), noinline)) static uint64_t long_hash_avx512(const void *data, size_t len,
                                                                                 const void *secret, size_t size) {
    return XXH3_hashLong_64b_internal(data, len, secret, size, XXH3_accumulate_512_avx512,
                                      XXH3_scrambleAcc_avx512);
}
#endif

/* The form of long_hash the CPU runs, and its name (set when the module loads). */
static long_hash_fn long_hash = long_hash_default;
static const char *long_hash_form = "default";

static inline uint64_t seeded(const seeded_hash *h, const void *data, size_t len) {
    if (len <= XXH3_MIDSIZE_MAX) return XXH3_64bits_withSecretandSeed(data, len, h->secret, sizeof h->secret, h->seed);
    return long_hash(data, len, h->secret, sizeof h->secret);
}

static inline int64_t read_offset(const char *base, Py_ssize_t index, int width) {
    if (width == 4) {
        int32_t v;
        memcpy(&v, base + index * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, base + index * 8, 8);
    return v;
}

/* Checks shared by every entry point: a sane slot range and an output buffer of count uint64s. */
static int check_slots(Py_ssize_t start, Py_ssize_t count, const Py_buffer *out) {
    if (start < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "start and count must not be negative");
        return -1;
    }
    if (out->len < count * (Py_ssize_t)sizeof(uint64_t)) {
        PyErr_SetString(PyExc_ValueError, "output buffer is smaller than count uint64 values");
        return -1;
    }
    return 0;
}

static int check_offsets(const Py_buffer *offsets, Py_ssize_t start, Py_ssize_t count, int width) {
    if (width != 4 && width != 8) {
        PyErr_SetString(PyExc_ValueError, "offset width must be 4 or 8");
        return -1;
    }
    if (offsets->len < (start + count + 1) * width) {
        PyErr_SetString(PyExc_ValueError, "offsets buffer is shorter than the slots it must describe");
        return -1;
    }
    return 0;
}

/* hash_binary(offsets, data, start, count, offset_width, seed, out): XXH3-64 with ``seed`` of each value of
 * a string/binary array (32-bit offsets) or large_string/large_binary array (64-bit offsets). */
static PyObject *hash_binary(PyObject *self, PyObject *args) {
    Py_buffer offsets, data, out;
    Py_ssize_t start, count;
    int width;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*y*nniKw*", &offsets, &data, &start, &count, &width, &seed, &out))
        return NULL;
    PyObject *result = NULL;
    if (check_slots(start, count, &out) < 0 || check_offsets(&offsets, start, count, width) < 0)
        goto done;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    seeded_hash h;
    seeded_init(&h, seed);
    const char *off = (const char *)offsets.buf;
    const char *bytes = (const char *)data.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    int64_t begin = read_offset(off, start, width);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t end = read_offset(off, start + i + 1, width);
        if (begin < 0 || end < begin || end > data.len) {
            bad = i;
            break;
        }
        dst[i] = seeded(&h, bytes + begin, (size_t)(end - begin));
        begin = end;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "offsets of slot %zd lie outside the data buffer", start + bad);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* hash_fixed_binary(data, start, count, width, seed, out): XXH3-64 of each ``width``-byte value. */
static PyObject *hash_fixed_binary(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t start, count, width;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*nnnKw*", &data, &start, &count, &width, &seed, &out)) return NULL;
    PyObject *result = NULL;
    if (check_slots(start, count, &out) < 0) goto done;
    if (width < 0 || data.len < (start + count) * width) {
        PyErr_SetString(PyExc_ValueError, "data buffer is shorter than count values of the given width");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    seeded_hash h;
    seeded_init(&h, seed);
    const char *bytes = (const char *)data.buf + start * width;
    uint64_t *dst = (uint64_t *)out.buf;
    for (Py_ssize_t i = 0; i < count; i++) dst[i] = seeded(&h, bytes + i * width, (size_t)width);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* hash_binary_views(views, data_buffers, validity, start, count, seed, out): XXH3-64 of each value of a
 * string_view/binary_view array. A view is 16 bytes: int32 length, then either the value inline (length
 * up to 12) or a 4-byte prefix, the int32 index of a data buffer and the int32 offset in it. The views of
 * null slots (``validity`` a bitmap, or None when there are none) are not read: they may hold anything. */
static PyObject *hash_binary_views(PyObject *self, PyObject *args) {
    Py_buffer views, out, validity = {0};
    PyObject *buffer_list, *validity_object;
    Py_ssize_t start, count;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*OOnnKw*", &views, &buffer_list, &validity_object, &start, &count, &seed, &out))
        return NULL;
    PyObject *result = NULL;
    PyObject *seq = NULL;
    Py_buffer *buffers = NULL;
    Py_ssize_t held = 0;
    if (check_slots(start, count, &out) < 0) goto done;
    if (validity_object != Py_None) {
        if (PyObject_GetBuffer(validity_object, &validity, PyBUF_SIMPLE) < 0) goto done;
        if (validity.len * 8 < start + count) {
            PyErr_SetString(PyExc_ValueError, "validity bitmap is shorter than its slots");
            goto done;
        }
    }
    if (views.len < (start + count) * 16) {
        PyErr_SetString(PyExc_ValueError, "views buffer is shorter than count views");
        goto done;
    }
    seq = PySequence_Fast(buffer_list, "data buffers must be a sequence");
    if (seq == NULL) goto done;
    Py_ssize_t nbuffers = PySequence_Fast_GET_SIZE(seq);
    buffers = PyMem_Calloc(nbuffers ? (size_t)nbuffers : 1, sizeof(Py_buffer));
    if (buffers == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < nbuffers; held++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), &buffers[held], PyBUF_SIMPLE) < 0) goto done;
    }
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    seeded_hash h;
    seeded_init(&h, seed);
    const unsigned char *view = (const unsigned char *)views.buf + start * 16;
    const unsigned char *bits = (const unsigned char *)validity.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    for (Py_ssize_t i = 0; i < count; i++, view += 16) {
        int32_t length, index, offset;
        Py_ssize_t bit = start + i;
        if (bits != NULL && !((bits[bit >> 3] >> (bit & 7)) & 1)) {
            dst[i] = 0; /* a null slot: its hash is replaced by the caller */
            continue;
        }
        memcpy(&length, view, 4);
        if (length < 0) {
            bad = i;
            break;
        }
        if (length <= 12) {
            dst[i] = seeded(&h, view + 4, (size_t)length);
            continue;
        }
        memcpy(&index, view + 8, 4);
        memcpy(&offset, view + 12, 4);
        if (index < 0 || index >= nbuffers || offset < 0 || (Py_ssize_t)offset + length > buffers[index].len) {
            bad = i;
            break;
        }
        dst[i] = seeded(&h, (const char *)buffers[index].buf + offset, (size_t)length);
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "view of slot %zd lies outside its data buffer", start + bad);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t k = 0; k < held; k++) PyBuffer_Release(&buffers[k]);
    PyMem_Free(buffers);
    Py_XDECREF(seq);
    if (validity.obj != NULL) PyBuffer_Release(&validity);
    PyBuffer_Release(&views);
    PyBuffer_Release(&out);
    return result;
}

/* The decimal digits of the magnitude of a little-endian two's-complement integer of ``width`` bytes
 * (4, 8, 16 or 32), most significant first, without leading zeros ("" for zero). Returns the digit count;
 * ``digits`` holds at least 80 chars. */
static int magnitude_digits(const unsigned char *value, int width, int *negative, char *digits) {
    uint64_t limbs[4] = {0, 0, 0, 0};
    int nlimbs = width >= 8 ? width / 8 : 1;
    if (width == 4) {
        int32_t v;
        memcpy(&v, value, 4);
        limbs[0] = (uint64_t)(int64_t)v;
    } else {
        memcpy(limbs, value, (size_t)width);
    }
    *negative = (int)(limbs[nlimbs - 1] >> 63);
    if (*negative) { /* two's complement negation across the limbs */
        unsigned carry = 1;
        for (int k = 0; k < nlimbs; k++) {
            limbs[k] = ~limbs[k] + carry;
            carry = carry && limbs[k] == 0;
        }
    }
    /* Peel off 19 decimal digits at a time, least significant chunk first. */
    const uint64_t chunk_base = 10000000000000000000ULL;
    uint64_t chunks[5];
    int nchunks = 0;
    int top = nlimbs - 1;
    while (top >= 0 && limbs[top] == 0) top--;
    while (top >= 0) {
        u128 rem = 0;
        for (int k = top; k >= 0; k--) {
            u128 cur = (rem << 64) | limbs[k];
            limbs[k] = (uint64_t)(cur / chunk_base);
            rem = cur % chunk_base;
        }
        chunks[nchunks++] = (uint64_t)rem;
        while (top >= 0 && limbs[top] == 0) top--;
    }
    int n = 0;
    for (int c = nchunks - 1; c >= 0; c--) {
        char tmp[20];
        int len = 0;
        for (uint64_t v = chunks[c]; v; v /= 10) tmp[len++] = (char)('0' + v % 10);
        if (c != nchunks - 1)
            while (len < 19) tmp[len++] = '0'; /* inner chunks keep their leading zeros */
        while (len) digits[n++] = tmp[--len];
    }
    return n;
}

/* The normalised text of the decimal ``digits`` x 10^-scale (docs/fingerprint.md): no exponent, no
 * trailing zeros after the point, "0" for zero. Returns its length; ``text`` holds n + |scale| + 3. */
static Py_ssize_t decimal_text(const char *digits, int n, int negative, int scale, char *text) {
    if (n == 0) {
        text[0] = '0';
        return 1;
    }
    Py_ssize_t len = 0;
    if (negative) text[len++] = '-';
    if (scale <= 0) {
        memcpy(text + len, digits, (size_t)n);
        len += n;
        memset(text + len, '0', (size_t)(-(Py_ssize_t)scale));
        return len - (Py_ssize_t)scale;
    }
    while (scale > 0 && digits[n - 1] == '0') {
        n--;
        scale--;
    }
    if (scale == 0) {
        memcpy(text + len, digits, (size_t)n);
        return len + n;
    }
    if (n > scale) {
        memcpy(text + len, digits, (size_t)(n - scale));
        len += n - scale;
        text[len++] = '.';
        memcpy(text + len, digits + n - scale, (size_t)scale);
        return len + scale;
    }
    text[len++] = '0';
    text[len++] = '.';
    memset(text + len, '0', (size_t)(scale - n));
    len += scale - n;
    memcpy(text + len, digits, (size_t)n);
    return len + n;
}

/* hash_decimals(data, start, count, byte_width, scale, seed, out): XXH3-64 with ``seed`` of the normalised
 * text of each decimal32/64/128/256 value (``byte_width`` 4, 8, 16 or 32). */
static PyObject *hash_decimals(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t start, count;
    int width, scale;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*nniiKw*", &data, &start, &count, &width, &scale, &seed, &out)) return NULL;
    PyObject *result = NULL;
    char *text = NULL;
    if (check_slots(start, count, &out) < 0) goto done;
    if (width != 4 && width != 8 && width != 16 && width != 32) {
        PyErr_SetString(PyExc_ValueError, "decimal byte width must be 4, 8, 16 or 32");
        goto done;
    }
    if (data.len < (start + count) * width) {
        PyErr_SetString(PyExc_ValueError, "data buffer is shorter than count decimals");
        goto done;
    }
    size_t text_size = 80 + 3 + (size_t)(scale < 0 ? -(long long)scale : scale);
    text = PyMem_Malloc(text_size);
    if (text == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *value = (const unsigned char *)data.buf + start * width;
    uint64_t *dst = (uint64_t *)out.buf;
    char digits[80];
    for (Py_ssize_t i = 0; i < count; i++, value += width) {
        int negative;
        int n = magnitude_digits(value, width, &negative, digits);
        Py_ssize_t len = decimal_text(digits, n, negative, scale, text);
        dst[i] = XXH3_64bits_withSeed(text, (size_t)len, seed);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(text);
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* decimal_texts(data, start, count, byte_width, scale): the normalised texts as a list of str (for tests). */
static PyObject *decimal_texts(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t start, count;
    int width, scale;
    if (!PyArg_ParseTuple(args, "y*nnii", &data, &start, &count, &width, &scale)) return NULL;
    PyObject *list = NULL;
    char *text = NULL;
    if (start < 0 || count < 0 || (width != 4 && width != 8 && width != 16 && width != 32) ||
        data.len < (start + count) * width) {
        PyErr_SetString(PyExc_ValueError, "bad decimal buffer, slots or width");
        goto done;
    }
    text = PyMem_Malloc(80 + 3 + (size_t)(scale < 0 ? -(long long)scale : scale));
    if (text == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    list = PyList_New(count);
    if (list == NULL) goto done;
    const unsigned char *value = (const unsigned char *)data.buf + start * width;
    char digits[80];
    for (Py_ssize_t i = 0; i < count; i++, value += width) {
        int negative;
        int n = magnitude_digits(value, width, &negative, digits);
        Py_ssize_t len = decimal_text(digits, n, negative, scale, text);
        PyObject *item = PyUnicode_FromStringAndSize(text, len);
        if (item == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, item);
    }
done:
    PyMem_Free(text);
    PyBuffer_Release(&data);
    return list;
}

/* hash_lists(offsets, start, count, offset_width, children, tag, ordered, out): for each list slot with
 * elements e_0..e_{k-1} (child hashes children[offsets[i] - offsets[start] ...]),
 *   ordered:   fmix(sum_j fmix(h(e_j) ^ fmix(j + tag)) ^ fmix(k ^ tag))
 *   unordered: fmix(sum_j fmix(h(e_j) ^ tag) ^ fmix(k ^ tag))          (maps: entries in any order)
 * with sums mod 2^64. ``children`` holds the uint64 hashes of the child values the slots span. */
static PyObject *hash_lists(PyObject *self, PyObject *args) {
    Py_buffer offsets, children, out;
    Py_ssize_t start, count;
    int width, ordered;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "y*nniy*Kpw*", &offsets, &start, &count, &width, &children, &tag, &ordered, &out))
        return NULL;
    PyObject *result = NULL;
    if (check_slots(start, count, &out) < 0 || check_offsets(&offsets, start, count, width) < 0) goto done;
    Py_ssize_t nchildren = children.len / (Py_ssize_t)sizeof(uint64_t);
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    const char *off = (const char *)offsets.buf;
    const uint64_t *child = (const uint64_t *)children.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    int64_t base = read_offset(off, start, width);
    int64_t begin = base;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t end = read_offset(off, start + i + 1, width);
        if (end < begin || end - base > nchildren) {
            bad = i;
            break;
        }
        uint64_t sum = 0;
        const uint64_t *h = child + (begin - base);
        int64_t k = end - begin;
        if (ordered) {
            for (int64_t j = 0; j < k; j++) sum += fmix64(h[j] ^ fmix64((uint64_t)j + tag));
        } else {
            for (int64_t j = 0; j < k; j++) sum += fmix64(h[j] ^ tag);
        }
        dst[i] = fmix64(sum ^ fmix64((uint64_t)k ^ tag));
        begin = end;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "offsets of list slot %zd lie outside the child values", start + bad);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&children);
    PyBuffer_Release(&out);
    return result;
}

/* The width in bytes of a number kind of hash_numbers, or 0 for an unknown kind. */
static Py_ssize_t number_width(int kind) {
    switch (kind) {
    case 'b': case 'B': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': case 'f': return 4;
    case 'q': case 'Q': case 'd': return 8;
    default: return 0;
    }
}

/* dst[i] = fmix(v ^ tag) of the count numbers of ``kind`` at src (already at the first slot). */
VECTOR_CLONES
static void numbers_into(const char *src, Py_ssize_t count, int kind, uint64_t tag, uint64_t high_tag,
                         uint64_t *dst) {
#define SIGNED_LOOP(T)                                                                  \
    for (Py_ssize_t i = 0; i < count; i++) {                                            \
        T v;                                                                            \
        memcpy(&v, src + i * (Py_ssize_t)sizeof(T), sizeof(T));                         \
        dst[i] = fmix64((uint64_t)(int64_t)v ^ tag);                                    \
    }
#define UNSIGNED_LOOP(T)                                                                \
    for (Py_ssize_t i = 0; i < count; i++) {                                            \
        T v;                                                                            \
        memcpy(&v, src + i * (Py_ssize_t)sizeof(T), sizeof(T));                         \
        uint64_t u = (uint64_t)v;                                                       \
        dst[i] = fmix64(u ^ (u >> 63 ? high_tag : tag));                                \
    }
    switch (kind) {
    case 'b': SIGNED_LOOP(int8_t) break;
    case 'h': SIGNED_LOOP(int16_t) break;
    case 'i': SIGNED_LOOP(int32_t) break;
    case 'q': SIGNED_LOOP(int64_t) break;
    case 'B': UNSIGNED_LOOP(uint8_t) break;
    case 'H': UNSIGNED_LOOP(uint16_t) break;
    case 'I': UNSIGNED_LOOP(uint32_t) break;
    case 'Q': UNSIGNED_LOOP(uint64_t) break;
    case 'f':
    case 'd':
        for (Py_ssize_t i = 0; i < count; i++) {
            double v;
            if (kind == 'f') {
                float f;
                memcpy(&f, src + i * 4, 4);
                v = (double)f;
            } else {
                memcpy(&v, src + i * 8, 8);
            }
            uint64_t bits;
            memcpy(&bits, &v, 8);
            if (v != v) bits = 0x7ff8000000000000ULL;
            dst[i] = fmix64(bits ^ tag);
        }
        break;
    }
#undef SIGNED_LOOP
#undef UNSIGNED_LOOP
}

/* hash_numbers(data, start, count, kind, tag, high_tag, out): fmix(v ^ tag) of each fixed-width number.
 * ``kind`` is the element: 'b' 'h' 'i' 'q' (signed 8-64 bit, sign-extended to 64), 'B' 'H' 'I' 'Q'
 * (unsigned; from 2^63 on the tag is ``high_tag``), 'f' 'd' (float32 widened to float64, then its bits,
 * every NaN made 0x7ff8000000000000). */
static PyObject *hash_numbers(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t start, count;
    int kind;
    unsigned long long tag, high_tag;
    if (!PyArg_ParseTuple(args, "y*nnCKKw*", &data, &start, &count, &kind, &tag, &high_tag, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t width = number_width(kind);
    if (width == 0) {
        PyErr_Format(PyExc_ValueError, "unknown number kind %c", kind);
        goto done;
    }
    if (check_slots(start, count, &out) < 0) goto done;
    if (data.len < (start + count) * width) {
        PyErr_SetString(PyExc_ValueError, "data buffer is shorter than count numbers");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    numbers_into((const char *)data.buf + start * width, count, kind, tag, high_tag, (uint64_t *)out.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* dst[i] = the hash of instant start+i of the int32/int64 (``width``) counts of units at src: whole seconds s
 * (floor) and nanoseconds n in [0, 10^9), fmix(fmix(s ^ tag) ^ n). */
static void instants_into(const char *src, Py_ssize_t start, Py_ssize_t count, int width, int64_t per_second,
                          int64_t ns_per_unit, uint64_t tag, uint64_t *dst) {
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t v = read_offset(src, start + i, width);
        int64_t seconds = v / per_second, rest = v % per_second;
        if (rest < 0) {
            seconds -= 1;
            rest += per_second;
        }
        dst[i] = fmix64(fmix64((uint64_t)seconds ^ tag) ^ (uint64_t)(rest * ns_per_unit));
    }
}

static int check_instant_units(int width, long long per_second, long long ns_per_unit) {
    if ((width != 4 && width != 8) || per_second < 1 || ns_per_unit < 1 || per_second * ns_per_unit != 1000000000LL) {
        PyErr_SetString(PyExc_ValueError, "width must be 4 or 8 and per_second * ns_per_unit one second");
        return -1;
    }
    return 0;
}

/* hash_instants(data, start, count, width, per_second, ns_per_unit, tag, out): each int32/int64 count of
 * units split exactly into whole seconds s (floor) and nanoseconds n in [0, 10^9):
 * fmix(fmix(s ^ tag) ^ n). */
static PyObject *hash_instants(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t start, count;
    int width;
    long long per_second, ns_per_unit;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "y*nniLLKw*", &data, &start, &count, &width, &per_second, &ns_per_unit, &tag, &out))
        return NULL;
    PyObject *result = NULL;
    if (check_slots(start, count, &out) < 0) goto done;
    if (check_instant_units(width, per_second, ns_per_unit) < 0) goto done;
    if (data.len < (start + count) * width) {
        PyErr_SetString(PyExc_ValueError, "data buffer is shorter than count values");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    instants_into((const char *)data.buf, start, count, width, per_second, ns_per_unit, tag, (uint64_t *)out.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* dst[i] = null_hash where bit offset+i of the Arrow validity bitmap ``bits`` is 0. */
static void nulls_into(const unsigned char *bits, Py_ssize_t offset, Py_ssize_t count, uint64_t null_hash,
                       uint64_t *dst) {
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t bit = offset + i;
        if (!((bits[bit >> 3] >> (bit & 7)) & 1)) dst[i] = null_hash;
    }
}

/* apply_nulls(validity, offset, count, null_hash, out): out[i] = null_hash where bit offset+i of the Arrow
 * validity bitmap is 0. */
static PyObject *apply_nulls(PyObject *self, PyObject *args) {
    Py_buffer validity, out;
    Py_ssize_t offset, count;
    unsigned long long null_hash;
    if (!PyArg_ParseTuple(args, "y*nnKw*", &validity, &offset, &count, &null_hash, &out)) return NULL;
    PyObject *result = NULL;
    if (check_slots(offset, count, &out) < 0) goto done;
    if (validity.len * 8 < offset + count) {
        PyErr_SetString(PyExc_ValueError, "validity bitmap is shorter than its slots");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    nulls_into((const unsigned char *)validity.buf, offset, count, null_hash, (uint64_t *)out.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&validity);
    PyBuffer_Release(&out);
    return result;
}

/* acc[i] += fmix(h[i] ^ key) for n slots. */
VECTOR_CLONES
static void fold_into(uint64_t *acc, const uint64_t *h, Py_ssize_t n, uint64_t key) {
    for (Py_ssize_t i = 0; i < n; i++) acc[i] += fmix64(h[i] ^ key);
}

/* fold(total, hashes, key): total[i] += fmix(hashes[i] ^ key), mod 2^64, in place (a field of a row or
 * struct, keyed by its name). */
static PyObject *fold(PyObject *self, PyObject *args) {
    Py_buffer total, hashes;
    unsigned long long key;
    if (!PyArg_ParseTuple(args, "w*y*K", &total, &hashes, &key)) return NULL;
    PyObject *result = NULL;
    if (total.len != hashes.len || total.len % 8) {
        PyErr_SetString(PyExc_ValueError, "total and hashes must be uint64 buffers of one length");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    fold_into((uint64_t *)total.buf, (const uint64_t *)hashes.buf, total.len / 8, key);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&total);
    PyBuffer_Release(&hashes);
    return result;
}

/* v[i] = fmix(v[i] ^ tag) for n slots. */
VECTOR_CLONES
static void finish_into(uint64_t *v, Py_ssize_t n, uint64_t tag) {
    for (Py_ssize_t i = 0; i < n; i++) v[i] = fmix64(v[i] ^ tag);
}

/* finish(values, tag): values[i] = fmix(values[i] ^ tag), in place. */
static PyObject *finish(PyObject *self, PyObject *args) {
    Py_buffer values;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "w*K", &values, &tag)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    finish_into((uint64_t *)values.buf, values.len / 8, tag);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&values);
    Py_RETURN_NONE;
}

/* The fused folds below hash this many slots at a time into a block on the stack (it stays in the L1
 * cache), then fold the block into the row totals. */
#define FOLD_BLOCK 512

/* The checks of a fused fold: ``total`` holds exactly ``count`` uint64s, and ``validity`` is None (no slot
 * is null) or a bitmap covering bits start..start+count-1, taken into ``bits`` (``*has_bits`` set). */
static int fold_args(const Py_buffer *total, Py_ssize_t start, Py_ssize_t count, PyObject *validity,
                     Py_buffer *bits, int *has_bits) {
    *has_bits = 0;
    if (start < 0 || count < 0 || total->len != count * (Py_ssize_t)sizeof(uint64_t)) {
        PyErr_SetString(PyExc_ValueError, "total must hold count uint64 values and start must not be negative");
        return -1;
    }
    if (validity == Py_None) return 0;
    if (PyObject_GetBuffer(validity, bits, PyBUF_SIMPLE) < 0) return -1;
    *has_bits = 1;
    if (bits->len * 8 < start + count) {
        PyErr_SetString(PyExc_ValueError, "validity bitmap is shorter than its slots");
        return -1;
    }
    return 0;
}

/* Where a fused fold takes its value hashes from: numbers (hash_numbers) or instants (hash_instants). */
typedef struct {
    const char *data;
    int instants;
    int kind;        /* numbers: hash_numbers' kind */
    Py_ssize_t width;
    uint64_t tag, high_tag;
    int64_t per_second, ns_per_unit; /* instants */
} fold_source;

/* The loop of both fused folds: block by block, the value hashes, the null hash over null slots, folded. */
static void fold_values(uint64_t *acc, const fold_source *src, const unsigned char *bits, Py_ssize_t start,
                        Py_ssize_t count, uint64_t null_hash, uint64_t key) {
    uint64_t block[FOLD_BLOCK];
    for (Py_ssize_t at = 0; at < count; at += FOLD_BLOCK) {
        Py_ssize_t n = count - at < FOLD_BLOCK ? count - at : FOLD_BLOCK;
        if (src->instants)
            instants_into(src->data, start + at, n, (int)src->width, src->per_second, src->ns_per_unit, src->tag,
                          block);
        else
            numbers_into(src->data + (start + at) * src->width, n, src->kind, src->tag, src->high_tag, block);
        if (bits != NULL) nulls_into(bits, start + at, n, null_hash, block);
        fold_into(acc + at, block, n, key);
    }
}

/* The checks and the run of a fused fold, its buffers released after. */
static PyObject *fold_run(Py_buffer *total, Py_buffer *data, PyObject *validity, Py_ssize_t start,
                          Py_ssize_t count, fold_source *src, uint64_t null_hash, uint64_t key) {
    Py_buffer bits;
    int has_bits = 0;
    PyObject *result = NULL;
    if (fold_args(total, start, count, validity, &bits, &has_bits) < 0) goto done;
    if (data->len < (start + count) * src->width) {
        PyErr_SetString(PyExc_ValueError, "data buffer is shorter than count values");
        goto done;
    }
    src->data = (const char *)data->buf;
    Py_BEGIN_ALLOW_THREADS
    fold_values((uint64_t *)total->buf, src, has_bits ? (const unsigned char *)bits.buf : NULL, start, count,
                null_hash, key);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    if (has_bits) PyBuffer_Release(&bits);
    PyBuffer_Release(total);
    PyBuffer_Release(data);
    return result;
}

/* fold_numbers(total, data, validity, start, count, kind, tag, high_tag, null_hash, key): hash_numbers of
 * slots start..start+count-1 of ``data``, ``null_hash`` where ``validity`` (an Arrow bitmap, or None when
 * no slot is null) marks a slot null, each folded into ``total`` as fold does: the three steps in one pass
 * with no array of value hashes between them (whose allocation and first touch cost more than hashing). */
static PyObject *fold_numbers(PyObject *self, PyObject *args) {
    Py_buffer total, data;
    PyObject *validity;
    Py_ssize_t start, count;
    int kind;
    unsigned long long tag, high_tag, null_hash, key;
    if (!PyArg_ParseTuple(args, "w*y*OnnCKKKK", &total, &data, &validity, &start, &count, &kind, &tag, &high_tag,
                          &null_hash, &key))
        return NULL;
    fold_source src = {.instants = 0, .kind = kind, .width = number_width(kind), .tag = tag, .high_tag = high_tag};
    if (src.width == 0) {
        PyErr_Format(PyExc_ValueError, "unknown number kind %c", kind);
        PyBuffer_Release(&total);
        PyBuffer_Release(&data);
        return NULL;
    }
    return fold_run(&total, &data, validity, start, count, &src, null_hash, key);
}

/* fold_instants(total, data, validity, start, count, width, per_second, ns_per_unit, tag, null_hash, key):
 * as fold_numbers, with the hashes of hash_instants. */
static PyObject *fold_instants(PyObject *self, PyObject *args) {
    Py_buffer total, data;
    PyObject *validity;
    Py_ssize_t start, count;
    int width;
    long long per_second, ns_per_unit;
    unsigned long long tag, null_hash, key;
    if (!PyArg_ParseTuple(args, "w*y*OnniLLKKK", &total, &data, &validity, &start, &count, &width, &per_second,
                          &ns_per_unit, &tag, &null_hash, &key))
        return NULL;
    if (check_instant_units(width, per_second, ns_per_unit) < 0) {
        PyBuffer_Release(&total);
        PyBuffer_Release(&data);
        return NULL;
    }
    fold_source src = {.instants = 1, .width = width, .tag = tag, .per_second = per_second, .ns_per_unit = ns_per_unit};
    return fold_run(&total, &data, validity, start, count, &src, null_hash, key);
}

static inline uint64_t mod_p61(u128 x) {
    const uint64_t p = (1ULL << 61) - 1;
    uint64_t lo = (uint64_t)x & p, hi = (uint64_t)(x >> 61);
    /* x < 2^125 here, so hi < 2^64 and one fold plus two conditional subtractions reduce it. */
    uint64_t r = lo + (hi & p) + (hi >> 61);
    r = (r & p) + (r >> 61);
    return r >= p ? r - p : r;
}

/* x mod 2^61-1 for a 64-bit x, without a division (2^61 = 1 mod p). */
static inline uint64_t reduce_p61(uint64_t x) {
    const uint64_t p = (1ULL << 61) - 1;
    uint64_t r = (x & p) + (x >> 61);
    return r >= p ? r - p : r;
}

static inline uint64_t mulmod_p61(uint64_t a, uint64_t b) { return mod_p61((u128)a * b); }

/* One Horner step l * g + v with l < 2^62, g < 2^61, v < 2^61, reduced only partly: the result is
 * congruent mod 2^61-1 and below 2^62, which keeps the next product below 2^123. */
static inline uint64_t horner_p61(uint64_t l, uint64_t g, uint64_t v) {
    const uint64_t p = (1ULL << 61) - 1;
    u128 x = (u128)l * g + v;
    return ((uint64_t)x & p) + (uint64_t)(x >> 61);
}

/* sum v_i g^(n-1-i) mod 2^61-1 (Horner order) of v_i = reduce(map(r_i)), over four interleaved lanes so
 * that the multiplications do not wait on each other: lane j takes i = 4k + j with base g^4, and the lanes
 * combine as sum_j lane_j g^(3-j); the last n mod 4 values follow by plain Horner steps. */
#define POLY(NAME, MAP)                                                                             \
    static uint64_t NAME(const uint64_t *r, Py_ssize_t n, uint64_t g) {                             \
        uint64_t g2 = mulmod_p61(g, g), g3 = mulmod_p61(g2, g), g4 = mulmod_p61(g2, g2);            \
        uint64_t l0 = 0, l1 = 0, l2 = 0, l3 = 0;                                                    \
        Py_ssize_t m = n - n % 4;                                                                   \
        for (Py_ssize_t i = 0; i < m; i += 4) {                                                     \
            l0 = horner_p61(l0, g4, reduce_p61(MAP(r[i])));                                         \
            l1 = horner_p61(l1, g4, reduce_p61(MAP(r[i + 1])));                                     \
            l2 = horner_p61(l2, g4, reduce_p61(MAP(r[i + 2])));                                     \
            l3 = horner_p61(l3, g4, reduce_p61(MAP(r[i + 3])));                                     \
        }                                                                                           \
        l0 = reduce_p61(l0), l1 = reduce_p61(l1), l2 = reduce_p61(l2), l3 = reduce_p61(l3);        \
        uint64_t acc = mod_p61((u128)l0 * g3 + (u128)l1 * g2 + (u128)l2 * g + l3);                   \
        for (Py_ssize_t i = m; i < n; i++) acc = mod_p61((u128)acc * g + reduce_p61(MAP(r[i])));    \
        return acc;                                                                                 \
    }
#define IDENTITY(x) (x)
POLY(poly_plain, IDENTITY)
POLY(poly_mixed, fmix64)
#undef IDENTITY
#undef POLY

/* digest(row_hashes, k1, k2, g1, g2) -> (u1, u2, o1, o2): the unordered sums sum fmix(r ^ k) mod 2^64 and
 * the ordered polynomials sum v_i g^(n-1-i) mod 2^61-1 (v = r for o1, fmix(r) for o2). */
static PyObject *digest(PyObject *self, PyObject *args) {
    Py_buffer rows;
    unsigned long long k1, k2, g1, g2;
    if (!PyArg_ParseTuple(args, "y*KKKK", &rows, &k1, &k2, &g1, &g2)) return NULL;
    const uint64_t p = (1ULL << 61) - 1;
    if (g1 >= p || g2 >= p) {
        PyBuffer_Release(&rows);
        PyErr_SetString(PyExc_ValueError, "the bases must be below 2^61-1");
        return NULL;
    }
    uint64_t u1 = 0, u2 = 0, o1, o2;
    Py_BEGIN_ALLOW_THREADS
    const uint64_t *r = (const uint64_t *)rows.buf;
    Py_ssize_t n = rows.len / 8;
    for (Py_ssize_t i = 0; i < n; i++) {
        u1 += fmix64(r[i] ^ k1);
        u2 += fmix64(r[i] ^ k2);
    }
    o1 = poly_plain(r, n, g1);
    o2 = poly_mixed(r, n, g2);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&rows);
    return Py_BuildValue("KKKK", (unsigned long long)u1, (unsigned long long)u2, (unsigned long long)o1,
                         (unsigned long long)o2);
}

/* keyed_order(base, out): the read order's block permutation (dsm.hashing.permutation.keyed_permutation):
 * out (int64, n slots) = the indices 0..n-1 sorted by splitmix64(base + i), the SplitMix64 finaliser of
 * base + i + gamma. The keys are distinct (a bijection of distinct integers), so the order is the one every
 * sort gives. The keys are uniform, so one counting pass on their top bits (about two keys a bucket) puts
 * them nearly in order, and each bucket is then sorted on its own (insertion sort; qsort for a bucket of
 * over 32 keys, which keeps the worst case at O(n log n)): O(n) expected, against NumPy's argsort. */
static inline uint64_t splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t key;
    int64_t index;
} keyed_t;

static int keyed_cmp(const void *x, const void *y) {
    uint64_t a = ((const keyed_t *)x)->key, b = ((const keyed_t *)y)->key;
    return (a > b) - (a < b);
}

static PyObject *keyed_order(PyObject *self, PyObject *args) {
    unsigned long long base;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "Kw*", &base, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = out.len / 8;
    keyed_t *sorted = NULL;
    Py_ssize_t *start = NULL;
    if (out.len % 8) {
        PyErr_SetString(PyExc_ValueError, "out must be an int64 buffer");
        goto done;
    }
    int bits = 1;
    while (bits < 20 && ((Py_ssize_t)1 << bits) < n / 2) bits++;
    size_t buckets = (size_t)1 << bits;
    sorted = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(keyed_t));
    start = PyMem_RawCalloc(buckets + 1, sizeof(Py_ssize_t));
    if (sorted == NULL || start == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    const int shift = 64 - bits;
    for (Py_ssize_t i = 0; i < n; i++) start[(splitmix64((uint64_t)base + (uint64_t)i) >> shift) + 1]++;
    for (size_t d = 0; d < buckets; d++) start[d + 1] += start[d];
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t key = splitmix64((uint64_t)base + (uint64_t)i);
        keyed_t *slot = &sorted[start[key >> shift]++];
        slot->key = key;
        slot->index = (int64_t)i;
    }
    /* start[d] is now the end of bucket d (the start of d + 1). */
    Py_ssize_t lo = 0;
    for (size_t d = 0; d < buckets; d++) {
        Py_ssize_t hi = start[d];
        if (hi - lo > 32) {
            qsort(sorted + lo, (size_t)(hi - lo), sizeof(keyed_t), keyed_cmp);
        } else {
            for (Py_ssize_t i = lo + 1; i < hi; i++) {
                keyed_t item = sorted[i];
                Py_ssize_t j = i;
                while (j > lo && sorted[j - 1].key > item.key) {
                    sorted[j] = sorted[j - 1];
                    j--;
                }
                sorted[j] = item;
            }
        }
        lo = hi;
    }
    int64_t *dst = (int64_t *)out.buf;
    for (Py_ssize_t i = 0; i < n; i++) dst[i] = sorted[i].index;
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(sorted);
    PyMem_RawFree(start);
    PyBuffer_Release(&out);
    return result;
}

/* The forms of long_hash the CPU runs, the one in use first. */
static Py_ssize_t long_hash_forms(long_hash_fn *forms, const char **names) {
    Py_ssize_t n = 0;
#ifdef LONG_HASH_FORMS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        forms[n] = long_hash_avx512;
        names[n++] = "avx512";
    }
    if (__builtin_cpu_supports("avx2")) {
        forms[n] = long_hash_avx2;
        names[n++] = "avx2";
    }
#endif
    forms[n] = long_hash_default;
    names[n++] = "default";
    return n;
}

/* long_digests(data, seed): [(form, XXH3-64 of data with seed's secret)] for each form of long_hash the CPU
 * runs: the tests check that every form gives xxHash's digest. */
static PyObject *long_digests(PyObject *self, PyObject *args) {
    Py_buffer data;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &data, &seed)) return NULL;
    if (data.len <= XXH3_MIDSIZE_MAX) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "long_digests takes data longer than 240 bytes");
        return NULL;
    }
    seeded_hash h;
    seeded_init(&h, seed);
    long_hash_fn forms[3];
    const char *names[3];
    Py_ssize_t n = long_hash_forms(forms, names);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; ++i) {
        uint64_t digest = forms[i](data.buf, (size_t)data.len, h.secret, sizeof h.secret);
        PyObject *item = Py_BuildValue("(sK)", names[i], (unsigned long long)digest);
        if (item == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, item);
    }
    PyBuffer_Release(&data);
    return out;
}

static PyMethodDef methods[] = {
    {"long_digests", long_digests, METH_VARARGS, "[(form, digest)] of data for each long-input form the CPU runs."},
    {"hash_binary", hash_binary, METH_VARARGS, "XXH3-64 of each value of a string/binary array (by offsets)."},
    {"hash_fixed_binary", hash_fixed_binary, METH_VARARGS, "XXH3-64 of each value of a fixed_size_binary array."},
    {"hash_binary_views", hash_binary_views, METH_VARARGS, "XXH3-64 of each value of a string/binary view array."},
    {"hash_decimals", hash_decimals, METH_VARARGS, "XXH3-64 of each decimal's normalised text."},
    {"decimal_texts", decimal_texts, METH_VARARGS, "The normalised texts of decimals (a list of str)."},
    {"hash_lists", hash_lists, METH_VARARGS, "The list hash of each slot from its elements' hashes."},
    {"hash_numbers", hash_numbers, METH_VARARGS, "fmix(v ^ tag) of each fixed-width integer or float."},
    {"hash_instants", hash_instants, METH_VARARGS, "The hash of each instant split into seconds and nanoseconds."},
    {"apply_nulls", apply_nulls, METH_VARARGS, "The null hash in every slot the validity bitmap marks null."},
    {"fold", fold, METH_VARARGS, "total += fmix(hashes ^ key), in place."},
    {"fold_numbers", fold_numbers, METH_VARARGS, "hash_numbers, apply_nulls and fold in one pass."},
    {"fold_instants", fold_instants, METH_VARARGS, "hash_instants, apply_nulls and fold in one pass."},
    {"finish", finish, METH_VARARGS, "values = fmix(values ^ tag), in place."},
    {"digest", digest, METH_VARARGS, "The unordered sums and ordered polynomials of row hashes."},
    {"keyed_order", keyed_order, METH_VARARGS, "0..n-1 sorted by splitmix64(base + i), into an int64 buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dsm.hashing._rowhash",
    .m_doc = "The compiled kernel of the row fingerprint dsm-rows-v1 and the read order's permutation.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__rowhash(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", XXH_VERSION_MAJOR, XXH_VERSION_MINOR, XXH_VERSION_RELEASE);
    long_hash_fn forms[3];
    const char *names[3];
    long_hash_forms(forms, names);
    long_hash = forms[0];
    long_hash_form = names[0];
    if (PyModule_AddStringConstant(m, "XXHASH_VERSION", version) < 0 ||
        PyModule_AddStringConstant(m, "LONG_HASH_FORM", long_hash_form) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
