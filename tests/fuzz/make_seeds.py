#!/usr/bin/python3
"""Regenerates tests/fuzz/seeds/: a dozen small valid models from
libonnx-testdata, a few TensorProto .pb files, three generated models that
reach the less common paths (sparse initializer, model-local function with a
Constant, typed-field FP8/INT4/string tensors), and the malformed corpus.
Run with Debian's /usr/bin/python3 (onnx 1.12); the seeds are committed."""
import glob
import os
import shutil

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
DATA = "/usr/share/libonnx-testdata/data"
MODELS = ["node/test_abs", "node/test_if", "node/test_loop11", "node/test_constant",
          "node/test_cast_FLOAT_to_FLOAT16", "node/test_gemm_all_attributes",
          "node/test_sequence_insert_at_back", "node/test_scan9_sum",
          "node/test_strnormalizer_export_monday_casesensintive_lower",
          "node/test_constantofshape_int_zeros", "pytorch-converted/test_Linear_no_bias",
          "simple/test_sequence_model1", "node/test_split_zero_size_splits"]
PBS = ["node/test_abs/test_data_set_0/input_0.pb",
       "node/test_strnormalizer_export_monday_casesensintive_lower/test_data_set_0/input_0.pb",
       "node/test_cast_FLOAT_to_BFLOAT16/test_data_set_0/output_0.pb"]


def save(name, model):
    model.ir_version = 8
    with open(os.path.join(SEEDS, name), "wb") as f:
        f.write(model.SerializeToString())


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    os.makedirs(SEEDS)
    for m in MODELS:
        shutil.copy(os.path.join(DATA, m, "model.onnx"),
                    os.path.join(SEEDS, "valid_" + os.path.basename(m) + ".onnx"))
    for p in PBS:
        parts = p.split("/")
        shutil.copy(os.path.join(DATA, p), os.path.join(SEEDS, parts[1] + "_" + parts[-1]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    # sparse initializer
    values = helper.make_tensor("sv", TensorProto.FLOAT, [2], [1.0, 2.0])
    indices = helper.make_tensor("si", TensorProto.INT64, [2], [1, 4])
    sp = helper.make_sparse_tensor(values, indices, [2, 3])
    g = helper.make_graph([helper.make_node("Add", ["x", "sv"], ["y"])], "g", [x], [y])
    g.sparse_initializer.extend([sp])
    save("gen_sparse.onnx", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    # model-local function with a Constant
    const = helper.make_node("Constant", [], ["c"],
                             value=numpy_helper.from_array(np.ones((2, 3), np.float32)))
    body = [const, helper.make_node("Add", ["a", "c"], ["b"])]
    fn = helper.make_function("te.fuse", "AddOne", ["a"], ["b"], body,
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("AddOne", ["x"], ["y"], domain="te.fuse")],
                          "g", [x], [y])
    save("gen_function.onnx", helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("te.fuse", 1)],
        functions=[fn]))
    # typed-field tensors of the newer types (data_type 17..26 as plain ints)
    inits = []
    for dt, vals in ((17, [0x38, 0x40, 0x7f]), (21, [0x21, 0x03]), (23, [0x76, 0x05]),
                     (24, [127, 128, 255]), (26, [0xe4])):
        t = TensorProto()
        t.name = "t%d" % dt
        t.data_type = dt
        t.dims.extend([3])
        t.int32_data.extend(vals)
        inits.append(t)
    s = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b""])
    inits.append(s)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y],
                          initializer=inits)
    save("gen_typed.onnx", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    for f in sorted(glob.glob(os.path.join(HERE, "..", "malformed", "*.onnx"))):
        if os.path.getsize(f) <= 4096:
            shutil.copy(f, os.path.join(SEEDS, "malformed_" + os.path.basename(f)))
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(SEEDS, "*")))
    print("%d seeds, %d bytes" % (len(os.listdir(SEEDS)), total))


if __name__ == "__main__":
    main()
