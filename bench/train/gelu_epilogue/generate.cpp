// The GELU-gradient epilogue of a training step as Halide lowers it, before D159 (the decomposed
// rules: erf and its exp recomputed from x) and after (Φ = y / x from the saved output, φ's exp),
// plus y·rcp(x) and the forward GELU with p·rcp(q): compiled ahead of time for AVX-512 into static
// libraries that time_epilogue.cpp times on the Xeon (bench/DECISIONS.md#d159-exact-gelu-gradient-reads-its-output).
// build (here): g++ -std=c++17 -I/usr/include/halide14 generate.cpp -o generate -lHalide14 -lpthread -ldl && ./generate
//   g++ -O2 -std=c++17 -I/usr/include/halide14 -I. time_epilogue.cpp ep_cur.a ep_new.a ep_newrcp.a fwd_erf.a fwd_rcp.a \
//       -o ep_bench -lpthread -ldl        (run there: taskset -c 2 ./ep_bench)
#include "Halide.h"
#include <cmath>
using namespace Halide;
// 1 / q from the AVX-512 reciprocal estimate (14 bits) and one Newton step (about 2^-27).
Expr refined_inverse(Expr q) { Expr r = fast_inverse(q); return r * (2.0f - q * r); }
// Halide's erf rational approximation, p / q, with the division or (rcp) the refined reciprocal.
Expr erf_ratio(Expr x_in, bool rcp) {
    Expr x = clamp(x_in, -4.0f, 4.0f); Expr x2 = x * x;
    Expr p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f; p = x2 * p + -5.69250639462346e-05f; p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f; p = x2 * p + -1.60960333262415e-02f; p = x * p;
    Expr q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f; q = x2 * q + -7.37332916720468e-03f; q = x2 * q + -1.42647390514189e-02f;
    return rcp ? p * refined_inverse(q) : p / q;
}
Expr erf_approx(Expr x) { return erf_ratio(x, false); }
Expr erf_rcp(Expr x) { return erf_ratio(x, true); }
int main(){
  ImageParam mm(Float(32),1,"mm"), hb(Float(32),1,"hb"), yb(Float(32),1,"yb"), bias(Float(32),1,"bias");
  Var x;
  Target t("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
  Expr h = hb(x) + bias(x % 512), dm = mm(x % 16384);   // h: the saved product plus bias; dm: the GEMM tile (L1/L2)
  Expr dmul = dm*0.5f; Expr u = h*(float)M_SQRT1_2; Expr erfv = erf_approx(u);
  Expr cur = dmul*(erfv+1.0f) + (dmul*h)*(exp(-(u*u))*(float)(2/std::sqrt(M_PI)))*(float)M_SQRT1_2;
  Expr phi = select(abs(h) < 1e-20f, 0.5f, yb(x)/h);
  Expr nw = dm*(phi + h*exp(h*h*-0.5f)*(float)(1/std::sqrt(2*M_PI)));
  Expr phir = select(abs(h) < 1e-20f, 0.5f, yb(x) * refined_inverse(h));
  Expr nwr = dm*(phir + h*exp(h*h*-0.5f)*(float)(1/std::sqrt(2*M_PI)));
  Expr fwd = (h * (erf_approx(h*(float)M_SQRT1_2) + 1.0f)) * 0.5f;
  Expr fwdr = (h * (erf_rcp(h*(float)M_SQRT1_2) + 1.0f)) * 0.5f;
  Target nr = t.with_feature(Target::NoRuntime);
  { Func k("ep_newrcp"); k(x) = nwr; k.vectorize(x,16); k.compile_to_static_library("ep_newrcp", {mm,hb,yb,bias}, "ep_newrcp", nr); }
  { Func k("fwd_erf"); k(x) = fwd; k.vectorize(x,16); k.compile_to_static_library("fwd_erf", {hb,bias}, "fwd_erf", nr); }
  { Func k("fwd_rcp"); k(x) = fwdr; k.vectorize(x,16); k.compile_to_static_library("fwd_rcp", {hb,bias}, "fwd_rcp", nr); }
  Func f("ep_cur"); f(x) = cur; f.vectorize(x,16); f.compile_to_static_library("ep_cur", {mm,hb,bias}, "ep_cur", t);
  Func g("ep_new"); g(x) = nw; g.vectorize(x,16); g.compile_to_static_library("ep_new", {mm,hb,yb,bias}, "ep_new", t.with_feature(Target::NoRuntime));
}
