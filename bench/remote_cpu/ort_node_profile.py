"""ONNX Runtime's time per graph node (CPU, all graph optimizations, sequential, T intra-op threads):
writes {"<node>|<op>": ms per run} as JSON, for compare_profiles.py beside `loom bench --profile`.
Usage: ort_node_profile.py MODEL THREADS OUT.json [RUNS]"""
import json, os, sys
import numpy as np
import onnxruntime as ort

path, threads, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 40
o = ort.SessionOptions()
o.intra_op_num_threads = threads
o.inter_op_num_threads = 1
o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
o.enable_profiling = True
o.profile_file_prefix = os.path.join(os.path.dirname(os.path.abspath(out)), "ortprof")
s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
feed = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
        for i in s.get_inputs()}
warm = 3
for _ in range(warm + runs):
    s.run(None, feed)
trace = s.end_profiling()
events = json.load(open(trace))
os.remove(trace)
per_node = {}
for e in events:  # warm-up runs are in the trace too: averaged over every run
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        key = e["name"][: -len("_kernel_time")] + "|" + e["args"]["op_name"]
        per_node[key] = per_node.get(key, 0.0) + e["dur"] / 1000.0 / (warm + runs)
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(per_node, f)
os.replace(tmp, out)
