/* The compiled kernel of JSON Lines: dsm.formats._jsonkernel, built with dsm where there is a C compiler.
 *
 * escapes(data) says how many bytes escaping data for a JSON string adds (0: nothing to escape), in one pass;
 * escape(offsets, data, first, rows, wide, ends, out) then writes the escaped texts of a string array in one
 * more pass, for the columns that need it.
 *
 * join(parts, rows, out) writes the lines of a batch: row by row, each part in turn, a constant (the keys
 * and separators) or the row's text of one column (offsets and bytes of an Arrow string array), copied as it
 * is or escaped as a JSON string's body as it is copied (no pass of its own to find the escapes first: the
 * caller leaves room for what they may add, and counts them only where they add more).
 *
 * scan(chunk, kinds, names, units, outputs, rows) parses a run of whole lines, each one JSON object whose
 * values are numbers, booleans, strings, timestamps in ISO-8601 text or null, straight into Arrow buffers
 * the caller allocated (NumPy arrays), with the GIL released. It accepts only a strict subset of JSON, the
 * one dsm writes and the one most writers of flat rows write, and returns None as soon as a line leaves
 * it (a control character or an odd escape in a string, a nested value, a duplicate or unknown key, an
 * escape in a key, an integer out of range, a number that cannot be converted exactly by the rules below,
 * a blank line, any whitespace but space and tab, ...). The caller then parses the same chunk with
 * pyarrow's JSON parser as before, which decides what the line means or which error it is. So whatever
 * this scanner accepts, it reads as pyarrow reads it; the tests compare both on generated lines.
 *
 * Numbers: integers by the JSON grammar without a fraction or exponent (no "-0", no leading zeros), range
 * checked for the field's type; floats by the JSON grammar, converted with correct rounding to the field's
 * own width (never through double for float32, as pyarrow does): exactly from a mantissa up to 2^53 (float:
 * 2^24) and a power of ten up to 22 (float: 10), else by the C library's strtod/strtof in the "C" locale.
 * Exponents past 300, results that overflow or are subnormal and tokens over 127 bytes are left to pyarrow.
 * Timestamps: "YYYY-MM-DDTHH:MM:SS", an optional fraction of at most the unit's digits, and "Z" exactly
 * when the field has a time zone.
 * Strings: runs of plain bytes are copied as they are and escapes decoded (every escape JSON has; a \u
 * escape of half a surrogate pair without its other half is left to pyarrow); the caller validates the
 * UTF-8 of a field whose bytes are not all ASCII (each field says whether they are).
 *
 * newlines(data) counts the newline bytes of data (for the line formats' chunks and line numbers).
 *
 * utf8_valid(offsets, data, first, rows, wide) says whether each text of a string array is UTF-8 and its
 * offsets ascend within data (every reader's check of stored text: dsm.formats._common.check_utf8).
 *
 * int_texts(values, validity, offset, count, width, offsets, data, signed) writes the decimal text of each
 * integer of an Arrow array, as Arrow's cast to string writes it.
 *
 * float_texts(values, validity, offset, count, width, offsets, data) writes the JSON text of each float32
 * or float64 of an Arrow array as Arrow's cast to string writes it (the shortest digits that read back to
 * the same value), negative zero as -0.0, for the values written in plain positional notation: see
 * float_text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    K_I8 = 1, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_U64,
    K_F32, K_F64, K_BOOL, K_STR32, K_STR64, K_TS, K_LAST
};
#define TS_ZONED 16 /* units[i] = fraction digits of the unit (0, 3, 6, 9) | TS_ZONED */

typedef struct {
    int kind;
    int unit;
    const char *name;
    Py_ssize_t name_len;
    uint8_t *values;   /* fixed-width values, string offsets or the boolean bitmap */
    uint8_t *validity; /* zeroed bitmap */
    uint8_t *data;     /* string bytes */
    Py_ssize_t data_cap;
    int64_t data_used;
    int64_t nulls;
    int64_t seen_row;
    unsigned char high; /* the string bytes ORed: bit 7 set where one is not ASCII */
} Field;

static locale_t c_locale = (locale_t)0;

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
static const float POW10F[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
static const int64_t SCALE[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

#define IS_DIGIT(c) ((unsigned char)((c) - '0') < 10)
#define SKIP_WS(p, e) while ((p) < (e) && (*(p) == ' ' || *(p) == '\t')) ++(p)

/* After a number or literal: the value ends here (whitespace, ',' or '}'), else the line is not ours. */
static inline int value_ends(const char *p, const char *e) {
    return p < e && (*p == ',' || *p == '}' || *p == ' ' || *p == '\t');
}

static inline void set_bit(uint8_t *bits, int64_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* The len bytes at from into to. Most parts of a line are short (a key with its separators, a number's
 * text): up to 16 bytes are copied by two loads and two stores, overlapping where len is not their size,
 * without the call memcpy takes for a length not known here (a numeric line spent more time in those calls
 * than in copying). */
static inline void copy_text(char *to, const char *from, int64_t len) {
    if (len > 16) {
        memcpy(to, from, (size_t)len);
    } else if (len >= 8) {
        uint64_t head, tail;
        memcpy(&head, from, 8);
        memcpy(&tail, from + len - 8, 8);
        memcpy(to, &head, 8);
        memcpy(to + len - 8, &tail, 8);
    } else if (len >= 4) {
        uint32_t head, tail;
        memcpy(&head, from, 4);
        memcpy(&tail, from + len - 4, 4);
        memcpy(to, &head, 4);
        memcpy(to + len - 4, &tail, 4);
    } else if (len > 0) { /* 1-3 bytes: the first, the middle and the last cover them */
        char first = from[0], middle = from[len / 2], last = from[len - 1];
        to[0] = first;
        to[len / 2] = middle;
        to[len - 1] = last;
    }
}

/* The decimal digits of m written to end at end (at most 20 bytes before it): where they start. Two digits
 * a step, from a table of the hundred pairs: half the divisions of one digit a step. */
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051"
    "525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

static inline char *digits_before(uint64_t m, char *end) {
    while (m >= 100) {
        uint64_t q = m / 100;
        end -= 2;
        memcpy(end, DIGIT_PAIRS + 2 * (m - q * 100), 2);
        m = q;
    }
    if (m >= 10) {
        end -= 2;
        memcpy(end, DIGIT_PAIRS + 2 * m, 2);
    } else {
        *--end = (char)('0' + m);
    }
    return end;
}

/* An integer by the JSON grammar; 0 when the token is not one this scanner accepts. */
static int parse_int(const char **pp, const char *e, int kind, uint8_t *out, int64_t row) {
    const char *p = *pp;
    int neg = 0;
    uint64_t u = 0;
    if (p < e && *p == '-') { neg = 1; ++p; }
    if (p >= e || !IS_DIGIT(*p)) return 0;
    if (*p == '0') {
        ++p;
        if (neg) return 0; /* "-0": the Python reader's rule, not pyarrow's */
        if (p < e && IS_DIGIT(*p)) return 0;
    } else {
        while (p < e && IS_DIGIT(*p)) {
            unsigned d = (unsigned)(*p - '0');
            if (u > (UINT64_MAX - d) / 10) return 0;
            u = u * 10 + d;
            ++p;
        }
    }
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return 0;
    if (!value_ends(p, e)) return 0;
    if (kind >= K_U8 && kind <= K_U64) {
        if (neg) return 0;
        switch (kind) {
        case K_U8: if (u > UINT8_MAX) return 0; ((uint8_t *)out)[row] = (uint8_t)u; break;
        case K_U16: if (u > UINT16_MAX) return 0; ((uint16_t *)out)[row] = (uint16_t)u; break;
        case K_U32: if (u > UINT32_MAX) return 0; ((uint32_t *)out)[row] = (uint32_t)u; break;
        default: ((uint64_t *)out)[row] = u; break;
        }
    } else {
        int64_t v;
        if (neg) {
            if (u > (uint64_t)INT64_MAX + 1) return 0;
            v = u == 0 ? 0 : -(int64_t)(u - 1) - 1;
        } else {
            if (u > (uint64_t)INT64_MAX) return 0;
            v = (int64_t)u;
        }
        switch (kind) {
        case K_I8: if (v < INT8_MIN || v > INT8_MAX) return 0; ((int8_t *)out)[row] = (int8_t)v; break;
        case K_I16: if (v < INT16_MIN || v > INT16_MAX) return 0; ((int16_t *)out)[row] = (int16_t)v; break;
        case K_I32: if (v < INT32_MIN || v > INT32_MAX) return 0; ((int32_t *)out)[row] = (int32_t)v; break;
        default: ((int64_t *)out)[row] = v; break;
        }
    }
    *pp = p;
    return 1;
}

#define TOKEN_MAX 128

/* The token [start, p) as a C string in buf (TOKEN_MAX bytes); 0 when it does not fit. */
static inline int token_text(const char *start, const char *p, char *buf) {
    size_t len = (size_t)(p - start);
    if (len >= TOKEN_MAX) return 0;
    memcpy(buf, start, len);
    buf[len] = 0;
    return 1;
}

/* A float by the JSON grammar, correctly rounded to the field's width; 0 when not accepted. */
static int parse_float(const char **pp, const char *e, int kind, uint8_t *out, int64_t row) {
    const char *start = *pp, *p = *pp;
    int neg = 0, digits = 0, truncated = 0;
    uint64_t m = 0;
    int64_t exp10 = 0;
    if (p < e && *p == '-') { neg = 1; ++p; }
    if (p >= e || !IS_DIGIT(*p)) return 0;
    if (*p == '0') {
        ++p;
        if (p < e && IS_DIGIT(*p)) return 0;
    } else {
        while (p < e && IS_DIGIT(*p)) {
            if (digits < 19) { m = m * 10 + (uint64_t)(*p - '0'); ++digits; }
            else { truncated |= *p != '0'; ++exp10; }
            ++p;
        }
    }
    if (p < e && *p == '.') {
        ++p;
        if (p >= e || !IS_DIGIT(*p)) return 0;
        while (p < e && IS_DIGIT(*p)) {
            if (m == 0 && *p == '0') { --exp10; }
            else if (digits < 19) { m = m * 10 + (uint64_t)(*p - '0'); ++digits; --exp10; }
            else { truncated |= *p != '0'; }
            ++p;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        int64_t ev = 0;
        ++p;
        if (p < e && (*p == '+' || *p == '-')) { eneg = *p == '-'; ++p; }
        if (p >= e || !IS_DIGIT(*p)) return 0;
        while (p < e && IS_DIGIT(*p)) {
            if (ev < 100000) ev = ev * 10 + (*p - '0');
            ++p;
        }
        /* pyarrow's tokenizer refuses a positive exponent past 308 plus the fraction's digits, whatever
         * the digits are ("0e309"); below 300 it never does */
        if (!eneg && ev > 300) return 0;
        exp10 += eneg ? -ev : ev;
    }
    if (!value_ends(p, e)) return 0;
    if (kind == K_F64) {
        double d;
        if (!truncated && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
            d = (double)m;
            d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
            if (neg) d = -d;
        } else {
            char buf[TOKEN_MAX], *end;
            if (!token_text(start, p, buf)) return 0;
            d = strtod_l(buf, &end, c_locale);
            if (end != buf + (p - start)) return 0;
            if (isinf(d) || (d != 0 && fabs(d) < DBL_MIN) || (d == 0 && m != 0)) return 0;
        }
        ((double *)out)[row] = d;
    } else {
        float f;
        if (!truncated && m <= (1ull << 24) && exp10 >= -10 && exp10 <= 10) {
            f = (float)m;
            f = exp10 < 0 ? f / POW10F[-exp10] : f * POW10F[exp10];
            if (neg) f = -f;
        } else {
            char buf[TOKEN_MAX], *end;
            if (!token_text(start, p, buf)) return 0;
            f = strtof_l(buf, &end, c_locale);
            if (end != buf + (p - start)) return 0;
            if (isinf(f) || (f != 0 && fabsf(f) < FLT_MIN) || (f == 0 && m != 0)) return 0;
        }
        ((float *)out)[row] = f;
    }
    *pp = p;
    return 1;
}

/* The byte loops marked so are built for x86-64-v3 (AVX2) and the baseline, the loader picking the one the
 * CPU runs (GCC's function multi-versioning): the compiler turns them into 32-byte vector compares. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

/* Nonzero when one of the 64 bytes at p is a control character (below 0x20), a quote or a backslash: a
 * branch-free OR over the block, which the compiler vectorises (the 64-bit word tricks it replaced ran at
 * a third of the speed). Where high is not NULL, the block's bytes are ORed into it (bit 7: a byte that
 * is not ASCII); inlined with NULL, that OR is not computed. */
static inline int special_in_block(const unsigned char *p, unsigned char *high) {
    unsigned char any = 0, all = 0;
    for (int i = 0; i < 64; ++i) {
        any |= (unsigned char)((p[i] < 0x20) | (p[i] == '"') | (p[i] == '\\'));
        all |= p[i];
    }
    if (high != NULL) *high |= all;
    return any;
}

/* Bit i of the mask set where byte i of the 16 at p is one JSON strings escape (a control character, a quote
 * or a backslash); in *lng, where it is one of those escaped as six bytes, \u00XX (a control character but
 * \n, \r and \t). SSE2's byte compares where the compiler has them (every x86-64), else a loop. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline unsigned special_mask16(const unsigned char *p, unsigned *lng) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1F)), _mm_set1_epi8(0x1F));
    __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    if (lng != NULL) {
        __m128i shorts = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                                      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')),
                                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))));
        *lng = (unsigned)_mm_movemask_epi8(_mm_andnot_si128(shorts, control));
    }
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, backslash)));
}
#else
static inline unsigned special_mask16(const unsigned char *p, unsigned *lng) {
    unsigned mask = 0, six = 0;
    for (int i = 0; i < 16; ++i) {
        unsigned char c = p[i];
        mask |= (unsigned)((c < 0x20) | (c == '"') | (c == '\\')) << i;
        six |= (unsigned)((c < 0x20) & (c != '\n') & (c != '\r') & (c != '\t')) << i;
    }
    if (lng != NULL) *lng = six;
    return mask;
}
#endif

static inline int is_special(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

/* The first quote, backslash or control character in [p, e), or e; the bytes passed over are ORed into
 * *high. 64 bytes at a time while a block holds none of the bytes looked for (texts are most of a line's
 * bytes: byte by byte, this loop was most of the scan). */
static inline const char *run_end(const char *p, const char *e, unsigned char *high) {
    const unsigned char *u = (const unsigned char *)p, *end = (const unsigned char *)e;
    unsigned char seen = 0;
    while (end - u >= 64) {
        unsigned char block = 0;
        if (special_in_block(u, &block)) break;
        seen |= block;
        u += 64;
    }
    for (; u < end && !is_special(*u); ++u) seen |= *u;
    *high |= seen;
    return (const char *)u;
}

/* The end of a string's bytes (at its closing quote), or NULL for an escape or a control character; the
 * bytes passed over are ORed into *high. */
static inline const char *string_end(const char *p, const char *e, unsigned char *high) {
    const char *u = run_end(p, e, high);
    return u < e && *u == '"' ? u : NULL;
}

static inline int hex4(const char *p, const char *e, uint32_t *value) {
    if (e - p < 4) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        char c = p[i];
        int d = IS_DIGIT(c)                ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint32_t)d;
    }
    *value = v;
    return 1;
}

/* The bytes a JSON escape at *pp (its backslash) stands for into out (at least 4 bytes), *pp moved past
 * it: how many, or 0 where it is not an escape JSON has, or a \u escape of half a surrogate pair without
 * its other half (left to pyarrow's parser). */
static int unescape(const char **pp, const char *e, char *out) {
    const char *p = *pp + 1;
    if (p >= e) return 0;
    static const char SHORT_FROM[] = "\"\\/bfnrt", SHORT_TO[] = "\"\\/\b\f\n\r\t";
    const char *short_ = *p != 'u' && *p != 0 ? strchr(SHORT_FROM, *p) : NULL;
    if (short_ != NULL) {
        out[0] = SHORT_TO[short_ - SHORT_FROM];
        *pp = p + 1;
        return 1;
    }
    uint32_t code;
    if (*p != 'u' || !hex4(p + 1, e, &code)) return 0;
    p += 5;
    if (code >= 0xDC00 && code <= 0xDFFF) return 0;
    if (code >= 0xD800 && code <= 0xDBFF) {
        uint32_t low;
        if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, e, &low) || low < 0xDC00 || low > 0xDFFF)
            return 0;
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        p += 6;
    }
    *pp = p;
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | code >> 6);
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | code >> 12);
        out[1] = (char)(0x80 | (code >> 6 & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | code >> 18);
    out[1] = (char)(0x80 | (code >> 12 & 0x3F));
    out[2] = (char)(0x80 | (code >> 6 & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

static inline int digits_at(const char *p, int n, int *value) {
    int v = 0;
    for (int i = 0; i < n; ++i) {
        if (!IS_DIGIT(p[i])) return 0;
        v = v * 10 + (p[i] - '0');
    }
    *value = v;
    return 1;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* A quoted ISO-8601 instant at p (its opening quote); 0 when not in the accepted form. */
static int parse_timestamp(const char **pp, const char *e, int unit, int64_t *out) {
    static const int MONTH_DAYS[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const char *p = *pp + 1;
    unsigned char high = 0;
    const char *end = string_end(p, e, &high);
    int y, mo, d, h, mi, s, frac = 0, nfrac = 0;
    int unit_digits = unit & 15, zoned = (unit & TS_ZONED) != 0;
    if (end == NULL || end - p < 19) return 0;
    if (!digits_at(p, 4, &y) || p[4] != '-' || !digits_at(p + 5, 2, &mo) || p[7] != '-' ||
        !digits_at(p + 8, 2, &d) || p[10] != 'T' || !digits_at(p + 11, 2, &h) || p[13] != ':' ||
        !digits_at(p + 14, 2, &mi) || p[16] != ':' || !digits_at(p + 17, 2, &s))
        return 0;
    p += 19;
    if (p < end && *p == '.') {
        ++p;
        while (p < end && IS_DIGIT(*p)) {
            if (nfrac >= unit_digits) return 0;
            frac = frac * 10 + (*p - '0');
            ++nfrac;
            ++p;
        }
        if (nfrac == 0) return 0;
    }
    if (zoned) {
        if (p >= end || *p != 'Z') return 0;
        ++p;
    }
    if (p != end) return 0;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > MONTH_DAYS[mo - 1] + (mo == 2 && leap)) return 0;
    int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s, value;
    if (__builtin_mul_overflow(seconds, SCALE[unit_digits], &value)) return 0;
    if (__builtin_add_overflow(value, (int64_t)frac * SCALE[unit_digits - nfrac], &value)) return 0;
    *out = value;
    *pp = end + 1;
    return value_ends(*pp, e);
}

/* The field a key names: the next field first (keys in schema order), else any. */
static inline Py_ssize_t find_field(Field *fields, Py_ssize_t n, Py_ssize_t guess, const char *key, Py_ssize_t len) {
    if (guess < n && fields[guess].name_len == len && memcmp(fields[guess].name, key, (size_t)len) == 0)
        return guess;
    for (Py_ssize_t i = 0; i < n; ++i)
        if (fields[i].name_len == len && memcmp(fields[i].name, key, (size_t)len) == 0) return i;
    return -1;
}

static void set_null(Field *f, int64_t row) {
    ++f->nulls;
    switch (f->kind) {
    case K_I8: case K_U8: ((uint8_t *)f->values)[row] = 0; break;
    case K_I16: case K_U16: ((uint16_t *)f->values)[row] = 0; break;
    case K_I32: case K_U32: ((uint32_t *)f->values)[row] = 0; break;
    case K_F32: ((float *)f->values)[row] = 0; break;
    case K_I64: case K_U64: case K_TS: ((int64_t *)f->values)[row] = 0; break;
    case K_F64: ((double *)f->values)[row] = 0; break;
    case K_BOOL: break; /* the bitmap is zeroed */
    case K_STR32: ((int32_t *)f->values)[row + 1] = (int32_t)f->data_used; break;
    case K_STR64: ((int64_t *)f->values)[row + 1] = f->data_used; break;
    }
}

/* One value at p for field f; 0 when not accepted. */
static int parse_value(const char **pp, const char *e, Field *f, int64_t row) {
    const char *p = *pp;
    if (p >= e) return 0;
    if (*p == 'n') {
        if (e - p < 4 || memcmp(p, "null", 4) != 0 || !value_ends(p + 4, e)) return 0;
        set_null(f, row);
        *pp = p + 4;
        return 1;
    }
    switch (f->kind) {
    case K_F32: case K_F64:
        if (!parse_float(pp, e, f->kind, f->values, row)) return 0;
        break;
    case K_BOOL:
        if (e - p >= 4 && memcmp(p, "true", 4) == 0 && value_ends(p + 4, e)) {
            set_bit(f->values, row);
            *pp = p + 4;
        } else if (e - p >= 5 && memcmp(p, "false", 5) == 0 && value_ends(p + 5, e)) {
            *pp = p + 5;
        } else {
            return 0;
        }
        break;
    case K_STR32: case K_STR64: {
        if (*p != '"') return 0;
        const char *end = p + 1;
        for (;;) { /* runs of plain bytes, each up to an escape, decoded, or the closing quote */
            const char *run = end;
            end = run_end(run, e, &f->high);
            int64_t len = end - run;
            if (len > f->data_cap - f->data_used) return 0;
            memcpy(f->data + f->data_used, run, (size_t)len);
            f->data_used += len;
            if (end >= e || *end != '\\') break;
            if (f->data_cap - f->data_used < 4) return 0;
            int n = unescape(&end, e, (char *)f->data + f->data_used);
            if (n == 0) return 0;
            for (int i = 0; i < n; ++i) f->high |= f->data[f->data_used + i];
            f->data_used += n;
        }
        if (end >= e || *end != '"') return 0;
        if (f->kind == K_STR32) {
            if (f->data_used > INT32_MAX) return 0;
            ((int32_t *)f->values)[row + 1] = (int32_t)f->data_used;
        } else {
            ((int64_t *)f->values)[row + 1] = f->data_used;
        }
        *pp = end + 1;
        if (!value_ends(*pp, e)) return 0;
        break;
    }
    case K_TS:
        if (*p != '"' || !parse_timestamp(pp, e, f->unit, &((int64_t *)f->values)[row])) return 0;
        break;
    default:
        if (!parse_int(pp, e, f->kind, f->values, row)) return 0;
    }
    set_bit(f->validity, row);
    return 1;
}

/* Every line of [p, e); the number of rows, or -1 where a line is not in the accepted subset. */
static int64_t scan_lines(const char *p, const char *e, Field *fields, Py_ssize_t n, int64_t rows) {
    int64_t row = 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
        if (fields[i].kind == K_STR32) ((int32_t *)fields[i].values)[0] = 0;
        if (fields[i].kind == K_STR64) ((int64_t *)fields[i].values)[0] = 0;
    }
    while (p < e) {
        if (row >= rows) return -1;
        SKIP_WS(p, e);
        if (p >= e || *p != '{') return -1;
        ++p;
        SKIP_WS(p, e);
        Py_ssize_t next = 0;
        if (p < e && *p == '}') {
            ++p;
        } else {
            for (;;) {
                if (p >= e || *p != '"') return -1;
                unsigned char high = 0;
                const char *key = p + 1, *key_end = string_end(key, e, &high);
                if (key_end == NULL) return -1;
                Py_ssize_t index = find_field(fields, n, next, key, key_end - key);
                if (index < 0 || fields[index].seen_row == row) return -1;
                Field *f = &fields[index];
                f->seen_row = row;
                next = index + 1;
                p = key_end + 1;
                SKIP_WS(p, e);
                if (p >= e || *p != ':') return -1;
                ++p;
                SKIP_WS(p, e);
                if (!parse_value(&p, e, f, row)) return -1;
                SKIP_WS(p, e);
                if (p < e && *p == ',') {
                    ++p;
                    SKIP_WS(p, e);
                    continue;
                }
                if (p < e && *p == '}') {
                    ++p;
                    break;
                }
                return -1;
            }
        }
        SKIP_WS(p, e);
        if (p < e) {
            if (*p != '\n') return -1;
            ++p;
        }
        for (Py_ssize_t i = 0; i < n; ++i)
            if (fields[i].seen_row != row) set_null(&fields[i], row);
        ++row;
    }
    return row;
}

static int item_size(int kind) {
    switch (kind) {
    case K_I8: case K_U8: return 1;
    case K_I16: case K_U16: return 2;
    case K_I32: case K_U32: case K_F32: return 4;
    default: return 8;
    }
}

static int need(Py_buffer *view, Py_ssize_t bytes, const char *what) {
    if (view->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s buffer holds %zd bytes, %zd are needed", what, view->len, bytes);
        return 0;
    }
    return 1;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer chunk;
    const char *kinds;
    Py_ssize_t n;
    PyObject *names, *units, *outputs;
    long long rows;
    if (!PyArg_ParseTuple(args, "y*y#O!O!O!L", &chunk, &kinds, &n, &PyTuple_Type, &names, &PyTuple_Type, &units,
                          &PyTuple_Type, &outputs, &rows))
        return NULL;
    PyObject *result = NULL;
    Field *fields = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t held = 0;
    if (PyTuple_GET_SIZE(names) != n || PyTuple_GET_SIZE(units) != n || PyTuple_GET_SIZE(outputs) != n || rows < 0) {
        PyErr_SetString(PyExc_ValueError, "kinds, names, units and outputs differ in length, or rows < 0");
        goto done;
    }
    fields = PyMem_Calloc((size_t)n + 1, sizeof(Field));
    views = PyMem_Calloc((size_t)n * 3 + 1, sizeof(Py_buffer));
    if (fields == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        Field *f = &fields[i];
        PyObject *name = PyTuple_GET_ITEM(names, i), *out = PyTuple_GET_ITEM(outputs, i);
        f->kind = (unsigned char)kinds[i];
        f->unit = (int)PyLong_AsLong(PyTuple_GET_ITEM(units, i));
        f->seen_row = -1;
        if (f->kind < K_I8 || f->kind >= K_LAST || (f->unit & 15) > 9) {
            PyErr_Format(PyExc_ValueError, "field %zd: unknown kind %d or unit %d", i, f->kind, f->unit);
            goto done;
        }
        if (!PyBytes_Check(name) || !PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 3) {
            PyErr_SetString(PyExc_TypeError, "names are bytes and outputs (values, validity, data) tuples");
            goto done;
        }
        f->name = PyBytes_AS_STRING(name);
        f->name_len = PyBytes_GET_SIZE(name);
        int string = f->kind == K_STR32 || f->kind == K_STR64;
        for (int j = 0; j < 3; ++j) {
            PyObject *buf = PyTuple_GET_ITEM(out, j);
            if (buf == Py_None) {
                if (j < 2 || string) {
                    PyErr_Format(PyExc_ValueError, "field %zd: buffer %d is missing", i, j);
                    goto done;
                }
                continue;
            }
            if (PyObject_GetBuffer(buf, &views[held], PyBUF_WRITABLE) < 0) goto done;
            Py_buffer *view = &views[held++];
            if (j == 0) {
                Py_ssize_t bytes = f->kind == K_BOOL ? (rows + 7) / 8
                                   : string ? (rows + 1) * (f->kind == K_STR32 ? 4 : 8)
                                            : rows * item_size(f->kind);
                if (!need(view, bytes, "values")) goto done;
                f->values = view->buf;
            } else if (j == 1) {
                if (!need(view, (rows + 7) / 8, "validity")) goto done;
                f->validity = view->buf;
            } else {
                f->data = view->buf;
                f->data_cap = view->len;
            }
        }
    }
    int64_t got;
    Py_BEGIN_ALLOW_THREADS
    got = scan_lines(chunk.buf, (const char *)chunk.buf + chunk.len, fields, n, rows);
    Py_END_ALLOW_THREADS
    if (got != rows) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyTuple_New(n);
    if (result == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *item = Py_BuildValue("(LLO)", (long long)fields[i].data_used, (long long)fields[i].nulls,
                                       (fields[i].high & 0x80) ? Py_False : Py_True);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
done:
    for (Py_ssize_t i = 0; i < held; ++i) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(fields);
    PyBuffer_Release(&chunk);
    return result;
}

/* The text JSON writes for each byte of a string that it escapes (a control character, a quote or a
 * backslash), padded to 8 bytes, and its length: \n, \r and \t by their short escapes, the other control
 * characters (\b and \f too) as \u00XX in lower-case hex, the texts dsm's JSON writer has always written
 * (docs/formats.md). Filled when the module is loaded. */
typedef struct {
    char text[8];
    int len;
} Escape;
static Escape ESCAPES[256];

static void fill_escapes(void) {
    static const char hex[] = "0123456789abcdef";
    for (int c = 0; c < 0x20; ++c) {
        Escape *x = &ESCAPES[c];
        memcpy(x->text, "\\u00", 4);
        x->text[4] = hex[c >> 4];
        x->text[5] = hex[c & 15];
        x->len = 6;
    }
    static const char shorts[][2] = {{'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}, {'"', '"'}, {'\\', '\\'}};
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; ++i) {
        Escape *x = &ESCAPES[(unsigned char)shorts[i][0]];
        memset(x->text, 0, sizeof x->text);
        x->text[0] = '\\';
        x->text[1] = shorts[i][1];
        x->len = 2;
    }
}

/* One part of a line: a constant, or the texts of a string array (offsets of 4 or 8 bytes from `first`). */
typedef struct {
    const char *bytes; /* the constant, or the array's bytes */
    Py_ssize_t len;    /* the constant's length, or the array's bytes' */
    const uint8_t *offsets;
    int wide;
    int escape; /* the texts are written escaped, as JSON string bodies */
    Py_ssize_t first;
} Part;

static inline int64_t offset_at(const Part *part, Py_ssize_t i) {
    return part->wide ? ((const int64_t *)part->offsets)[i] : ((const int32_t *)part->offsets)[i];
}

/* The escaped text of the len bytes at start of a part's bytes into out (room bytes): its length, or -1 where
 * room is too small. 64 bytes without an escape are copied at once; else 16 at a time: 16 without one at
 * once, and in 16 holding some, each escape found from the mask is copied as 8 bytes (the table's, no branch
 * on which) after the plain bytes before it, copied as 16 (what lies past them is written over next). Where
 * fewer than 32 bytes are left to read or 128 to write, byte by byte. */
static inline int64_t escape_value(const Part *part, int64_t start, int64_t len, char *out, int64_t room) {
    const unsigned char *limit = (const unsigned char *)part->bytes + part->len;
    const unsigned char *p = (const unsigned char *)part->bytes + start, *e = p + len;
    int64_t at = 0;
    while (p < e) {
        if (e - p >= 64 && room - at >= 64 && !special_in_block(p, NULL)) {
            memcpy(out + at, p, 64);
            p += 64;
            at += 64;
            continue;
        }
        if (e - p >= 16 && limit - p >= 32 && room - at >= 128) {
            unsigned mask = special_mask16(p, NULL);
            int done = 0;
            for (; mask; mask &= mask - 1) {
                int k = __builtin_ctz(mask);
                memcpy(out + at, p + done, 16);
                at += k - done;
                const Escape *x = &ESCAPES[p[k]];
                memcpy(out + at, x->text, 8);
                at += x->len;
                done = k + 1;
            }
            memcpy(out + at, p + done, 16);
            at += 16 - done;
            p += 16;
            continue;
        }
        unsigned char c = *p++;
        int n = is_special(c) ? ESCAPES[c].len : 1;
        if (n > room - at) return -1;
        if (n == 1)
            out[at] = (char)c;
        else
            memcpy(out + at, ESCAPES[c].text, (size_t)n);
        at += n;
    }
    return at;
}

/* The lines into out (cap bytes): the bytes written, -1 where an offset lies outside its bytes, -2 where
 * out is too small (escapes added more than the caller left room for). */
static int64_t join_rows(const Part *parts, Py_ssize_t n, int64_t rows, char *out, int64_t cap) {
    int64_t at = 0;
    for (int64_t row = 0; row < rows; ++row) {
        for (Py_ssize_t i = 0; i < n; ++i) {
            const Part *part = &parts[i];
            const char *from;
            int64_t len;
            if (part->offsets == NULL) {
                from = part->bytes;
                len = part->len;
            } else {
                int64_t start = offset_at(part, part->first + row), end = offset_at(part, part->first + row + 1);
                if (start < 0 || end < start || end > part->len) return -1;
                from = part->bytes + start;
                len = end - start;
            }
            if (part->escape) {
                int64_t written = escape_value(part, from - part->bytes, len, out + at, cap - at);
                if (written < 0) return -2;
                at += written;
                continue;
            }
            if (len > cap - at) return -2;
            copy_text(out + at, from, len);
            at += len;
        }
    }
    return at;
}

static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *specs;
    long long rows;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!Lw*", &PyTuple_Type, &specs, &rows, &out)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(specs), held = 0;
    PyObject *result = NULL;
    Part *parts = PyMem_Calloc((size_t)n + 1, sizeof(Part));
    Py_buffer *views = PyMem_Calloc((size_t)n * 2 + 1, sizeof(Py_buffer));
    if (parts == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (rows < 0) {
        PyErr_SetString(PyExc_ValueError, "rows < 0");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        Part *part = &parts[i];
        if (PyBytes_Check(spec)) {
            part->bytes = PyBytes_AS_STRING(spec);
            part->len = PyBytes_GET_SIZE(spec);
            continue;
        }
        PyObject *offsets, *data;
        Py_ssize_t first;
        int wide, escape;
        if (!PyArg_ParseTuple(spec, "OOnpp", &offsets, &data, &first, &wide, &escape)) goto done;
        if (PyObject_GetBuffer(offsets, &views[held], PyBUF_SIMPLE) < 0) goto done;
        Py_buffer *ov = &views[held++];
        if (PyObject_GetBuffer(data, &views[held], PyBUF_SIMPLE) < 0) goto done;
        Py_buffer *dv = &views[held++];
        if (first < 0 || ov->len < (first + rows + 1) * (wide ? 8 : 4)) {
            PyErr_Format(PyExc_ValueError, "part %zd: the offsets do not cover %lld rows from %zd", i, rows, first);
            goto done;
        }
        part->offsets = ov->buf;
        part->wide = wide;
        part->escape = escape;
        part->first = first;
        part->bytes = dv->buf;
        part->len = dv->len;
    }
    int64_t used;
    Py_BEGIN_ALLOW_THREADS
    used = join_rows(parts, n, rows, out.buf, out.len);
    Py_END_ALLOW_THREADS
    if (used == -1) {
        PyErr_SetString(PyExc_ValueError, "join: an offset lies outside its part's bytes");
        goto done;
    }
    result = PyLong_FromLongLong(used < 0 ? -1 : (long long)used);
done:
    for (Py_ssize_t i = 0; i < held; ++i) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(parts);
    PyBuffer_Release(&out);
    return result;
}

/* ---------------------------------------------------------------------------------------- float texts */

/* The most bytes one float's text takes here: a sign, "0.", five zeros and 16 digits (below 2^52). */
#define FLOAT_TEXT_MAX 24

/* 1 when the decimal c / P (c an integer below 2^53, P = 10^k, k <= 22, both exact doubles) reads back as
 * the value a = |v|: for a double, the division is correctly rounded, as a reader's conversion of the
 * text is, so q == a decides. For a float, q rounded once more to float is the correctly rounded float of
 * c / P unless q lies exactly halfway between two floats (the first rounding may have moved it there):
 * -1 then, and the caller leaves the value to Arrow. */
static int reads_back(double c, double P, double a, int is32) {
    double q = c / P;
    if (!is32) return q == a;
    uint64_t bits;
    memcpy(&bits, &q, sizeof bits);
    if ((bits & 0x1FFFFFFFull) == 0x10000000ull) return -1;
    return (float)q == (float)a;
}

/* The text of one finite float v (its magnitude a, float32 when is32) into out, as Arrow's cast to string
 * writes it, or 0 where this does not cover it (the caller then leaves the whole array to Arrow). Negative
 * zero is the one text JSON needs otherwise: -0.0, where Arrow's "-0" reads back as the integer 0 in many
 * JSON readers.
 *
 * The shortest digits that read back to v are found by trying k = 0, 1, 2, ... fraction digits: the first
 * k at which an integer c read as c / 10^k gives v back. Only while c stays below 2^52 (float: 2^23): the
 * interval of reals that round to v is then narrower than one unit of 10^-k, so at most one integer c
 * lies in it, which is both the shortest-digits answer and the closest to v, the digits any shortest
 * round-trip formatter (Arrow's included) gives. That c is the integer nearest a * 10^k; the product is
 * rounded, so where it falls within a quarter of a half-integer its neighbour on that side is tried too.
 * Arrow writes positional notation for decimal exponents -6 to 9 (0.000001 to 9999999999.x) and
 * exponential notation outside: those are left to it. */
static int float_text(double v, int is32, char *out) {
    int neg = signbit(v) != 0;
    double a = fabs(v);
    char *o = out;
    if (a == 0) {
        if (neg) {
            memcpy(o, "-0.0", 4);
            return 4;
        }
        *o = '0';
        return 1;
    }
    const double limit = is32 ? 8388608.0 : 4503599627370496.0;
    for (int k = 0; k <= 22; ++k) {
        double P = POW10[k], p = a * P;
        if (!(p < limit)) return 0;
        double c = rint(p);
        /* A c that reads back lies within half of a's spacing (times 10^k) of a * 10^k, and p within
         * p * 2^-53 of that: within about p * 2^-52 of p for a double, p * 2^-24 for a float. Twice that
         * is the bound here; while it stays under a quarter (p below 2^49, float 2^21), neither c beyond
         * it nor its neighbours (half a unit or more away) can read back: no division is needed. */
        if (p < (is32 ? 0x1p21 : 0x1p49) && fabs(p - c) > p * (is32 ? 0x1p-23 : 0x1p-51)) continue;
        int ok = reads_back(c, P, a, is32);
        if (ok == 0) {
            double d = p - c;
            if (d >= 0.25 || d <= -0.25) {
                c += d > 0 ? 1 : -1;
                ok = c < limit ? reads_back(c, P, a, is32) : -1;
            }
        }
        if (ok < 0) return 0;
        if (!ok) continue;
        char digits[20], *end = digits + sizeof digits;
        const char *d = digits_before((uint64_t)c, end);
        int n = (int)(end - d);
        int exponent = n - 1 - k; /* of the first digit */
        if (exponent < -6 || exponent > 9) return 0;
        if (neg) *o++ = '-';
        if (n <= k) { /* 0.000ddd */
            *o++ = '0';
            *o++ = '.';
            for (int z = 0; z < k - n; ++z) *o++ = '0';
        } else {
            copy_text(o, d, n - k);
            o += n - k;
            d += n - k;
            n = k;
            if (k) *o++ = '.';
        }
        copy_text(o, d, n);
        return (int)(o + n - out);
    }
    return 0;
}

/* The most bytes one integer's text takes: a sign and 19 digits, or the 20 digits of a uint64. */
#define INT_TEXT_MAX 20

/* The decimal text of the integer at `at` (width bytes, signed or not) into out, as Arrow's cast writes it:
 * its length. */
static inline int int_text(const unsigned char *at, int width, int is_signed, char *out) {
    uint64_t magnitude;
    int negative = 0;
    if (is_signed) {
        int64_t v;
        switch (width) {
        case 1: v = (int8_t)at[0]; break;
        case 2: { int16_t x; memcpy(&x, at, 2); v = x; } break;
        case 4: { int32_t x; memcpy(&x, at, 4); v = x; } break;
        default: memcpy(&v, at, 8); break;
        }
        negative = v < 0;
        magnitude = negative ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN included */
    } else {
        switch (width) {
        case 1: magnitude = at[0]; break;
        case 2: { uint16_t x; memcpy(&x, at, 2); magnitude = x; } break;
        case 4: { uint32_t x; memcpy(&x, at, 4); magnitude = x; } break;
        default: memcpy(&magnitude, at, 8); break;
        }
    }
    char digits[20], *end = digits + sizeof digits;
    const char *d = digits_before(magnitude, end);
    if (negative) *out++ = '-';
    copy_text(out, d, end - d);
    return negative + (int)(end - d);
}

/* The text of the float32 (width 4) or float64 at `at` into out (float_text), or 0 where it is not one
 * float_text writes. */
static inline int float_slot_text(const unsigned char *at, int width, char *out) {
    double v;
    if (width == 4) {
        float f;
        memcpy(&f, at, 4);
        v = f;
    } else {
        memcpy(&v, at, 8);
    }
    return isfinite(v) ? float_text(v, width == 4, out) : 0;
}

/* The texts of the slots (number_texts): built once for integers and once for floats, each loop with only
 * its own kind's code (one loop for both wrote floats with 7% more instructions). */
static inline __attribute__((always_inline)) int64_t slot_texts(const unsigned char *src, const unsigned char *valid,
                                                                Py_ssize_t offset, Py_ssize_t count, int width,
                                                                int is_signed, void *offsets, void *data,
                                                                const int integers) {
    int64_t used = 0, *ends = (int64_t *)offsets;
    char *out = (char *)data;
    ends[0] = 0;
    for (Py_ssize_t i = 0; i < count; ++i) {
        Py_ssize_t slot = offset + i;
        if (valid == NULL || (valid[slot >> 3] >> (slot & 7)) & 1) {
            const unsigned char *at = src + slot * width;
            int n = integers ? int_text(at, width, is_signed, out + used) : float_slot_text(at, width, out + used);
            if (n == 0) return -1;
            used += n;
        }
        ends[i + 1] = used;
    }
    return used;
}

/* int_texts(values, validity, offset, count, width, offsets, data, signed) and float_texts(values, validity,
 * offset, count, width, offsets, data) -> bytes used in data, or -1: the texts of slots offset..offset+count-1
 * of an integer array (width 1, 2, 4 or 8; int_text) or a float32 or float64 one (width 4 or 8; float_text),
 * a null slot (validity, an Arrow bitmap or None) empty, as a large_string array's int64 offsets (count + 1
 * of them) and bytes (at least INT_TEXT_MAX or FLOAT_TEXT_MAX a slot); -1 as soon as a float is one
 * float_text does not cover (every integer is covered). */
static PyObject *number_texts(PyObject *args, int integers) {
    Py_buffer values, offsets, data, bits;
    PyObject *validity;
    Py_ssize_t offset, count;
    int width, is_signed = 0, has_bits = 0;
    if (!PyArg_ParseTuple(args, integers ? "y*Onniw*w*p" : "y*Onniw*w*", &values, &validity, &offset, &count,
                          &width, &offsets, &data, &is_signed))
        return NULL;
    PyObject *result = NULL;
    int width_ok = integers ? (width == 1 || width == 2 || width == 4 || width == 8) : (width == 4 || width == 8);
    Py_ssize_t most = integers ? INT_TEXT_MAX : FLOAT_TEXT_MAX;
    if (!width_ok || offset < 0 || count < 0 || values.len < (offset + count) * width ||
        offsets.len < (count + 1) * (Py_ssize_t)sizeof(int64_t) || data.len < count * most) {
        PyErr_SetString(PyExc_ValueError, "number texts: buffers too short for the slots, or a width not the type's");
        goto done;
    }
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &bits, PyBUF_SIMPLE) < 0) goto done;
        has_bits = 1;
        if (bits.len * 8 < offset + count) {
            PyErr_SetString(PyExc_ValueError, "number texts: validity bitmap is shorter than its slots");
            goto done;
        }
    }
    int64_t used;
    const unsigned char *src = (const unsigned char *)values.buf, *valid = has_bits ? bits.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (integers)
        used = slot_texts(src, valid, offset, count, width, is_signed, offsets.buf, data.buf, 1);
    else
        used = slot_texts(src, valid, offset, count, width, 0, offsets.buf, data.buf, 0);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong((long long)used);
done:
    if (has_bits) PyBuffer_Release(&bits);
    PyBuffer_Release(&values);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *int_texts(PyObject *self, PyObject *args) { return number_texts(args, 1); }

static PyObject *float_texts(PyObject *self, PyObject *args) { return number_texts(args, 0); }

/* How many bytes escaping the bytes at p for a JSON string adds (0 where none needs it): one for each
 * escaped byte, four more for each written \u00XX. 64 bytes at a time; a block holding one of them is
 * counted from the masks of its four 16 bytes (most text has none in most blocks). */
static inline uint64_t added_in16(const unsigned char *p) {
    unsigned lng, mask = special_mask16(p, &lng);
    return (uint64_t)__builtin_popcount(mask) + 4 * (uint64_t)__builtin_popcount(lng);
}

VECTOR_CLONES
static uint64_t escapes_in(const unsigned char *p, Py_ssize_t len) {
    const unsigned char *e = p + len;
    uint64_t added = 0;
    for (; e - p >= 64; p += 64)
        if (special_in_block(p, NULL))
            added += added_in16(p) + added_in16(p + 16) + added_in16(p + 32) + added_in16(p + 48);
    for (; e - p >= 16; p += 16) added += added_in16(p);
    for (; p < e; ++p)
        if (is_special(*p)) added += (uint64_t)ESCAPES[*p].len - 1;
    return added;
}

/* An entry point of one bytes-like argument: ``over`` its bytes, with the GIL released. */
static PyObject *over_bytes(PyObject *args, uint64_t (*over)(const unsigned char *, Py_ssize_t)) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    uint64_t value;
    Py_BEGIN_ALLOW_THREADS
    value = over(data.buf, data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLongLong(value);
}

static PyObject *escapes(PyObject *self, PyObject *args) { return over_bytes(args, escapes_in); }

/* The escaped texts of rows values of a string array (part) into out (cap bytes), their int64 offsets into
 * ends (rows + 1 of them): the bytes written, or -1 where an offset lies outside the bytes or out is too
 * small. */
static int64_t escape_rows(const Part *part, int64_t rows, int64_t *ends, char *out, int64_t cap) {
    int64_t at = 0;
    ends[0] = 0;
    for (int64_t row = 0; row < rows; ++row) {
        int64_t start = offset_at(part, part->first + row), end = offset_at(part, part->first + row + 1);
        if (start < 0 || end < start || end > part->len) return -1;
        int64_t n = escape_value(part, start, end - start, out + at, cap - at);
        if (n < 0) return -1;
        at += n;
        ends[row + 1] = at;
    }
    return at;
}

static PyObject *escape(PyObject *self, PyObject *args) {
    Py_buffer offsets, data, ends, out;
    Py_ssize_t first;
    long long rows;
    int wide;
    if (!PyArg_ParseTuple(args, "y*y*nLpw*w*", &offsets, &data, &first, &rows, &wide, &ends, &out)) return NULL;
    PyObject *result = NULL;
    if (first < 0 || rows < 0 || offsets.len < (first + rows + 1) * (wide ? 8 : 4) ||
        ends.len < (rows + 1) * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "escape: the offsets do not cover the rows");
        goto done;
    }
    Part part = {.bytes = data.buf, .len = data.len, .offsets = offsets.buf, .wide = wide, .first = first};
    int64_t used;
    Py_BEGIN_ALLOW_THREADS
    used = escape_rows(&part, rows, (int64_t *)ends.buf, out.buf, out.len);
    Py_END_ALLOW_THREADS
    if (used < 0) {
        PyErr_SetString(PyExc_ValueError, "escape: an offset lies outside the bytes, or out is too small");
        goto done;
    }
    result = PyLong_FromLongLong((long long)used);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&out);
    return result;
}

/* The compares of 255 blocks of 32 bytes add up in 32 byte-wide counters that cannot overflow, a loop the
 * compiler turns into vector compares and adds: about 0.6 ms for 16 MiB, where NumPy's compare and count
 * took 1.4 ms with a temporary array. */
VECTOR_CLONES
static uint64_t newlines_in(const unsigned char *p, Py_ssize_t len) {
    uint64_t count = 0;
    Py_ssize_t i = 0;
    while (len - i >= 255 * 32) {
        uint8_t sums[32] = {0};
        for (int block = 0; block < 255; ++block, i += 32)
            for (int j = 0; j < 32; ++j) sums[j] += p[i + j] == '\n';
        for (int j = 0; j < 32; ++j) count += sums[j];
    }
    for (; i < len; ++i) count += p[i] == '\n';
    return count;
}

static PyObject *newlines(PyObject *self, PyObject *args) { return over_bytes(args, newlines_in); }

/* The length of the UTF-8 character at p (before e): 1-4, or 0 where the bytes there are not one (RFC 3629:
 * no overlong forms, no surrogates, nothing past U+10FFFF). */
static inline int utf8_char(const unsigned char *p, const unsigned char *e) {
    unsigned c = p[0];
    ptrdiff_t left = e - p;
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) return 0;
        return 3;
    }
    if (c > 0xF4 || left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
    if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) return 0;
    return 4;
}

/* Bit i set where byte i of the 16 at p is not ASCII. */
static inline unsigned high_mask16(const unsigned char *p) {
#if defined(__SSE2__)
    return (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)p));
#else
    unsigned mask = 0;
    for (int i = 0; i < 16; ++i) mask |= (unsigned)(p[i] >> 7) << i;
    return mask;
#endif
}

/* Whether [p, e) is UTF-8: ASCII passed over 64 bytes, then 16, at a time (one OR and one mask for 64), each
 * character that is not ASCII checked by utf8_char, as are the ones right after it (text of another script
 * is mostly such characters). */
static int utf8_valid_in(const unsigned char *p, const unsigned char *e) {
    while (p < e) {
        if (e - p >= 64) {
            unsigned char any = 0;
            for (int i = 0; i < 64; ++i) any |= p[i];
            if (!(any & 0x80)) {
                p += 64;
                continue;
            }
        }
        if (e - p >= 16) {
            unsigned mask = high_mask16(p);
            if (!mask) {
                p += 16;
                continue;
            }
            p += __builtin_ctz(mask);
        } else if (*p < 0x80) {
            ++p;
            continue;
        }
        do {
            int n = utf8_char(p, e);
            if (!n) return 0;
            p += n;
        } while (p < e && *p >= 0x80);
    }
    return 1;
}

/* Whether each of the rows texts of a string array from slot first is UTF-8, its offsets ascending within
 * the len bytes: the bytes from the first text's start to the last's end are checked as one run, and no
 * text may start with a continuation byte (in a valid run, that is a character cut between two texts). */
static int texts_valid(const char *offsets, int wide, Py_ssize_t first, int64_t rows, const unsigned char *bytes,
                       Py_ssize_t len) {
    Part part = {.offsets = (const uint8_t *)offsets, .wide = wide};
    int64_t start = offset_at(&part, first), end = offset_at(&part, first + rows);
    if (start < 0 || end < start || end > len) return 0;
    int64_t previous = start;
    for (int64_t row = 1; row <= rows; ++row) {
        int64_t at = offset_at(&part, first + row);
        if (at < previous) return 0;
        if (row < rows && at < end && (bytes[at] & 0xC0) == 0x80) return 0;
        previous = at;
    }
    return utf8_valid_in(bytes + start, bytes + end);
}

/* utf8_valid(offsets, data, first, rows, wide) -> bool: texts_valid, with the GIL released. */
static PyObject *utf8_valid(PyObject *self, PyObject *args) {
    Py_buffer offsets, data;
    Py_ssize_t first;
    long long rows;
    int wide;
    if (!PyArg_ParseTuple(args, "y*y*nLp", &offsets, &data, &first, &rows, &wide)) return NULL;
    PyObject *result = NULL;
    if (first < 0 || rows < 0 || offsets.len / (wide ? 8 : 4) < first + rows + 1) {
        PyErr_SetString(PyExc_ValueError, "utf8_valid: the offsets do not cover the rows");
        goto done;
    }
    int valid;
    Py_BEGIN_ALLOW_THREADS
    valid = texts_valid(offsets.buf, wide, first, rows, data.buf, data.len);
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(valid);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

/* A bytearray of n bytes whose contents are not set, for a reader that fills it whole or cuts it to what it
 * filled: bytearray(n) writes n zeros first, 2% of a JSONL -> Parquet job for its 16 MiB chunks. */
static PyObject *room(PyObject *self, PyObject *args) {
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "n", &size)) return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "room: a size must not be negative");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef methods[] = {
    {"room", room, METH_VARARGS, "room(n) -> bytearray: n bytes, not set: the caller fills them or cuts them off"},
    {"escapes", escapes, METH_VARARGS, "escapes(data) -> int: the bytes escaping data for a JSON string adds"},
    {"escape", escape, METH_VARARGS,
     "escape(offsets, data, first, rows, wide, ends, out) -> bytes written: a string array's escaped texts"},
    {"int_texts", int_texts, METH_VARARGS,
     "int_texts(values, validity, offset, count, width, offsets, data, signed) -> bytes used: Arrow's texts"},
    {"float_texts", float_texts, METH_VARARGS,
     "float_texts(values, validity, offset, count, width, offsets, data) -> bytes used, or -1: JSON texts"},
    {"newlines", newlines, METH_VARARGS, "newlines(data) -> int: how many newline bytes data holds"},
    {"utf8_valid", utf8_valid, METH_VARARGS,
     "utf8_valid(offsets, data, first, rows, wide) -> bool: each text is UTF-8, the offsets ascend within data"},
    {"join", join, METH_VARARGS,
     "join(parts, rows, out) -> bytes written, or -1 where out is too small: the lines of a batch, row by row"},
    {"scan", scan, METH_VARARGS,
     "scan(chunk, kinds, names, units, outputs, rows) -> ((data bytes, nulls, ascii) per field) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_jsonkernel", .m_doc = NULL, .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__jsonkernel(void) {
    fill_escapes();
    if (c_locale == (locale_t)0) {
        c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (c_locale == (locale_t)0) {
            PyErr_SetString(PyExc_ImportError, "cannot create the C locale");
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    static const struct { const char *name; int value; } constants[] = {
        {"I8", K_I8}, {"I16", K_I16}, {"I32", K_I32}, {"I64", K_I64}, {"U8", K_U8}, {"U16", K_U16},
        {"U32", K_U32}, {"U64", K_U64}, {"F32", K_F32}, {"F64", K_F64}, {"BOOL", K_BOOL},
        {"STR32", K_STR32}, {"STR64", K_STR64}, {"TS", K_TS}, {"TS_ZONED", TS_ZONED},
        {"FLOAT_TEXT_MAX", FLOAT_TEXT_MAX}, {"INT_TEXT_MAX", INT_TEXT_MAX},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; ++i) {
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
