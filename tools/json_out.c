/*
 * json_out.c - the streaming JSON writer (see json_out.h).
 */
#include "json_out.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(json_out *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->first[0] = true;
}

static void indent(json_out *j)
{
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

/* Separator and indentation before a value or key at the current level. */
static void before_item(json_out *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth == 0) return;
    int d = j->depth < JSON_MAX_DEPTH ? j->depth : JSON_MAX_DEPTH - 1;
    if (!j->first[d]) fputc(',', j->f);
    j->first[d] = false;
    indent(j);
}

static void open_(json_out *j, char c)
{
    before_item(j);
    fputc(c, j->f);
    j->depth++;
    if (j->depth < JSON_MAX_DEPTH) j->first[j->depth] = true;
}

static void close_(json_out *j, char c)
{
    int d = j->depth < JSON_MAX_DEPTH ? j->depth : JSON_MAX_DEPTH - 1;
    bool empty = j->first[d];
    j->depth--;
    if (!empty) indent(j);
    fputc(c, j->f);
}

void json_begin_object(json_out *j) { open_(j, '{'); }
void json_end_object(json_out *j) { close_(j, '}'); }
void json_begin_array(json_out *j) { open_(j, '['); }
void json_end_array(json_out *j) { close_(j, ']'); }

void json_key(json_out *j, const char *key)
{
    before_item(j);
    json_write_escaped(j->f, key ? key : "");
    fputs(": ", j->f);
    j->after_key = true;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 if it is not
 * one (overlongs, surrogates and values past U+10FFFF included). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
        if (c == 0xe0 && p[1] < 0xa0) return 0;  /* overlong */
        if (c == 0xed && p[1] >= 0xa0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) return 0;
        if (c == 0xf0 && p[1] < 0x90) return 0;  /* overlong */
        if (c == 0xf4 && p[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

void json_write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '"': fputs("\\\"", f); p++; continue;
        case '\\': fputs("\\\\", f); p++; continue;
        case '\n': fputs("\\n", f); p++; continue;
        case '\r': fputs("\\r", f); p++; continue;
        case '\t': fputs("\\t", f); p++; continue;
        case '\b': fputs("\\b", f); p++; continue;
        case '\f': fputs("\\f", f); p++; continue;
        default: break;
        }
        if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        /* The NUL terminator stops utf8_len's continuation checks early,
         * so it never reads past the string. */
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        fwrite(p, 1, n, f);
        p += n;
    }
    fputc('"', f);
}

void json_string(json_out *j, const char *s)
{
    if (!s) {
        json_null(j);
        return;
    }
    before_item(j);
    json_write_escaped(j->f, s);
}

void json_int(json_out *j, int64_t v)
{
    before_item(j);
    fprintf(j->f, "%" PRId64, v);
}

void json_uint(json_out *j, uint64_t v)
{
    before_item(j);
    fprintf(j->f, "%" PRIu64, v);
}

void json_double(json_out *j, double v)
{
    if (!isfinite(v)) {
        json_null(j);
        return;
    }
    before_item(j);
    fprintf(j->f, "%.17g", v);
}

void json_bool(json_out *j, bool v)
{
    before_item(j);
    fputs(v ? "true" : "false", j->f);
}

void json_null(json_out *j)
{
    before_item(j);
    fputs("null", j->f);
}

void json_finish(json_out *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}
