/* wire_scan.c - iterative, descriptor-driven pre-scan of protobuf wire bytes. */
#include "format/wire_scan.h"

#include "base/checked.h"
#include "onnx.pb-c.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_FIXED32 = 5 };

/* Larger than any message in onnx.proto (AttributeProto has ~20 fields);
 * a schema with more fields is refused as an internal error, not misread. */
#define SCAN_MAX_FIELDS 64

/* Role of a message type in the budgets. */
enum kind { K_OTHER, K_GRAPH, K_TYPE, K_NODE, K_FUNCTION, K_TENSOR, K_SPARSE, K_SHAPE };

typedef struct frame {
    const ProtobufCMessageDescriptor *desc;
    size_t end;                     /* absolute offset one past the message */
    enum kind kind;
    uint64_t counts[SCAN_MAX_FIELDS]; /* elements seen per field index */
} frame;

typedef struct scanner {
    const uint8_t *p;
    size_t size;
    const teexec_load_options *lim;
    frame *stack;
    uint32_t depth, max_msg_depth;
    uint32_t graph_depth, type_depth;
    tx_wire_stats st;
    /* Fields the budgets look at, resolved once per scan. */
    const ProtobufCFieldDescriptor *f_tensor_dims, *f_sparse_dims, *f_shape_dim,
        *f_node_attr, *f_func_attr;
} scanner;

uint32_t tx_wire_max_message_depth(uint32_t max_nesting_depth)
{
    /* A graph level costs Graph+Node+Attribute (3 messages), a type level
     * TypeProto+Sequence/Map/Optional (2); 16 covers the fixed prefix and
     * suffix (Model, Function, ValueInfo, Tensor type, Shape, Dimension...). */
    return 5u * max_nesting_depth + 16u;
}

static enum kind kind_of(const ProtobufCMessageDescriptor *d)
{
    if (d == &onnx__graph_proto__descriptor) return K_GRAPH;
    if (d == &onnx__type_proto__descriptor) return K_TYPE;
    if (d == &onnx__node_proto__descriptor) return K_NODE;
    if (d == &onnx__function_proto__descriptor) return K_FUNCTION;
    if (d == &onnx__tensor_proto__descriptor) return K_TENSOR;
    if (d == &onnx__sparse_tensor_proto__descriptor) return K_SPARSE;
    if (d == &onnx__tensor_shape_proto__descriptor) return K_SHAPE;
    return K_OTHER;
}

static teexec_status *malformed(const scanner *s, size_t at, const char *what)
{
    const frame *f = s->depth ? &s->stack[s->depth - 1] : NULL;
    return tx_error(TEEXEC_ERR_BAD_MODEL, "malformed protobuf at byte %zu (in %s): %s", at,
                    f ? f->desc->short_name : "?", what);
}

static teexec_status *malformed_field(const scanner *s, size_t at,
                                      const ProtobufCFieldDescriptor *fd, const char *what)
{
    const frame *f = &s->stack[s->depth - 1];
    return tx_error(TEEXEC_ERR_BAD_MODEL, "malformed protobuf at byte %zu (field %s.%s): %s",
                    at, f->desc->short_name, fd->name, what);
}

/* Reads a varint at *pos (< end). Refuses truncation and > 64 bits. */
static bool read_varint(const uint8_t *p, size_t *pos, size_t end, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = *pos;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (i >= end) return false;
        uint8_t b = p[i++];
        if (shift == 63 && (b & 0x7e)) return false; /* bits beyond 64 */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pos = i;
            *out = v;
            return true;
        }
    }
    return false; /* an 11th byte would be needed */
}

static int expected_wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_BOOL: case PROTOBUF_C_TYPE_ENUM:
        return WT_VARINT;
    case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return WT_FIXED32;
    case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return WT_FIXED64;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE:
        return WT_LEN;
    }
    return -1;
}

static const char *wire_type_name(int wt)
{
    switch (wt) {
    case WT_VARINT: return "varint";
    case WT_FIXED64: return "64-bit";
    case WT_LEN: return "length-delimited";
    case WT_SGROUP: return "start-group";
    case WT_EGROUP: return "end-group";
    case WT_FIXED32: return "32-bit";
    }
    return "reserved";
}

static teexec_status *push(scanner *s, const ProtobufCMessageDescriptor *d, size_t end,
                           size_t at)
{
    if (d->n_fields > SCAN_MAX_FIELDS)
        return tx_error(TEEXEC_ERR_INTERNAL, "message %s has %u fields, more than the scanner's %d",
                        d->short_name, d->n_fields, SCAN_MAX_FIELDS);
    enum kind k = kind_of(d);
    if (k == K_GRAPH && ++s->graph_depth > s->lim->max_nesting_depth)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "graphs nested %u deep at byte %zu exceed the nesting budget "
                        "(max_nesting_depth = %u)",
                        s->graph_depth, at, s->lim->max_nesting_depth);
    if (k == K_TYPE && ++s->type_depth > s->lim->max_nesting_depth)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "types nested %u deep at byte %zu exceed the nesting budget "
                        "(max_nesting_depth = %u)",
                        s->type_depth, at, s->lim->max_nesting_depth);
    if (s->depth >= s->max_msg_depth)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "messages nested %u deep at byte %zu exceed the nesting budget "
                        "(max_nesting_depth = %u)",
                        s->depth + 1, at, s->lim->max_nesting_depth);
    if (k == K_TENSOR && ++s->st.tensors > s->lim->max_tensor_count)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "more than %llu tensors (at byte %zu) exceed the tensor count budget "
                        "(max_tensor_count)",
                        (unsigned long long)s->lim->max_tensor_count, at);
    if (k == K_NODE && ++s->st.nodes > s->lim->max_nodes)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "more than %u nodes (at byte %zu) exceed the node budget (max_nodes)",
                        s->lim->max_nodes, at);
    frame *f = &s->stack[s->depth++];
    f->desc = d;
    f->end = end;
    f->kind = k;
    memset(f->counts, 0, sizeof(uint64_t) * d->n_fields);
    s->st.messages++;
    if (s->depth > s->st.max_depth) s->st.max_depth = s->depth;
    return NULL;
}

static void pop(scanner *s)
{
    frame *f = &s->stack[--s->depth];
    if (f->kind == K_GRAPH) s->graph_depth--;
    if (f->kind == K_TYPE) s->type_depth--;
}

/* Counts `n` more elements of field `fd` in the top frame and applies the
 * per-field budgets. */
static teexec_status *count_elements(scanner *s, const ProtobufCFieldDescriptor *fd, uint64_t n,
                                     size_t at)
{
    frame *f = &s->stack[s->depth - 1];
    uint64_t *c = &f->counts[fd - f->desc->fields];
    if (!tx_add_u64(*c, n, c) || *c > (uint64_t)INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "field %s.%s repeats more than %d times (at byte %zu); protobuf-c's "
                        "allocation size would overflow",
                        f->desc->short_name, fd->name, INT_MAX, at);
    if ((fd == s->f_tensor_dims || fd == s->f_sparse_dims || fd == s->f_shape_dim) &&
        *c > s->lim->max_rank)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "%s at byte %zu has more than %u dims, over the rank budget (max_rank)",
                        f->desc->short_name, at, s->lim->max_rank);
    if ((fd == s->f_node_attr || fd == s->f_func_attr) && *c > s->lim->max_attributes)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "%s at byte %zu has more than %u attributes, over the attribute budget "
                        "(max_attributes)",
                        f->desc->short_name, at, s->lim->max_attributes);
    return NULL;
}

/* protobuf-c merges a singular message field that occurs twice (repeated
 * fields inside it are concatenated, so dims could grow past what this scan
 * counted) and replaces one oneof member by another. Valid protobuf, but no
 * ONNX writer emits either, so both are refused to keep the counts exact. */
static teexec_status *single_message(scanner *s, const ProtobufCFieldDescriptor *fd, size_t at)
{
    frame *f = &s->stack[s->depth - 1];
    const ProtobufCMessageDescriptor *d = f->desc;
    if (f->counts[fd - d->fields]++)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "field %s.%s occurs twice at byte %zu; merging singular messages is "
                        "not supported",
                        d->short_name, fd->name, at);
    if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        for (unsigned i = 0; i < d->n_fields; i++) {
            const ProtobufCFieldDescriptor *o = &d->fields[i];
            if (o != fd && (o->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                o->quantifier_offset == fd->quantifier_offset && f->counts[i])
                return tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "%s sets both %s and %s of one oneof (at byte %zu)",
                                d->short_name, o->name, fd->name, at);
        }
    }
    return NULL;
}

static bool is_scalar_repeatable(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
           t != PROTOBUF_C_TYPE_MESSAGE;
}

/* A packed run of scalars: every element must be complete. Returns the
 * element count through *n. */
static teexec_status *scan_packed(scanner *s, const ProtobufCFieldDescriptor *fd, size_t start,
                                  size_t end, uint64_t *n)
{
    int wt = expected_wire_type(fd->type);
    size_t len = end - start;
    if (wt == WT_FIXED32 || wt == WT_FIXED64) {
        size_t w = wt == WT_FIXED32 ? 4 : 8;
        if (len % w) return malformed_field(s, start, fd, "packed fixed-width run has a partial element");
        *n = len / w;
        return NULL;
    }
    uint64_t count = 0, v;
    size_t pos = start;
    while (pos < end) {
        if (!read_varint(s->p, &pos, end, &v))
            return malformed_field(s, pos, fd, "truncated or overlong varint in a packed run");
        count++;
    }
    *n = count;
    return NULL;
}

static teexec_status *scan_field(scanner *s, size_t tag_at, size_t *pos)
{
    frame *f = &s->stack[s->depth - 1];
    uint64_t tag;
    if (!read_varint(s->p, pos, f->end, &tag)) return malformed(s, tag_at, "truncated field tag");
    if (tag > UINT32_MAX) return malformed(s, tag_at, "field tag out of range");
    uint32_t field_no = (uint32_t)(tag >> 3);
    int wt = (int)(tag & 7);
    if (field_no == 0) return malformed(s, tag_at, "field number 0");
    if (wt == WT_SGROUP || wt == WT_EGROUP || wt > WT_FIXED32) {
        char msg[96];
        snprintf(msg, sizeof msg, "unsupported wire type %d (%s) for field %u", wt,
                 wire_type_name(wt), field_no);
        return malformed(s, tag_at, msg);
    }

    /* The extent of the value. */
    size_t vstart = *pos, vend;
    uint64_t v;
    switch (wt) {
    case WT_VARINT:
        if (!read_varint(s->p, pos, f->end, &v))
            return malformed(s, vstart, "truncated or overlong varint");
        vend = *pos;
        break;
    case WT_FIXED64:
    case WT_FIXED32: {
        size_t w = wt == WT_FIXED32 ? 4 : 8;
        if (f->end - vstart < w) return malformed(s, vstart, "truncated fixed-width value");
        vend = vstart + w;
        break;
    }
    default: /* WT_LEN */
        if (!read_varint(s->p, pos, f->end, &v))
            return malformed(s, vstart, "truncated length prefix");
        if (v >= (uint64_t)INT_MAX)
            return malformed(s, vstart, "declared length is 2 GiB or more");
        if (v > f->end - *pos) {
            char msg[128];
            snprintf(msg, sizeof msg, "declared length %llu runs past the end of its message "
                     "(%zu bytes left)", (unsigned long long)v, f->end - *pos);
            return malformed(s, vstart, msg);
        }
        vstart = *pos;
        vend = vstart + (size_t)v;
        break;
    }
    *pos = vend;

    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(f->desc, field_no);
    if (!fd) {
        s->st.unknown_fields++;
        return NULL; /* skipped by extent, never entered */
    }
    int want = expected_wire_type(fd->type);
    if (wt != want) {
        if (!(wt == WT_LEN && fd->label == PROTOBUF_C_LABEL_REPEATED &&
              is_scalar_repeatable(fd->type))) {
            char msg[128];
            snprintf(msg, sizeof msg, "wire type %s where the schema says %s",
                     wire_type_name(wt), wire_type_name(want));
            return malformed_field(s, tag_at, fd, msg);
        }
        uint64_t n = 0;
        TX_TRY(scan_packed(s, fd, vstart, vend, &n));
        return fd->label == PROTOBUF_C_LABEL_REPEATED ? count_elements(s, fd, n, tag_at) : NULL;
    }
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) TX_TRY(count_elements(s, fd, 1, tag_at));
    if (fd->label != PROTOBUF_C_LABEL_REPEATED && fd->type == PROTOBUF_C_TYPE_MESSAGE)
        TX_TRY(single_message(s, fd, tag_at));
    if (fd->type == PROTOBUF_C_TYPE_STRING && memchr(s->p + vstart, 0, vend - vstart))
        return malformed_field(s, vstart, fd, "string contains a NUL byte");
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        *pos = vstart; /* enter it: its fields are scanned next */
        return push(s, fd->descriptor, vend, tag_at);
    }
    return NULL;
}

teexec_status *tx_wire_scan(const uint8_t *data, size_t size,
                            const ProtobufCMessageDescriptor *root,
                            const teexec_load_options *limits, tx_wire_stats *stats)
{
    if (stats) memset(stats, 0, sizeof(*stats));
    if (size >= (size_t)INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "a protobuf message of %zu bytes is over 2 GiB", size);
    if (size && !data) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "NULL data");
    scanner s;
    memset(&s, 0, sizeof(s));
    s.p = data;
    s.size = size;
    s.lim = limits;
    s.max_msg_depth = tx_wire_max_message_depth(limits->max_nesting_depth);
    s.stack = malloc(sizeof(frame) * s.max_msg_depth);
    if (!s.stack) return tx_oom();
    s.f_tensor_dims = protobuf_c_message_descriptor_get_field_by_name(
        &onnx__tensor_proto__descriptor, "dims");
    s.f_sparse_dims = protobuf_c_message_descriptor_get_field_by_name(
        &onnx__sparse_tensor_proto__descriptor, "dims");
    s.f_shape_dim = protobuf_c_message_descriptor_get_field_by_name(
        &onnx__tensor_shape_proto__descriptor, "dim");
    s.f_node_attr = protobuf_c_message_descriptor_get_field_by_name(
        &onnx__node_proto__descriptor, "attribute");
    s.f_func_attr = protobuf_c_message_descriptor_get_field_by_name(
        &onnx__function_proto__descriptor, "attribute_proto");

    teexec_status *st = push(&s, root, size, 0);
    size_t pos = 0;
    while (!st && s.depth) {
        if (pos == s.stack[s.depth - 1].end) {
            pop(&s);
            continue;
        }
        st = scan_field(&s, pos, &pos);
    }
    if (!st && stats) *stats = s.st;
    free(s.stack);
    return st;
}
