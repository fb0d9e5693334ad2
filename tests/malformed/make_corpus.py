#!/usr/bin/python3
"""Generates the malformed-model corpus in tests/malformed/ and its manifest.

Run from anywhere with Debian's /usr/bin/python3 (onnx 1.12, numpy):

    /usr/bin/python3 tests/malformed/make_corpus.py

The generated files are committed; tests never run Python. Each case is a
valid model built with onnx.helper and then broken, either through the
message fields or by byte surgery on the serialized form (protobuf's own
serializer cannot produce wrong wire types or truncated lengths).

expected.txt has one line per file: FILE<TAB>CODE<TAB>message substring.
A FILE prefixed with "ir:" is a graph-level case: the format layer accepts
it, and the public teexec_model_load_file must refuse it.
"""
import os
import random
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
EXT = os.path.join(HERE, "ext")

BAD_MODEL, LIMIT, IO, UNSUPPORTED = "BAD_MODEL", "LIMIT", "IO", "UNSUPPORTED"
manifest = []


# ---- raw protobuf writing ----
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def tag(field, wt):
    return varint((field << 3) | wt)


def ld(field, payload):
    return tag(field, 2) + varint(len(payload)) + payload


def vi(field, value):
    return tag(field, 0) + varint(value)


# ---- helpers ----
def write(name, data, code, substr, graph_level=False):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    manifest.append((("ir:" if graph_level else "") + name, code, substr))


def model_bytes(graph, opsets=None, **kw):
    m = helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", 17)], **kw)
    m.ir_version = 8
    return m.SerializeToString()


def relu_graph(initializers=(), inputs=None, extra_nodes=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")] + list(extra_nodes)
    return helper.make_graph(nodes, "g", inputs or [x], [y], initializer=list(initializers))


def float_init(name="w", dims=(2, 3)):
    return numpy_helper.from_array(np.arange(np.prod(dims), dtype=np.float32).reshape(dims), name)


def with_init(t):
    """A model whose only initializer is the TensorProto t."""
    return model_bytes(relu_graph([t]))


def ext_tensor(location, offset=None, length=None, dims=(2, 3)):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    return t


def must_not_parse(data):
    try:
        onnx.ModelProto().ParseFromString(data)
    except Exception:  # noqa: BLE001 - any decode error is what we want
        return
    raise SystemExit("a truncation case still parses: fix its cut point")


def main():
    os.makedirs(EXT, exist_ok=True)
    # The external data file: six floats, 24 bytes.
    with open(os.path.join(EXT, "w.bin"), "wb") as f:
        f.write(np.arange(6, dtype=np.float32).tobytes())
    for link, target in (("passwd_link", "/etc/passwd"), ("dir_link", ".")):
        p = os.path.join(EXT, link)
        if os.path.lexists(p):
            os.unlink(p)
        os.symlink(target, p)

    good = with_init(float_init())
    # A valid reference model using external data: it must load.
    write("ok_external.onnx", with_init(ext_tensor("ext/w.bin", "0", "24")), "OK", "")
    write("ok_inline.onnx", good, "OK", "")

    # ---- bytes ----
    write("empty.onnx", b"", BAD_MODEL, "empty")
    write("text.onnx", b"this is not an onnx model\n", BAD_MODEL, "malformed protobuf")
    rnd = random.Random(20261130)
    write("garbage.onnx", b"\x0f" + bytes(rnd.getrandbits(8) for _ in range(300)),
          BAD_MODEL, "malformed protobuf")
    # Truncations at several depths: mid graph header, mid node, mid raw_data.
    g_at = good.index(b"relu")
    for name, cut in (("truncated_tag.onnx", 1 if good[0] & 0x80 else None),
                      ("truncated_in_node.onnx", g_at + 2),
                      ("truncated_in_raw_data.onnx", len(good) - 40),
                      ("truncated_last_byte.onnx", len(good) - 1)):
        if cut is None:
            continue
        must_not_parse(good[:cut])
        write(name, good[:cut], BAD_MODEL, "malformed protobuf")
    half = len(good) // 2
    must_not_parse(good[:half])
    write("truncated_half.onnx", good[:half], BAD_MODEL, "malformed protobuf")

    # ---- wire types and lengths ----
    write("wire_ir_version_as_bytes.onnx", ld(1, b"eight") + good, BAD_MODEL,
          "ModelProto.ir_version): wire type length-delimited")
    write("wire_graph_as_varint.onnx", vi(8 - 1, 5) + good, BAD_MODEL,
          "ModelProto.graph): wire type varint")
    tensor_fixed64_dims = tag(1, 1) + struct.pack("<q", 6) + vi(2, 1)
    write("wire_dims_as_fixed64.onnx", ld(7, ld(5, tensor_fixed64_dims)), BAD_MODEL,
          "TensorProto.dims): wire type 64-bit")
    write("wire_group.onnx", tag(7, 3) + good, BAD_MODEL, "start-group")
    write("huge_declared_length.onnx", tag(7, 2) + varint(1 << 40) + b"\x0a\x00", BAD_MODEL,
          "2 GiB or more")
    write("length_past_end.onnx", tag(7, 2) + varint(100000) + good[:64], BAD_MODEL,
          "runs past the end")
    write("overlong_varint.onnx", tag(1, 0) + b"\xff" * 10 + b"\x01", BAD_MODEL,
          "overlong varint")
    write("merge_graph_twice.onnx", good + ld(7, b""), UNSUPPORTED, "occurs twice")
    write("string_with_nul.onnx", ld(2, b"pro\x00ducer") + good, BAD_MODEL, "NUL byte")

    # ---- dims and payloads ----
    def init_with(dims, dtype=TensorProto.FLOAT, raw=None, **typed):
        t = TensorProto()
        t.name = "w"
        t.data_type = dtype
        t.dims.extend(dims)
        if raw is not None:
            t.raw_data = raw
        for k, v in typed.items():
            getattr(t, k).extend(v)
        return t

    write("dims_overflow_uint64.onnx", with_init(init_with([1 << 62, 1 << 62, 16])), LIMIT,
          "overflows 64 bits")
    write("dims_overflow_size_t.onnx", with_init(init_with([1 << 32, 1 << 32])), LIMIT,
          "overflows 64 bits")
    write("dims_over_element_budget.onnx", with_init(init_with([1 << 30, 1 << 30])), LIMIT,
          "max_tensor_elements")
    write("negative_dims.onnx", with_init(init_with([2, -3])), BAD_MODEL, "negative dimension")
    write("payload_shorter.onnx", with_init(init_with([2, 3], raw=b"\0" * 20)), BAD_MODEL,
          "raw_data has 20 bytes")
    write("payload_longer.onnx", with_init(init_with([2, 3], raw=b"\0" * 28)), BAD_MODEL,
          "raw_data has 28 bytes")
    write("payload_typed_short.onnx", with_init(init_with([2, 3], float_data=[1.0] * 5)),
          BAD_MODEL, "float_data has 5 values")
    write("payload_missing.onnx", with_init(init_with([2, 3])), BAD_MODEL, "no data for its 6")
    write("payload_fp4_odd_short.onnx",
          with_init(init_with([5], dtype=23, raw=b"\x21\x43")), BAD_MODEL,
          "raw_data has 2 bytes")
    write("typed_field_wrong_kind.onnx", with_init(init_with([2], int64_data=[1, 2])), BAD_MODEL,
          "int64_data holds float")
    write("undefined_data_type.onnx", with_init(init_with([2], dtype=0, raw=b"\0" * 8)),
          BAD_MODEL, "UNDEFINED")
    seg = init_with([2], raw=b"\0" * 8)
    seg.segment.begin, seg.segment.end = 0, 2
    write("segment.onnx", with_init(seg), UNSUPPORTED, "segment")
    # Payload errors in a Constant attribute and inside a subgraph.
    bad_const = helper.make_node("Constant", [], ["c"], name="const",
                                 value=init_with([4], raw=b"\0" * 3))
    write("constant_payload_short.onnx", model_bytes(relu_graph(extra_nodes=[bad_const])),
          BAD_MODEL, "raw_data has 3 bytes")
    sub = helper.make_graph([helper.make_node("Identity", ["w"], ["z"])], "then",
                            [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                            initializer=[init_with([3, -1])])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    if_node = helper.make_node("If", ["cond"], ["z"], name="if", then_branch=sub, else_branch=sub)
    g = helper.make_graph([if_node], "g", [cond],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    write("subgraph_negative_dims.onnx", model_bytes(g), BAD_MODEL, "negative dimension")

    # ---- budgets ----
    write("rank_1000.onnx", with_init(init_with([1] * 1000, raw=b"\0" * 4)), LIMIT, "max_rank")
    x1000 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * 1000)
    write("shape_rank_1000.onnx", model_bytes(relu_graph(inputs=[x1000])), LIMIT, "max_rank")
    # Count bombs: 5000 dims in one packed run; 5000 (empty) attributes on a node.
    packed = ld(1, b"\x01" * 5000) + vi(2, 1)
    write("count_bomb_packed_dims.onnx", ld(7, ld(5, packed)), LIMIT, "max_rank")
    node = ld(4, b"Relu") + b"\x2a\x00" * 5000
    write("count_bomb_attributes.onnx", vi(1, 8) + ld(7, ld(1, node)), LIMIT, "max_attributes")
    # Nesting bomb: If then_branch graphs 100 deep.
    inner = helper.make_graph([], "leaf", [], [])
    leaf = inner
    for _ in range(99):
        node = helper.make_node("If", ["cond"], ["z"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], "level", [], [])
    write("nesting_bomb_graphs.onnx", model_bytes(inner), LIMIT, "max_nesting_depth")
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    for _ in range(100):
        t = helper.make_sequence_type_proto(t)
    vinfo = helper.make_value_info("x", t)
    write("nesting_bomb_types.onnx", model_bytes(relu_graph(inputs=[vinfo])), LIMIT,
          "max_nesting_depth")

    # ---- external data ----
    ext_cases = [
        ("ext_dotdot.onnx", ext_tensor("../malformed/ext/w.bin"), BAD_MODEL, "'..'"),
        ("ext_dotdot_inner.onnx", ext_tensor("ext/../../../../etc/passwd"), BAD_MODEL, "'..'"),
        ("ext_absolute.onnx", ext_tensor("/etc/passwd"), BAD_MODEL, "absolute path"),
        ("ext_empty_location.onnx", ext_tensor(""), BAD_MODEL, "location is empty"),
        ("ext_symlink_passwd.onnx", ext_tensor("ext/passwd_link"), BAD_MODEL, "symbolic link"),
        ("ext_symlink_dir.onnx", ext_tensor("ext/dir_link/w.bin"), BAD_MODEL, "symbolic link"),
        ("ext_offset_past_eof.onnx", ext_tensor("ext/w.bin", "4096", "24"), BAD_MODEL,
         "past the end"),
        ("ext_range_past_eof.onnx", ext_tensor("ext/w.bin", "8", "24"), BAD_MODEL,
         "runs past the end"),
        ("ext_offset_overflow.onnx", ext_tensor("ext/w.bin", "18446744073709551616", "24"),
         BAD_MODEL, "overflows 64 bits"),
        ("ext_missing_file.onnx", ext_tensor("ext/missing.bin"), IO, "not found"),
        ("ext_offset_not_numeric.onnx", ext_tensor("ext/w.bin", "12abc", "24"), BAD_MODEL,
         "not a non-negative decimal"),
        ("ext_length_negative.onnx", ext_tensor("ext/w.bin", "0", "-24"), BAD_MODEL,
         "not a non-negative decimal"),
        ("ext_length_mismatch.onnx", ext_tensor("ext/w.bin", "0", "20"), BAD_MODEL,
         "does not match"),
        ("ext_not_regular.onnx", ext_tensor("ext"), BAD_MODEL, "not a regular file"),
    ]
    for name, t, code, substr in ext_cases:
        write(name, with_init(t), code, substr)
    # The location key missing entirely.
    t = ext_tensor("ext/w.bin")
    del t.external_data[:]
    e = t.external_data.add()
    e.key, e.value = "offset", "0"
    write("ext_no_location.onnx", with_init(t), BAD_MODEL, "no 'location'")

    # ---- graph-level cases (validated by the IR layer) ----
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="a"),
                           helper.make_node("Relu", ["x"], ["y"], name="b")], "g", [x], [y])
    write("dup_value_names.onnx", model_bytes(g), BAD_MODEL, "\"y\"", graph_level=True)
    g = helper.make_graph([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")],
                          "g", [x], [y])
    write("undefined_input.onnx", model_bytes(g), BAD_MODEL, "\"nowhere\"", graph_level=True)
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                           helper.make_node("Relu", ["a"], ["b"], name="n2"),
                           helper.make_node("Relu", ["a"], ["y"], name="n3")], "g", [x], [y])
    write("cycle.onnx", model_bytes(g), BAD_MODEL, "\"b\"", graph_level=True)
    g = helper.make_graph([helper.make_node("Frob", ["x"], ["y"], name="frob",
                                            domain="com.example")], "g", [x], [y])
    write("domain_without_opset.onnx", model_bytes(g), BAD_MODEL, "com.example",
          graph_level=True)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x, x], [y])
    write("input_declared_twice.onnx", model_bytes(g), BAD_MODEL, "listed twice",
          graph_level=True)

    with open(os.path.join(HERE, "expected.txt"), "w") as f:
        f.write("# FILE<TAB>EXPECTED_CODE<TAB>message substring; made by make_corpus.py.\n")
        f.write("# 'ir:' marks graph-level cases checked through teexec_model_load_file.\n")
        for name, code, substr in manifest:
            f.write("%s\t%s\t%s\n" % (name, code, substr))
    print("wrote %d cases" % len(manifest))


if __name__ == "__main__":
    main()
