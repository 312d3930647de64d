// Times generate.cpp's kernels on 512x512 elements, one thread, in turns (41 rounds, median and
// min per call), each input set of h and y (1 MiB each) one of 8 rotating ones so that they come
// from beyond L2 as the step's saved values do, the GEMM tile (mm) from L1; first checks each
// against the double formula.
#include "HalideBuffer.h"
#include "ep_cur.h"
#include "ep_new.h"
#include "ep_newrcp.h"
#include "fwd_erf.h"
#include "fwd_rcp.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>
using Halide::Runtime::Buffer;
int main() {
  const int N = 512 * 512, SETS = 8;
  Buffer<float> mm(16384), bias(512), out(N);
  std::vector<Buffer<float>> h, y;
  for (int i = 0; i < 16384; i++) mm(i) = std::sin(i * 0.37f);
  for (int i = 0; i < 512; i++) bias(i) = 0.01f * (i % 7);
  for (int s = 0; s < SETS; s++) {
    h.emplace_back(N); y.emplace_back(N);
    for (int i = 0; i < N; i++) { float v = 3 * std::cos(i * 0.11f + s); h[s](i) = v; float hv = v + bias(i % 512);
      y[s](i) = 0.5f * hv * (1 + std::erf(hv / std::sqrt(2.f))); }
  }
  const int V = 5;
  const char *names[V] = {"bwd cur (erf)", "bwd new (y/x)", "bwd new, y*rcp", "fwd gelu (erf p/q)", "fwd gelu (p*rcp(q))"};
  auto call = [&](int v, int s) {
    switch (v) {
      case 0: return ep_cur(mm, h[s], bias, out);
      case 1: return ep_new(mm, h[s], y[s], bias, out);
      case 2: return ep_newrcp(mm, h[s], y[s], bias, out);
      case 3: return fwd_erf(h[s], bias, out);
      default: return fwd_rcp(h[s], bias, out);
    }
  };
  for (int v = 0; v < V; v++) {
    if (call(v, 0)) { printf("error in %s\n", names[v]); return 1; }
    double worst = 0, wrel = 0;
    for (int i = 0; i < N; i++) { double hv = (double)h[0](i) + bias(i % 512), d = mm(i % 16384), want;
      if (v < 3) want = d * (0.5 * (1 + std::erf(hv / std::sqrt(2.0))) + hv * std::exp(-0.5 * hv * hv) / std::sqrt(2 * M_PI));
      else want = 0.5 * hv * (1 + std::erf(hv / std::sqrt(2.0)));
      double e = std::fabs(out(i) - want); worst = std::max(worst, e); wrel = std::max(wrel, e / std::max(1e-3, std::fabs(want))); }
    printf("%-22s max abs error %.3g, rel (|want| > 1e-3) %.3g\n", names[v], worst, wrel);
  }
  std::vector<double> t[V];
  for (int r = 0; r < 41; r++) for (int v = 0; v < V; v++) {
    auto a = std::chrono::steady_clock::now();
    for (int s = 0; s < SETS; s++) call(v, s);
    auto b = std::chrono::steady_clock::now();
    t[v].push_back(std::chrono::duration<double, std::micro>(b - a).count() / SETS);
  }
  for (int v = 0; v < V; v++) { std::sort(t[v].begin(), t[v].end());
    printf("%-22s median %7.1f us  min %7.1f us  per 512x512\n", names[v], t[v][20], t[v][0]); }
}
