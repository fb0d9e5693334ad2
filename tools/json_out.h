/*
 * json_out.h - a small streaming JSON writer for the CLI's --json output.
 *
 * Writes pretty-printed (2-space indented) JSON to a FILE*. Commas, colons
 * and nesting are tracked by the writer, so callers just emit values and
 * keys in order. Strings are escaped per RFC 8259 and always come out as
 * valid UTF-8: bytes that are not well-formed UTF-8 (names in ONNX files are
 * arbitrary bytes) are written as U+FFFD. Non-finite doubles are written
 * as null, since JSON has no spelling for them.
 *
 * Ownership: the writer does not own the FILE. Thread-safety: one writer per
 * thread.
 */
#ifndef TEEXEC_TOOLS_JSON_OUT_H
#define TEEXEC_TOOLS_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

typedef struct json_out {
    FILE *f;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* no element written yet at this level */
    bool after_key;             /* a key was written; the value follows on the same line */
} json_out;

void json_init(json_out *j, FILE *f);

void json_begin_object(json_out *j);
void json_end_object(json_out *j);
void json_begin_array(json_out *j);
void json_end_array(json_out *j);

/* Inside an object: the key of the next value. */
void json_key(json_out *j, const char *key);

void json_string(json_out *j, const char *s); /* NULL writes null */
void json_int(json_out *j, int64_t v);
void json_uint(json_out *j, uint64_t v);
void json_double(json_out *j, double v);
void json_bool(json_out *j, bool v);
void json_null(json_out *j);

/* Ends the document with a newline. */
void json_finish(json_out *j);

/* Writes `s` as a JSON string literal (quotes included) to f. */
void json_write_escaped(FILE *f, const char *s);

#endif
