#!/usr/bin/env node
// ort_bench.js - times one ONNX model on ONNX Runtime's CPU execution provider.
//
//   node ort_bench.js MODEL.onnx [--input NAME=FILE.npy]... [--dim NAME=VALUE]...
//                     [--iters N] [--warmup W] [--threads T] [--seed S]
//                     [--expected DIR]
//
// Inputs not given are filled with seeded random data of the declared dtype
// and shape (symbolic dims from --dim, else 1): floats uniform in [-1, 1),
// integers in [0, 10), bools alternating. With --expected DIR, each output is
// compared with DIR/<output>.npy and its relative L2 error is reported.
// Prints one JSON object on stdout: min/median/max/mean milliseconds per run.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

function usage(msg) {
  process.stderr.write(`ort_bench.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const a = { inputs: {}, dims: {}, iters: 20, warmup: 3, threads: 2, seed: 1, expected: null };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      return argv[++i];
    };
    const pair = (v) => {
      const eq = v.indexOf('=');
      if (eq <= 0) usage(`${k} wants NAME=VALUE, got '${v}'`);
      return [v.slice(0, eq), v.slice(eq + 1)];
    };
    if (k === '--input') { const [n, f] = pair(next()); a.inputs[n] = f; }
    else if (k === '--dim') { const [n, v] = pair(next()); a.dims[n] = parseInt(v, 10); }
    else if (k === '--iters') a.iters = parseInt(next(), 10);
    else if (k === '--warmup') a.warmup = parseInt(next(), 10);
    else if (k === '--threads') a.threads = parseInt(next(), 10);
    else if (k === '--seed') a.seed = parseInt(next(), 10);
    else if (k === '--expected') a.expected = next();
    else if (k.startsWith('--')) usage(`unknown option ${k}`);
    else rest.push(k);
  }
  if (rest.length !== 1) usage('exactly one MODEL.onnx expected');
  if (!(a.iters >= 1)) usage('--iters must be >= 1');
  a.model = rest[0];
  return a;
}

// --- .npy (the subset NumPy writes for numeric C-order arrays) -------------
const NPY_TYPES = {
  f4: ['float32', Float32Array], f8: ['float64', Float64Array], f2: ['float16', Uint16Array],
  i1: ['int8', Int8Array], i2: ['int16', Int16Array], i4: ['int32', Int32Array],
  i8: ['int64', BigInt64Array], u1: ['uint8', Uint8Array], u2: ['uint16', Uint16Array],
  u4: ['uint32', Uint32Array], u8: ['uint64', BigUint64Array], b1: ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not .npy`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([<>|=]?)([a-z])(\d+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape) throw new Error(`${file}: cannot parse header ${header}`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  if (descr[1] === '>') throw new Error(`${file}: big-endian data`);
  const t = NPY_TYPES[descr[2] + descr[3]];
  if (!t) throw new Error(`${file}: dtype ${descr[2]}${descr[3]} not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const data = buf.subarray(start + hlen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  const arr = new t[1](copy.buffer, 0, data.length / t[1].BYTES_PER_ELEMENT);
  return { type: t[0], dims, data: t[0] === 'bool' ? Uint8Array.from(arr, (v) => v !== 0) : arr };
}

// mulberry32: a small seeded generator, so ORT's and teexec's random inputs
// are reproducible run to run (they need not be identical to each other).
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomTensor(meta, dimsByName, rand) {
  const dims = meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : dimsByName[d] || 1));
  const n = dims.reduce((p, d) => p * d, 1);
  let data;
  switch (meta.type) {
    case 'float32': data = Float32Array.from({ length: n }, () => rand() * 2 - 1); break;
    case 'float64': data = Float64Array.from({ length: n }, () => rand() * 2 - 1); break;
    case 'int64': data = BigInt64Array.from({ length: n }, () => BigInt(Math.floor(rand() * 10))); break;
    case 'int32': data = Int32Array.from({ length: n }, () => Math.floor(rand() * 10)); break;
    case 'bool': data = Uint8Array.from({ length: n }, (_, i) => i % 2); break;
    default: throw new Error(`input ${meta.name}: random ${meta.type} not supported; pass --input`);
  }
  return { tensor: new ort.Tensor(meta.type, data, dims), dims };
}

function relL2(got, want) {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Number(got[i]) - Number(want[i]);
    num += d * d;
    den += Number(want[i]) * Number(want[i]);
  }
  return Math.sqrt(num / (den > 0 ? den : 1));
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const rand = rng(a.seed);
  const feeds = {};
  const inputs = {};
  for (const meta of session.inputMetadata) {
    if (a.inputs[meta.name]) {
      const npy = readNpy(a.inputs[meta.name]);
      feeds[meta.name] = new ort.Tensor(npy.type, npy.data, npy.dims);
      inputs[meta.name] = { source: a.inputs[meta.name], dims: npy.dims };
    } else {
      const r = randomTensor(meta, a.dims, rand);
      feeds[meta.name] = r.tensor;
      inputs[meta.name] = { source: `random(seed ${a.seed})`, dims: r.dims };
    }
  }
  for (const n of Object.keys(a.inputs))
    if (!session.inputNames.includes(n)) usage(`the model has no input '${n}'`);

  let outputs;
  for (let i = 0; i < a.warmup; i++) outputs = await session.run(feeds);
  const times = [];
  for (let i = 0; i < a.iters; i++) {
    const t0 = process.hrtime.bigint();
    outputs = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((x, y) => x - y);
  const mid = times.length >> 1;
  const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  const result = {
    engine: 'onnxruntime-node',
    version: ort.env.versions.common,
    execution_provider: 'cpu',
    model: a.model,
    intra_op_threads: a.threads,
    warmup: a.warmup,
    iters: a.iters,
    inputs,
    min_ms: times[0],
    median_ms: median,
    max_ms: times[times.length - 1],
    mean_ms: times.reduce((p, t) => p + t, 0) / times.length,
    cpu: os.cpus()[0] ? os.cpus()[0].model : 'unknown',
    nproc: os.cpus().length,
  };
  if (a.expected) {
    result.rel_l2 = {};
    for (const name of session.outputNames) {
      const want = readNpy(path.join(a.expected, `${name}.npy`));
      result.rel_l2[name] = relL2(outputs[name].data, want.data);
    }
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_bench.js: ${e.message}\n`);
  process.exit(1);
});
