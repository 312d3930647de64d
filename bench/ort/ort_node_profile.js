#!/usr/bin/env node
// ONNX Runtime's time per graph node on this machine (onnxruntime-node, CPU, all graph
// optimizations, sequential, THREADS intra-op threads): writes {"<node>|<op>": ms per run} as JSON,
// the format of bench/remote_cpu/ort_node_profile.py, for bench/remote_cpu/compare_profiles.py
// beside `loom bench MODEL --auto --profile`.
//
// Usage: node bench/ort/ort_node_profile.js ORT_DIR MODEL.onnx THREADS OUT.json [RUNS]
//   ORT_DIR: the folder scripts/install_deps.sh installed onnxruntime-node into (.deps/ort).
// Inputs are seeded random values of each input's declared shape (symbolic dims as 1); integer
// inputs (token ids) are drawn in [0, 100).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

async function main() {
  const [ortDir, model, threadsArg, out, runsArg] = process.argv.slice(2);
  if (!ortDir || !model || !threadsArg || !out) {
    console.error('usage: node ort_node_profile.js ORT_DIR MODEL.onnx THREADS OUT.json [RUNS]');
    process.exit(2);
  }
  const ort = require(path.join(path.resolve(ortDir), 'node_modules', 'onnxruntime-node'));
  const runs = parseInt(runsArg || '40', 10), warm = 3;
  const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ortprof-')), 'trace');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: parseInt(threadsArg, 10), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: prefix});
  let seed = 1;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const feeds = {};
  for (const meta of session.inputMetadata) {
    const dims = meta.shape.map(d => (typeof d === 'number' && d > 0 ? d : 1));
    const n = dims.reduce((a, b) => a * b, 1);
    if (meta.type === 'int64') feeds[meta.name] = new ort.Tensor('int64', BigInt64Array.from({length: n}, () => BigInt(Math.floor(random() * 100))), dims);
    else if (meta.type === 'int32') feeds[meta.name] = new ort.Tensor('int32', Int32Array.from({length: n}, () => Math.floor(random() * 100)), dims);
    else feeds[meta.name] = new ort.Tensor('float32', Float32Array.from({length: n}, () => random() * 2 - 1), dims);
  }
  for (let k = 0; k < warm + runs; k++) await session.run(feeds);
  session.endProfiling();
  await session.release();
  const dir = path.dirname(prefix);
  const trace = fs.readdirSync(dir).map(f => path.join(dir, f)).find(f => f.endsWith('.json'));
  const events = JSON.parse(fs.readFileSync(trace, 'utf8'));
  fs.rmSync(dir, {recursive: true, force: true});
  const perNode = {};  // the warm-up runs are in the trace too: averaged over every run
  for (const e of events)
    if (e.cat === 'Node' && e.name.endsWith('_kernel_time')) {
      const key = e.name.slice(0, -'_kernel_time'.length) + '|' + e.args.op_name;
      perNode[key] = (perNode[key] || 0) + e.dur / 1000 / (warm + runs);
    }
  const tmp = out + '.tmp.' + process.pid;
  fs.writeFileSync(tmp, JSON.stringify(perNode, null, 1));
  fs.renameSync(tmp, out);
  const total = Object.values(perNode).reduce((a, b) => a + b, 0);
  console.log(`${Object.keys(perNode).length} nodes, ${total.toFixed(3)} ms per run in nodes -> ${out}`);
}

main().catch(e => { console.error('error: ' + (e && e.message ? e.message : e)); process.exit(1); });
