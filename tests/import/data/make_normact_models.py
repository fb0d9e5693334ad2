#!/usr/bin/python3
"""Writes the tiny graphs tests/import/test_lower_norm_act.c lowers:
normalizations, activations and residual joins/forks in the spellings
PyTorch's exporter uses, plus near misses that must stay standard ops.

    /usr/bin/python3 tests/import/data/make_normact_models.py

Each graph is x [2, 3, 8] float32 (named "x") -> "y" (some have a second
output to give an intermediate an outside reader). Weights come from a fixed
seed, so rerunning rewrites identical files. Names start with normact_;
"neg" in a name marks a near miss.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
B, S, H = 2, 3, 8
RNG = np.random.default_rng(606)


class G:
    def __init__(self, name):
        self.name = name
        self.nodes, self.inits, self.outputs = [], [], []
        self.inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H])]
        self.k = 0
        self.te = False

    def fresh(self, hint):
        self.k += 1
        return f"{hint}_{self.k}"

    def const(self, value, dtype=np.float32):
        """A Constant node, as the exporter writes literals."""
        out = self.fresh("c")
        self.nodes.append(helper.make_node("Constant", [], [out],
                                           value=numpy_helper.from_array(np.array(value, dtype))))
        return out

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, domain="", n_out=1, **attrs):
        outs = [self.fresh(op_type) for _ in range(n_out)]
        if domain == "te.ops":
            self.te = True
        self.nodes.append(helper.make_node(op_type, inputs, outs, domain=domain,
                                           name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, value, name="y", shape=(B, S, H), dtype=TensorProto.FLOAT):
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))

    def save(self):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        opsets = [helper.make_opsetid("", 17)]
        if self.te:
            opsets.append(helper.make_opsetid("te.ops", 1))
        model = helper.make_model(graph, opset_imports=opsets, producer_name="teexec-tests")
        model.ir_version = 8
        if not self.te:
            onnx.checker.check_model(model, full_check=True)
        onnx.save(model, os.path.join(HERE, self.name + ".onnx"))


def w1(n=H):
    return (1.0 + 0.1 * RNG.standard_normal(n)).astype(np.float32)


def mat(rows, cols):
    return (RNG.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)


# ---- LayerNorm ---------------------------------------------------------------

def layernorm17(name="normact_ln17", axis=-1):
    g = G(name)
    g.init("w", w1())
    g.init("b", (0.1 * RNG.standard_normal(H)).astype(np.float32))
    y = g.op("LayerNormalization", ["x", "w", "b"], axis=axis, epsilon=1e-5)
    g.output(y)
    g.save()


def layernorm_decomposed(name="normact_ln_decomposed", extra_reader=False):
    """PyTorch's opset 14 export of nn.LayerNorm."""
    g = G(name)
    g.init("ln.weight", w1())
    g.init("ln.bias", (0.1 * RNG.standard_normal(H)).astype(np.float32))
    m = g.op("ReduceMean", ["x"], axes=[-1])
    d = g.op("Sub", ["x", m])
    p = g.op("Pow", [d, g.const(2.0)])
    v = g.op("ReduceMean", [p], axes=[-1])
    a = g.op("Add", [v, g.const(1e-5)])
    s = g.op("Sqrt", [a])
    n = g.op("Div", [d, s])
    w = g.op("Mul", [n, "ln.weight"])
    y = g.op("Add", [w, "ln.bias"])
    g.output(y)
    if extra_reader:
        g.output(v, "variance", shape=(B, S, 1))
    g.save()


# ---- RMSNorm -----------------------------------------------------------------

def rmsnorm(name, exponent=2.0, square="pow", inverse="div1", axes=(-1,), cast=False,
            weight_first=False, eps_first=False, fp16=False):
    """fp16: x and the weight are float16, the statistics are computed in
    float32 between two Casts (`x.float()` ... `.to(x.dtype)`)."""
    g = G(name)
    if fp16:
        g.inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [B, S, H])]
        cast = True
    g.init("norm.weight", w1().astype(np.float16) if fp16 else w1())
    x = g.op("Cast", ["x"], to=TensorProto.FLOAT) if cast else "x"
    sq = g.op("Pow", [x, g.const(exponent)]) if square == "pow" else g.op("Mul", [x, x])
    ms = g.op("ReduceMean", [sq], axes=list(axes), keepdims=1)
    eps = g.const(1e-6)
    ve = g.op("Add", [eps, ms] if eps_first else [ms, eps])
    s = g.op("Sqrt", [ve])
    if inverse == "div1":
        n = g.op("Mul", [x, g.op("Div", [g.const(1.0), s])])
    elif inverse == "recip":
        n = g.op("Mul", [g.op("Reciprocal", [s]), x])
    else:  # x / s
        n = g.op("Div", [x, s])
    if fp16:
        n = g.op("Cast", [n], to=TensorProto.FLOAT16)
    y = g.op("Mul", ["norm.weight", n] if weight_first else [n, "norm.weight"])
    g.output(y, dtype=TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT)
    g.save()


# ---- GELU --------------------------------------------------------------------

def gelu_erf(name, scale="div", c=None, half="after", erf_reader=False):
    g = G(name)
    if scale == "div":
        u = g.op("Div", ["x", g.const(1.4142135 if c is None else c)])
    else:
        u = g.op("Mul", [g.const(0.70710678 if c is None else c), "x"])
    e = g.op("Erf", [u])
    a = g.op("Add", [e, g.const(1.0)])
    if half == "after":  # PyTorch: (x * (1 + erf)) * 0.5
        y = g.op("Mul", [g.op("Mul", ["x", a]), g.const(0.5)])
    elif half == "x":  # (x * 0.5) * (1 + erf)
        y = g.op("Mul", [g.op("Mul", ["x", g.const(0.5)]), a])
    else:  # x * ((1 + erf) * 0.5)
        y = g.op("Mul", ["x", g.op("Mul", [a, g.const(0.5)])])
    g.output(y)
    if erf_reader:
        g.output(e, "erf_out")
    g.save()


def gelu_tanh(name, cube="mul", c_cubic=0.044715):
    """F.gelu(approximate="tanh") as PyTorch 1.13 exports it."""
    g = G(name)
    if cube == "mul":
        c3 = g.op("Mul", ["x", g.op("Mul", ["x", "x"])])
    else:
        c3 = g.op("Pow", ["x", g.const(3.0)])
    k = g.op("Mul", [g.const(c_cubic), c3])
    u = g.op("Add", ["x", k])
    m = g.op("Mul", [g.const(0.7978846), u])
    t = g.op("Tanh", [m])
    a = g.op("Add", [g.const(1.0), t])
    y = g.op("Mul", [g.const(0.5), g.op("Mul", ["x", a])])
    g.output(y)
    g.save()


# ---- SiLU / SwiGLU --------------------------------------------------------------

def silu(name="normact_silu", extra_reader=False):
    g = G(name)
    s = g.op("Sigmoid", ["x"])
    y = g.op("Mul", [s, "x"])
    g.output(y)
    if extra_reader:
        g.output(s, "sig")
    g.save()


def swiglu(name, bias=False, same_input=True):
    """te.ops Linear gate/up (what lower_linear leaves), then silu(a) * b."""
    F = 6
    g = G(name)
    g.init("gate.weight", mat(F, H))
    g.init("up.weight", mat(F, H))
    g.init("down.weight", mat(H, F))
    xu = "x" if same_input else g.op("Tanh", ["x"])
    a = g.op("Linear", ["x", "gate.weight"], domain="te.ops")
    b = g.op("Linear", [xu, "up.weight"], domain="te.ops")
    if bias:
        g.init("gate.bias", (0.1 * RNG.standard_normal(F)).astype(np.float32))
        g.init("up.bias", (0.1 * RNG.standard_normal(F)).astype(np.float32))
        a = g.op("Bias", [a, "gate.bias"], domain="te.ops")
        b = g.op("Bias", [b, "up.bias"], domain="te.ops")
    s = g.op("Mul", [a, g.op("Sigmoid", [a])])
    y = g.op("Mul", [s, b])
    y = g.op("Linear", [y, "down.weight"], domain="te.ops")
    g.output(y)
    g.save()


# ---- residual ------------------------------------------------------------------

def residual(name="normact_residual"):
    """y1 = x + Linear(LayerNorm(x)); y = y1 + Linear(RMSNorm(y1)): two
    joins, and y1 forks into the second block and its residual."""
    g = G(name)
    g.init("ln.w", w1())
    g.init("ln.b", (0.1 * RNG.standard_normal(H)).astype(np.float32))
    g.init("fc1.weight", mat(H, H))
    g.init("rms.w", w1())
    g.init("fc2.weight", mat(H, H))
    h = g.op("LayerNorm", ["x", "ln.w", "ln.b"], domain="te.ops")
    h = g.op("Linear", [h, "fc1.weight"], domain="te.ops")
    y1 = g.op("Add", ["x", h])
    h = g.op("RMSNorm", [y1, "rms.w"], domain="te.ops")
    h = g.op("Linear", [h, "fc2.weight"], domain="te.ops")
    y = g.op("Add", [y1, h])
    g.output(y)
    g.save()


def residual_broadcast(name="normact_neg_residual_broadcast"):
    """Add of a te.ops output and a [8] graph input: broadcasting, not a residual."""
    g = G(name)
    g.inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [H]))
    g.init("fc.weight", mat(H, H))
    h = g.op("Linear", ["x", "fc.weight"], domain="te.ops")
    y = g.op("Add", [h, "r"])
    g.output(y)
    g.save()


def main():
    layernorm17()
    layernorm17("normact_neg_ln17_axis1", axis=1)
    layernorm_decomposed()
    layernorm_decomposed("normact_neg_ln_extra_reader", extra_reader=True)
    rmsnorm("normact_rms")
    rmsnorm("normact_rms_mul_recip", square="mul", inverse="recip", weight_first=True,
            eps_first=True)
    rmsnorm("normact_rms_div_cast", inverse="divx", cast=True)
    rmsnorm("normact_rms_fp16", fp16=True)
    rmsnorm("normact_neg_rms_pow4", exponent=4.0)
    rmsnorm("normact_neg_rms_axis1", axes=(1,))
    gelu_erf("normact_gelu_erf")
    gelu_erf("normact_gelu_erf_mul_halfx", scale="mul", half="x")
    gelu_erf("normact_gelu_erf_halfa", half="a")
    gelu_erf("normact_neg_gelu_erf_const", c=1.5)
    gelu_erf("normact_neg_gelu_erf_reader", erf_reader=True)
    gelu_tanh("normact_gelu_tanh")
    gelu_tanh("normact_gelu_tanh_pow", cube="pow")
    gelu_tanh("normact_neg_gelu_tanh_const", c_cubic=0.05)
    silu()
    silu("normact_neg_silu_reader", extra_reader=True)
    swiglu("normact_swiglu")
    swiglu("normact_swiglu_bias", bias=True)
    swiglu("normact_neg_swiglu_inputs", same_input=False)
    residual()
    residual_broadcast()


if __name__ == "__main__":
    main()
