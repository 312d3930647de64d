#!/usr/bin/env node
// ONNX Runtime's row of `loom bench --ort`: a worker process that speaks the protocol of
// src/measure/peer_worker.h over the socket on file descriptor 3, so that ORT is timed in turns
// with Loom's rows, on the same input sets and with the same thread count.
//
// Started by `loom bench` as:
//   node ort_worker.js --ort-dir DIR --model M.onnx --inputs-dir D --outputs-dir O --threads N
//                      --warmup W [--trivial-model T.onnx]
// D holds the input sets (D/<set>/names.txt + <k>.npy, written by Loom); the worker runs set 0,
// writes every output to O (names.txt + <k>.npy) and says `outputs O`, and the parent checks them
// against its reference interpreter like any other row. With --trivial-model it first measures
// ORT's per-call overhead (node + binding + session.run) on that one-op model: `overhead <ms>`.
'use strict';
const fs = require('fs');
const net = require('net');
const path = require('path');

function parseArgs(argv) {
  const a = {threads: 1, warmup: 2};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (!k.startsWith('--') || v === undefined) throw new Error(`bad argument ${k}`);
    a[k.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = v;
  }
  for (const k of ['ortDir', 'model', 'inputsDir', 'outputsDir'])
    if (!a[k]) throw new Error(`missing --${k.replace(/[A-Z]/g, c => '-' + c.toLowerCase())}`);
  a.threads = parseInt(a.threads, 10);
  a.warmup = parseInt(a.warmup, 10);
  return a;
}

// A protocol field: '%', whitespace and control characters as %XX; empty as a lone '%'.
function escapeField(s) {
  if (s === '') return '%';
  let o = '';
  for (const ch of Buffer.from(String(s), 'utf8')) {
    if (ch === 0x25 || ch <= 0x20 || ch === 0x7f) o += '%' + ch.toString(16).toUpperCase().padStart(2, '0');
    else o += String.fromCharCode(ch);
  }
  return Buffer.from(o, 'latin1').toString('utf8');
}

function unescapeField(s) {
  return s === '%' ? '' : decodeURIComponent(s);
}

// .npy dtype <-> ORT tensor type and typed array.
const NPY = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array],
  '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};
const NPY_OF_ORT = {};
for (const [descr, [type]] of Object.entries(NPY)) NPY_OF_ORT[type] = descr;

function readNpy(ort, file) {
  const b = fs.readFileSync(file);
  if (b.slice(0, 6).toString('latin1') !== '\x93NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.slice(start, start + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || !NPY[descr[1]] || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: unsupported .npy header ${header.trim()}`);
  const [type, Arr] = NPY[descr[1]];
  const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length).map(Number);
  const data = b.slice(start + hlen);
  // A copy: typed arrays need their element alignment, which a Buffer's offset does not promise.
  const bytes = new Uint8Array(data.length);
  bytes.set(data);
  let arr = new Arr(bytes.buffer, 0, data.length / Arr.BYTES_PER_ELEMENT);
  if (type === 'bool') arr = Uint8Array.from(arr);  // ORT takes bool tensors as Uint8Array
  return new ort.Tensor(type, arr, dims);
}

function writeNpy(file, tensor) {
  const descr = NPY_OF_ORT[tensor.type];
  if (!descr) throw new Error(`output of type ${tensor.type}: Loom's .npy reader does not take it`);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - total % 64) % 64) + '\n';
  const pre = Buffer.alloc(10);
  Buffer.from('\x93NUMPY', 'latin1').copy(pre, 0);
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  const tmp = `${file}.tmp${process.pid}`;
  fs.writeFileSync(tmp, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
  fs.renameSync(tmp, file);
}

function readSet(ort, dir) {
  const names = fs.readFileSync(path.join(dir, 'names.txt'), 'utf8').split('\n').filter(s => s.length);
  const feeds = {};
  names.forEach((n, k) => { feeds[unescapeField(n)] = readNpy(ort, path.join(dir, `${k}.npy`)); });
  return feeds;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const channel = new net.Socket({fd: 3, readable: true, writable: true});
  const send = line => new Promise(res => channel.write(line + '\n', () => res()));
  const lines = [];
  let wake = null, closed = false, buffer = '';
  channel.on('data', chunk => {
    buffer += chunk.toString('utf8');
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) { lines.push(buffer.slice(0, nl)); buffer = buffer.slice(nl + 1); }
    if (wake) { wake(); wake = null; }
  });
  const end = () => { closed = true; if (wake) { wake(); wake = null; } };
  channel.on('end', end);
  channel.on('close', end);
  channel.on('error', end);
  const nextLine = async () => {
    while (!lines.length && !closed) await new Promise(res => { wake = res; });
    return lines.length ? lines.shift() : null;
  };

  let stage = 'schedule';
  const fail = async (e) => {
    const oom = /memory|allocat/i.test(String(e && e.message));
    await send(`fail ${escapeField(stage)} ${oom ? 'out_of_memory' : 'error'} ${escapeField(String(e && e.message || e))}`);
    channel.end();
  };
  let a, ort, session, sets = [], names = [];
  try {
    a = parseArgs(process.argv.slice(2));
    try {
      ort = require(path.join(a.ortDir, 'node_modules', 'onnxruntime-node'));
    } catch (e) {
      throw new Error(`cannot load onnxruntime-node from ${a.ortDir}/node_modules (${e.message.split('\n')[0]}); ` +
                      'run scripts/install_deps.sh, which installs it there, or set LOOM_ORT_DIR');
    }
    const version = require(path.join(a.ortDir, 'node_modules', 'onnxruntime-node', 'package.json')).version;
    const options = {intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
                     graphOptimizationLevel: 'all'};
    let overhead = null;
    if (a.trivialModel) {
      const t = await ort.InferenceSession.create(a.trivialModel, options);
      const x = new ort.Tensor('float32', new Float32Array(1), [1]);
      const times = [];
      for (let k = 0; k < 300; k++) {
        const t0 = nowMs();
        await t.run({[t.inputNames[0]]: x});
        if (k >= 50) times.push(nowMs() - t0);
      }
      overhead = median(times);
      await send(`overhead ${overhead}`);
    }
    stage = 'compile';
    await send(`stage ${stage}`);
    await send(`progress ${escapeField(`creating an ONNX Runtime ${version} session (${a.threads} intra-op threads)`)}`);
    const t0 = nowMs();
    session = await ort.InferenceSession.create(a.model, options);
    const compileS = (nowMs() - t0) / 1e3;
    for (const d of fs.readdirSync(a.inputsDir).filter(d => /^\d+$/.test(d)).sort((x, y) => x - y))
      sets.push(readSet(ort, path.join(a.inputsDir, d)));
    if (!sets.length) throw new Error(`no input sets in ${a.inputsDir}`);
    names = session.outputNames;

    stage = 'validate';
    await send(`stage ${stage}`);
    const out = await session.run(sets[0]);
    fs.mkdirSync(a.outputsDir, {recursive: true});
    names.forEach((n, k) => writeNpy(path.join(a.outputsDir, `${k}.npy`), out[n]));
    fs.writeFileSync(path.join(a.outputsDir, 'names.txt'), names.map(escapeField).join('\n') + '\n');
    await send(`outputs ${escapeField(a.outputsDir)}`);
    stage = 'run';
    for (let k = 0; k < a.warmup; k++) await session.run(sets[(k + 1) % sets.length]);
    const text = `onnxruntime-node ${version} (CPU), intraOpNumThreads ${a.threads}, interOpNumThreads 1, ` +
                 'graphOptimizationLevel all' + (overhead === null ? '' : `; per-call overhead ${overhead.toFixed(4)} ms`);
    await send(`ready 0 ${compileS} 0 0 0 ${escapeField(text)}`);
  } catch (e) {
    await fail(e);
    return 0;
  }

  for (;;) {
    const line = await nextLine();
    if (line === null) break;
    const f = line.split(' ').filter(s => s.length);
    if (!f.length) continue;
    if (f[0] === 'quit') break;
    try {
      if (f[0] === 'time' && f.length === 6) {
        let next = parseInt(f[1], 10) % sets.length;
        const budget = Number(f[2]), atLeast = parseInt(f[3], 10), atMost = parseInt(f[4], 10);
        for (let k = 0; k < parseInt(f[5], 10); k++) await session.run(sets[(next + sets.length - 1) % sets.length]);
        const times = [];
        const tb = nowMs();
        while (times.length < atMost && (times.length < atLeast || nowMs() - tb < budget)) {
          const t0 = nowMs();
          await session.run(sets[next]);
          times.push(nowMs() - t0);
          next = (next + 1) % sets.length;
        }
        await send(`times ${times.length} ${times.join(' ')}`);
      } else if (f[0] === 'profile') {
        await send(`profile_error ${escapeField('ONNX Runtime rows are not profiled by Loom')}`);
        break;
      } else {
        await send(`error ${escapeField('unknown request: ' + line)}`);
        break;
      }
    } catch (e) {
      await send(`error ${escapeField(String(e && e.message || e))}`);
      break;
    }
  }
  channel.end();
  return 0;
}

main().then(rc => process.exit(rc), e => { process.stderr.write(`ort_worker: ${e.stack || e}\n`); process.exit(2); });
