"""Median ms of ONNX Runtime (CPU, all graph optimizations, sequential) on a model at T intra-op threads."""
import sys, time, json, numpy as np, onnxruntime as ort
path, T = sys.argv[1], int(sys.argv[2])
o = ort.SessionOptions()
o.intra_op_num_threads = T; o.inter_op_num_threads = 1
o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
feed = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    if "int" in i.type: feed[i.name] = rng.integers(0, 100, shape).astype(np.int64)
    else: feed[i.name] = rng.standard_normal(shape).astype(np.float32)
for _ in range(3): s.run(None, feed)
budget, ts, t0 = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0, [], time.perf_counter()
while time.perf_counter() - t0 < budget or len(ts) < 10:
    a = time.perf_counter(); s.run(None, feed); ts.append((time.perf_counter() - a) * 1e3)
print(json.dumps({"model": path, "threads": T, "ort_ms": float(np.median(ts)), "runs": len(ts), "ort": ort.__version__}))
