// bfloat16 as a storage dtype: rounding against an independent reference, the
// vector and portable conversion paths, promotion, conversions to and from
// every dtype, creation, views, printing, and the refusal of arithmetic.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits_of_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The value of bfloat16 bits (not a NaN), decoded from its fields in double.
double decode(uint16_t b) {
  const int exponent = (b >> 7) & 0xff, mantissa = b & 0x7f;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0xff) return sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);  // denormal: 0.m x 2^-126
  return sign * std::ldexp(128 + mantissa, exponent - 134);     // 1.m x 2^(e - 127)
}

bool is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// Round to nearest, ties to even, by distances computed in double: the two
// bfloat16 magnitudes around |f| are its truncation t and t + 1 (t + 1 past
// the largest finite one is infinity, at distance 2^128 as RNE's overflow
// threshold says); the nearer wins, a tie goes to the even mantissa.
uint16_t reference_rne(float f) {
  const uint32_t u = bits_of_float(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isinf(f)) return sign | 0x7f80;
  const uint16_t below = static_cast<uint16_t>((u >> 16) & 0x7fff), above = static_cast<uint16_t>(below + 1);
  const double x = std::fabs(static_cast<double>(f));
  const double lo = decode(below), hi = above == 0x7f80 ? 0x1p128 : decode(above);
  const double d_lo = x - lo, d_hi = hi - x;  // exact: each is a float32 difference of nearby values
  uint16_t magnitude;
  if (d_lo < d_hi) magnitude = below;
  else if (d_hi < d_lo) magnitude = above;
  else magnitude = (below & 1) ? above : below;
  return sign | magnitude;
}

// Float patterns: every high half with the low halves that matter for
// rounding (exact, just below, at and above a tie, the largest), plus a
// sweep over all 2^32 patterns with a stride prime to 2.
std::vector<float> float_patterns() {
  std::vector<float> out;
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  for (uint32_t high = 0; high < 0x10000; ++high)
    for (uint32_t low : lows) out.push_back(float_of_bits(high << 16 | low));
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) out.push_back(float_of_bits(static_cast<uint32_t>(u)));
  return out;
}

void check_nan_result(float f, uint16_t got) {
  CHECK(is_nan_bits(got));
  CHECK((got & 0x8000) == ((bits_of_float(f) >> 16) & 0x8000));  // the sign stays
  CHECK((got & 0x0040) != 0);                                      // quiet
  CHECK((got & 0x003f) == ((bits_of_float(f) >> 16) & 0x003f));    // the top payload bits stay
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BFloat16);
  const Tensor c = t.contiguous();
  std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size() * 2);
  return out;
}

Tensor bf16_from_bits(const std::vector<uint16_t>& bits, const Dims& shape) { return from_blob(bits.data(), shape, DType::BFloat16); }

const std::string kRefusal = ": not defined for dtype bfloat16 (convert with to(float32))";

}  // namespace

TEST_CASE("bf16: float -> bf16 rounds to nearest even, as an independent reference does") {
  for (float f : float_patterns()) {
    const uint16_t got = bf16_bits_from_float(f);
    if (std::isnan(f)) {
      check_nan_result(f, got);
    } else if (got != reference_rne(f)) {
      FAIL_CHECK("float bits 0x" << std::hex << bits_of_float(f) << " gave 0x" << got << ", reference 0x" << reference_rne(f));
    }
  }
  // The named cases.
  CHECK(bf16_bits_from_float(1.0f + 0x1p-8f) == 0x3f80);           // a tie goes to the even 1.0
  CHECK(bf16_bits_from_float(1.0f + 3 * 0x1p-8f) == 0x3f82);       // ... and to the even 1 + 2^-6
  CHECK(bf16_bits_from_float(1.0f + 0x1p-8f + 0x1p-23f) == 0x3f81);  // just past the tie: up
  CHECK(bf16_bits_from_float(0.0f) == 0x0000);
  CHECK(bf16_bits_from_float(-0.0f) == 0x8000);
  CHECK(bf16_bits_from_float(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(bf16_bits_from_float(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(bf16_bits_from_float(std::numeric_limits<float>::max()) == 0x7f80);      // past bf16's largest + half an ulp
  CHECK(bf16_bits_from_float(float_of_bits(0x7f7f7fff)) == 0x7f7f);            // just below that: the largest
  CHECK(bf16_bits_from_float(float_of_bits(0x7f7f8000)) == 0x7f80);            // the tie from the odd largest: inf
  CHECK(bf16_bits_from_float(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(bf16_bits_from_float(float_of_bits(0x00018000)) == 0x0002);            // a denormal tie, kept (no flush to zero)
  CHECK(bf16_bits_from_float(float_of_bits(0x807fffff)) == 0x8080);            // the largest denormal rounds to -2^-126
  CHECK(bf16_bits_from_float(float_of_bits(0x7f800001)) == 0x7fc0);            // payload in the low half: still a NaN
  CHECK(bf16_bits_from_float(float_of_bits(0xffc00000)) == 0xffc0);            // a negative quiet NaN
}

TEST_CASE("bf16: all 65,536 values convert to float exactly and back unchanged") {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = float_from_bf16_bits(bits);
    if (is_nan_bits(bits)) {
      CHECK(std::isnan(f));
      CHECK(bf16_bits_from_float(f) == (bits | 0x0040));  // made quiet, sign and payload kept
    } else {
      if (static_cast<double>(f) != decode(bits)) FAIL_CHECK("bits 0x" << std::hex << b << " gave " << f);
      if (bf16_bits_from_float(f) != bits) FAIL_CHECK("bits 0x" << std::hex << b << " did not round-trip");
    }
  }
}

TEST_CASE("bf16: the bulk paths give the bits of the scalar conversion") {
  std::vector<float> src = float_patterns();
  // Blocks of 32 normal numbers with one denormal in them: vcvtne2ps2bf16
  // would flush it to zero, the bulk path must not.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> normal(-4.0f, 4.0f);
  for (int block = 0; block < 64; ++block) {
    for (int i = 0; i < 32; ++i) src.push_back(i == block % 32 ? float_of_bits(0x00018000 | (block << 8)) : normal(rng));
  }
  for (size_t n : {src.size(), src.size() - 1, size_t{31}, size_t{33}, size_t{0}}) {  // tails of every length mod 32
    std::vector<bf16> expected(n), got(n);
    for (size_t i = 0; i < n; ++i) expected[i].bits = bf16_bits_from_float(src[i]);
    auto same = [&](const char* path) {
      const bool equal = n == 0 || std::memcmp(expected.data(), got.data(), n * sizeof(bf16)) == 0;
      CHECK_MESSAGE(equal, std::string(path), " differs from bf16_bits_from_float on ", n, " values");
    };
    float_to_bf16(src.data(), got.data(), n);
    same("float_to_bf16");
    bf16_paths::portable(src.data(), got.data(), n);
    same("the portable path");
    if (bf16_paths::have_avx512bf16()) {
      bf16_paths::avx512bf16(src.data(), got.data(), n);
      same("the AVX512-BF16 path");
    }
    std::vector<float> back(n);
    bf16_to_float(expected.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float f = float_from_bf16_bits(expected[i].bits);
      if (std::memcmp(&back[i], &f, 4) != 0) FAIL_CHECK("bf16_to_float differs at " << i);
    }
  }
  if (!bf16_paths::have_avx512bf16()) MESSAGE("this CPU has no AVX512-BF16: only the portable path was compared");
}

TEST_CASE("bf16: promotion as PyTorch's") {
  const DType B = DType::BFloat16;
  CHECK(promote(B, B) == B);
  CHECK(promote(B, DType::Bool) == B);
  CHECK(promote(DType::Int64, B) == B);
  CHECK(promote(B, DType::Float32) == DType::Float32);
  CHECK(promote(DType::Float32, B) == DType::Float32);
  CHECK(promote(B, DType::Float64) == DType::Float64);
  CHECK(promote(B, DType::Complex64) == DType::Complex64);
  CHECK(promote(DType::Complex128, B) == DType::Complex128);
  // The others kept their order after bfloat16 was appended to the enum.
  CHECK(promote(DType::Int64, DType::Float32) == DType::Float32);
  CHECK(promote(DType::Float64, DType::Complex64) == DType::Complex128);
  CHECK(itemsize(B) == 2);
  CHECK(std::string(dtype_name(B)) == "bfloat16");
  CHECK(static_cast<int>(B) == 6);  // appended: the existing values keep their numbers
}

TEST_CASE("bf16: to() from every dtype and back") {
  // Values bfloat16 holds exactly come back unchanged from every dtype.
  const std::vector<double> exact = {0, 1, -2.5, 3.140625, 256, -1024, 0.0078125};
  for (DType d : {DType::Int64, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
    CAPTURE(d);
    std::vector<double> values = exact;
    if (d == DType::Int64) values = {0, 1, -2, 3, 256, -1024, 7};
    const Tensor x = from_vector(values).to(d);
    const Tensor b = x.to(DType::BFloat16);
    CHECK(b.dtype() == DType::BFloat16);
    CHECK(b.to_vector<double>() == values);
    const Tensor back = b.to(d);
    CHECK(back.dtype() == d);
    CHECK(back.to_vector<double>() == values);
  }
  CHECK(from_vector<bool>({true, false}).to(DType::BFloat16).to_vector<float>() == std::vector<float>{1, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(from_vector<float>({0, -0.0f, 0.5f, nan}).to(DType::BFloat16).to(DType::Bool).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true});
  // Rounding: ties to even from int64 and float32.
  CHECK(from_vector<int>({257, 259}).to(DType::BFloat16).to_vector<double>() == std::vector<double>{256, 260});
  // float64 converts through float32, as PyTorch's c10::BFloat16 does: 1 + 2^-8 + 2^-30 first
  // becomes the float32 tie 1 + 2^-8, then 1.0 (a direct rounding would give 1 + 2^-7).
  CHECK(from_vector<double>({1 + 0x1p-8 + 0x1p-30}).to(DType::BFloat16).item<double>() == 1.0);
  // complex -> bfloat16 keeps the real part, as complex -> float32 does.
  CHECK(from_vector<c64>({c64(1.5f, 2.0f)}).to(DType::BFloat16).item<float>() == 1.5f);
  // A strided (transposed) source and a large one (threaded, bulk path) give the scalar conversion's bits.
  const Tensor r = randn({300, 257});
  for (const Tensor& src : {r, r.transpose(0, 1)}) {
    const std::vector<float> f = src.to_vector<float>();
    const std::vector<uint16_t> got = bits_of(src.to(DType::BFloat16));
    REQUIRE(got.size() == f.size());
    size_t wrong = 0;
    for (size_t i = 0; i < f.size(); ++i) wrong += got[i] != bf16_bits_from_float(f[i]);
    CHECK(wrong == 0);
    const std::vector<float> round_trip = src.to(DType::BFloat16).to(DType::Float32).to_vector<float>();
    size_t inexact = 0;
    for (size_t i = 0; i < f.size(); ++i) inexact += round_trip[i] != float_from_bf16_bits(got[i]);
    CHECK(inexact == 0);
  }
}

TEST_CASE("bf16: creation, views, copies and printing") {
  CHECK(bits_of(full({3}, 1.5, DType::BFloat16)) == std::vector<uint16_t>{0x3fc0, 0x3fc0, 0x3fc0});
  CHECK(bits_of(zeros({2}, DType::BFloat16)) == std::vector<uint16_t>{0, 0});
  CHECK(bits_of(ones({2}, DType::BFloat16)) == std::vector<uint16_t>{0x3f80, 0x3f80});
  CHECK(empty({2, 3}, DType::BFloat16).nbytes() == 12);
  CHECK(bits_of(full({1}, std::numeric_limits<double>::infinity(), DType::BFloat16)) == std::vector<uint16_t>{0x7f80});
  CHECK(contains(expect_error([] { (void)full({1}, 3.4e38, DType::BFloat16); }), "out of bfloat16's range"));
  CHECK(arange(0, 4, 1, DType::BFloat16).to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  // Views and copies move bits, a signalling NaN included.
  const Tensor b = bf16_from_bits({0x3f80, 0x7f81, 0xc020, 0x0001, 0x8000, 0x4049}, {2, 3});
  CHECK(bits_of(b.clone()) == bits_of(b));
  CHECK(bits_of(b.transpose(0, 1).contiguous()) == std::vector<uint16_t>{0x3f80, 0x0001, 0x7f81, 0x8000, 0xc020, 0x4049});
  CHECK(bits_of(b.narrow(1, 1, 2).select(0, 0)) == std::vector<uint16_t>{0x7f81, 0xc020});
  CHECK(bits_of(b.reshape({3, 2}).permute({1, 0})) == std::vector<uint16_t>{0x3f80, 0xc020, 0x8000, 0x7f81, 0x0001, 0x4049});
  Tensor dst = zeros({2, 3}, DType::BFloat16);
  ops::copy_(dst, b);
  CHECK(bits_of(dst) == bits_of(b));
  ops::copy_(dst, from_vector<float>({0.5f, 2, 3}));  // broadcast and converted
  CHECK(dst.to_vector<float>() == std::vector<float>{0.5f, 2, 3, 0.5f, 2, 3});
  CHECK(bf16_from_bits({0xc020}, {}).item<float>() == -2.5f);
  const std::string shown = bf16_from_bits({0x3fc0, 0xc020, 0x4049}, {3}).to_string();
  CHECK_MESSAGE(contains(shown, "[1.5, -2.5, 3.14062]"), shown);
  CHECK_MESSAGE(contains(shown, "dtype=bfloat16"), shown);
}

TEST_CASE("bf16: safetensors BF16 holds the bits little-endian, and reads back what it wrote") {
  const std::vector<uint16_t> bits = {0x3f80, 0xc020, 0x7f80, 0xffc1, 0x0001, 0x8000};
  const Tensor b = bf16_from_bits(bits, {2, 3});
  const nn::StateDict tensors{{"w", b}, {"wt", b.transpose(0, 1)}};
  const safetensors::Contents c = nn::to_contents(tensors, {});
  // The bytes the format prescribes (little-endian, row-major), written out by hand.
  auto le = [](const std::vector<uint16_t>& v) {
    std::string s;
    for (uint16_t x : v) s += {static_cast<char>(x & 0xff), static_cast<char>(x >> 8)};
    return s;
  };
  for (const auto& entry : c.tensors) {  // not a structured binding: clang 14 cannot capture one in CAPTURE's lambda
    const std::string& name = entry.first;
    const auto& r = entry.second;
    CAPTURE(name);
    CHECK(r.dtype == "BF16");
    if (name == "w") {
      CHECK(r.shape == std::vector<int64_t>{2, 3});
      CHECK(r.bytes == le(bits));
    } else {
      CHECK(r.shape == std::vector<int64_t>{3, 2});
      CHECK(r.bytes == le({0x3f80, 0xffc1, 0xc020, 0x0001, 0x7f80, 0x8000}));
    }
  }
  const std::string file = (scratch_root("test_bfloat16", true) / "bf16.safetensors").string();
  nn::save_tensors(file, tensors);
  CHECK(contains(read_bytes(file), "\"dtype\":\"BF16\""));
  const nn::StateDict back = nn::load_tensors(file);
  REQUIRE(back.size() == 2);
  CHECK(back.at("w").dtype() == DType::BFloat16);
  CHECK(back.at("w").shape() == Dims{2, 3});
  CHECK(bits_of(back.at("w")) == bits);  // a NaN's payload included
  CHECK(bits_of(back.at("wt")) == bits_of(b.transpose(0, 1)));
}

TEST_CASE("bf16: ops that compute refuse it with one line naming the op and the way out") {
  const Tensor b = ones({2, 2}, DType::BFloat16);
  CHECK(expect_error([&] { (void)(b + b); }) == "add" + kRefusal);
  CHECK(expect_error([&] { (void)(b + from_vector<int>({1, 2})); }) == "add" + kRefusal);  // int with bf16 stays bf16
  CHECK(expect_error([&] { (void)ops::unary(ops::Unary::Exp, b); }) == "exp" + kRefusal);
  CHECK(expect_error([&] { (void)ops::sum(b); }) == "sum" + kRefusal);
  CHECK(expect_error([&] { (void)ops::softmax(b, 1); }) == "softmax" + kRefusal);
  CHECK(expect_error([&] { (void)ops::pow_scalar(b, 2); }) == "pow" + kRefusal);
  CHECK(expect_error([&] { (void)ops::all_finite(b); }) == "all_finite" + kRefusal);
  CHECK(expect_error([&] { (void)rand({2}, DType::BFloat16); }) == "uniform" + kRefusal);
  CHECK(expect_error([&] { (void)ops::compare(ops::Compare::Eq, b, b); }) == "compare" + kRefusal);
  // With float32 it promotes to float32 and computes there.
  CHECK((b + ones({2, 2})).dtype() == DType::Float32);
  CHECK((b + ones({2, 2})).to_vector<float>() == std::vector<float>{2, 2, 2, 2});
}
