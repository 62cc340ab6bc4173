#define BOOST_TEST_MODULE harness_inputs
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>

#include "swa/harness/case/inputs.hpp"
#include "swa/harness/base/philox.hpp"
#include "swa/harness/case/problem.hpp"

using namespace swa;
using namespace swa::harness;

// Random123's published known-answer vectors for philox4x32-10.
BOOST_AUTO_TEST_CASE(philox_known_answers) {
  BOOST_TEST((philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_TEST((philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

BOOST_AUTO_TEST_CASE(philox_lanes_equal_philox_one_counter_at_a_time) {
  for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{0xffffffe0u}, ~std::uint64_t{0} - 20}) {
    std::uint32_t lanes[4][64];
    philox4x32_10_lanes<64>(first, 3u, 0u, {0x12345678u, 0x9abcdef0u}, lanes);
    int wrong = 0;
    for (int i = 0; i < 64; ++i) {
      const std::uint64_t index = first + static_cast<std::uint64_t>(i);
      const PhiloxBlock one = philox4x32_10(
          {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 3u, 0u}, {0x12345678u, 0x9abcdef0u});
      for (int w = 0; w < 4; ++w) wrong += lanes[w][i] != one[w];
    }
    BOOST_TEST(wrong == 0, "first counter " << first);
  }
}

// The definition of element `index` (harness/README.md, "Inputs"), one element at a time.
double element(std::uint64_t seed, TensorRole role, InputDistribution dist, std::uint64_t index, int head_size) {
  const PhiloxBlock r = philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                       static_cast<std::uint32_t>(role), 0u},
                                      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const auto u = [](std::uint32_t bits) { return (static_cast<double>(bits) + 0.5) * 0x1p-32; };
  const auto normal = [&](std::uint32_t a, std::uint32_t b) {
    return std::sqrt(-2.0 * std::log(u(a))) * std::cos(2.0 * 3.141592653589793 * u(b));
  };
  switch (dist) {
    case InputDistribution::normal:
    case InputDistribution::constant_rows: return normal(r[0], r[1]);
    case InputDistribution::uniform: return 2.0 * u(r[0]) - 1.0;
    case InputDistribution::large_logit:
      return (role == TensorRole::v ? 1.0 : std::sqrt(65504.0 / 16.0 / std::sqrt(double(head_size)))) * normal(r[0], r[1]);
    case InputDistribution::outlier: {
      const double base = normal(r[0], r[1]);
      return u(r[2]) < 0.001 ? base + 10.0 * normal(r[3], r[2] ^ 0x5bd1e995u) : base;
    }
  }
  return 0;
}

// generate_tensor draws a block of elements at a time; every element must still be its definition,
// bit for bit, across block boundaries and in a row's last partial block.
BOOST_AUTO_TEST_CASE(generated_tensors_equal_the_element_by_element_definition) {
  const std::int64_t rows = 9, row_elems = 150;
  for (const auto dist : kAllInputDistributions)
    for (const auto role : {TensorRole::q, TensorRole::k, TensorRole::v}) {
      const auto t = generate_tensor(0x1234567890abull, role, dist, rows, row_elems, 96, DType::fp32);
      int wrong = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t e = 0; e < row_elems; ++e) {
          const std::int64_t source = dist == InputDistribution::constant_rows && role == TensorRole::k ? 0 : r;
          const auto want = static_cast<float>(element(0x1234567890abull, role, dist, source * row_elems + e, 96));
          wrong += std::memcmp(&want, &t[r * row_elems + e], sizeof want) != 0;
        }
      BOOST_TEST(wrong == 0, distribution_name(dist) << " role " << static_cast<int>(role));
    }
}

BOOST_AUTO_TEST_CASE(tensors_are_pure_functions_of_seed_role_and_index) {
  const auto a = generate_tensor(5, TensorRole::q, InputDistribution::normal, 7, 12, 4, DType::fp32);
  const auto b = generate_tensor(5, TensorRole::q, InputDistribution::normal, 7, 12, 4, DType::fp32);
  const auto c = generate_tensor(6, TensorRole::q, InputDistribution::normal, 7, 12, 4, DType::fp32);
  const auto d = generate_tensor(5, TensorRole::k, InputDistribution::normal, 7, 12, 4, DType::fp32);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  BOOST_TEST(a != d);
  // A longer tensor extends a shorter one: element i does not depend on the size.
  const auto longer = generate_tensor(5, TensorRole::q, InputDistribution::normal, 9, 12, 4, DType::fp32);
  BOOST_TEST(std::equal(a.begin(), a.end(), longer.begin()));
}

BOOST_AUTO_TEST_CASE(distributions_have_their_shape) {
  const std::int64_t n = 200000;
  auto moments = [&](InputDistribution dist, TensorRole role) {
    const auto t = generate_tensor(11, role, dist, n, 1, 64, DType::fp32);
    double mean = 0, sq = 0, peak = 0;
    for (float x : t) {
      mean += x;
      sq += double(x) * x;
      peak = std::max(peak, std::abs(double(x)));
    }
    mean /= n;
    return std::array<double, 3>{mean, std::sqrt(sq / n - mean * mean), peak};
  };
  const auto normal = moments(InputDistribution::normal, TensorRole::q);
  BOOST_TEST(std::abs(normal[0]) < 0.01);
  BOOST_TEST(std::abs(normal[1] - 1.0) < 0.01);
  const auto uniform = moments(InputDistribution::uniform, TensorRole::q);
  BOOST_TEST(uniform[2] <= 1.0);
  BOOST_TEST(std::abs(uniform[1] - 1.0 / std::sqrt(3.0)) < 0.01);
  const auto outlier = moments(InputDistribution::outlier, TensorRole::q);
  BOOST_TEST(outlier[2] > 15.0);  // spikes of N(0, 100) present
  BOOST_TEST(std::abs(outlier[1] - std::sqrt(1.0 + 0.001 * 100.0)) < 0.05);
  const auto large = moments(InputDistribution::large_logit, TensorRole::k);
  BOOST_TEST(large[1] > 10.0);
  BOOST_TEST(moments(InputDistribution::large_logit, TensorRole::v)[1] < 1.1);
}

BOOST_AUTO_TEST_CASE(constant_rows_repeat_the_first_key_row) {
  const auto k = generate_tensor(3, TensorRole::k, InputDistribution::constant_rows, 5, 8, 4, DType::bf16);
  for (int r = 1; r < 5; ++r)
    for (int e = 0; e < 8; ++e) BOOST_TEST(k[r * 8 + e] == k[e]);
  const auto q = generate_tensor(3, TensorRole::q, InputDistribution::constant_rows, 5, 8, 4, DType::bf16);
  BOOST_TEST(q[8] != q[0]);
}

BOOST_AUTO_TEST_CASE(values_are_rounded_to_the_dtype_and_stored_bit_exactly) {
  ProblemSpec spec;
  spec.seq_lens = {3, 1};
  spec.heads_q = 4;
  spec.heads_kv = 2;
  spec.head_size = 8;
  spec.dtype = DType::fp16;
  spec.seed = 9;
  Problem pr;
  build_problem(spec, pr);
  for (std::size_t i = 0; i < pr.q.size(); ++i) {
    BOOST_TEST_REQUIRE(round_to(DType::fp16, pr.q[i]) == pr.q[i]);
    BOOST_TEST_REQUIRE(load_from(DType::fp16, &pr.q_storage[2 * i]) == pr.q[i]);
  }
  BOOST_TEST(pr.params.seq_offsets[2] == 4);
  BOOST_TEST(pr.params.scale == 1.0f / std::sqrt(8.0f));
}

// FP8 descales as a calibration computes them (inputs.hpp): never a power of two nor a value a
// 16-bit float holds, V's never a power of two times K's, and both kinds drawn: headroom (amax below
// the largest code) and saturation (the largest values clip).
BOOST_AUTO_TEST_CASE(fp8_descales_are_calibration_scales_that_bend_the_fp8_grid) {
  int headroom = 0, clipping = 0, checked = 0;
  auto log2_off_integer = [](double x) { return std::abs(std::log2(x) - std::round(std::log2(x))); };
  auto amax = [](const std::vector<float>& t) {
    double m = 0;
    for (float x : t) m = std::max(m, static_cast<double>(std::fabs(x)));
    return m;
  };
  for (const KvFormat f : {KvFormat::fp8_e4m3, KvFormat::fp8_e5m2})
    for (std::uint64_t seed = 1; seed <= 64; ++seed) {
      ProblemSpec spec;
      spec.seq_lens = {9, 4};
      spec.heads_q = 2;
      spec.heads_kv = 1;
      spec.head_size = 16;
      spec.dtype = seed % 3 == 0 ? DType::fp32 : seed % 3 == 1 ? DType::bf16 : DType::fp16;
      spec.kv_format = f;
      spec.seed = seed;
      Problem pr;
      build_problem(spec, pr);
      for (const bool value : {false, true}) {
        const float d = value ? pr.params.v_descale : pr.params.k_descale;
        std::uint32_t bits = 0;
        std::memcpy(&bits, &d, sizeof bits);
        BOOST_TEST(log2_off_integer(d) > 0.05, kv_format_name(f) << " seed " << seed << " descale " << d);
        BOOST_TEST((bits & 0x1fffu) != 0u, "descale " << d << " is exact in fp16 or bf16");
        (amax(value ? pr.v : pr.k) / d > fp8_max(f) ? clipping : headroom)++;
        ++checked;
      }
      BOOST_TEST(log2_off_integer(pr.params.v_descale / pr.params.k_descale) > 0.1,
                 "seed " << seed << ": v_descale / k_descale = " << pr.params.v_descale / pr.params.k_descale);
    }
  BOOST_TEST(checked == 256);
  BOOST_TEST(headroom > 64);
  BOOST_TEST(clipping > 64);
}

// A golden cache hit builds the problem from the stored Q, K and V: the same problem as drawing them
// (the FP8 descales from the storage's amax), without the float copies.
BOOST_AUTO_TEST_CASE(a_problem_from_given_tensors_equals_the_drawn_one_and_wrong_sizes_are_refused) {
  ProblemSpec spec;
  spec.seq_lens = {5, 2};
  spec.heads_q = 4;
  spec.heads_kv = 2;
  spec.head_size = 8;
  spec.dtype = DType::bf16;
  spec.kv_format = KvFormat::fp8_e4m3;  // descales come from the values' amax
  spec.sinks = true;
  spec.seed = 4;
  Problem drawn, given;
  build_problem(spec, drawn);
  BOOST_TEST_REQUIRE(build_problem(spec, given, ProblemTensors{drawn.q_storage, drawn.k_storage, drawn.v_storage}));
  BOOST_TEST((given.q.empty() && given.k.empty() && given.v.empty()));
  BOOST_TEST((given.q_storage == drawn.q_storage && given.k_storage == drawn.k_storage && given.v_storage == drawn.v_storage));
  // The descales follow the drawn floats' amax (computed here apart from the problem's own code).
  auto amax = [](const std::vector<float>& t) {
    double m = 0;
    for (float x : t) m = std::max(m, static_cast<double>(std::fabs(x)));
    return m;
  };
  BOOST_TEST(drawn.params.k_descale == draw_kv_descale(spec.seed, spec.kv_format, 0, amax(drawn.k)));
  BOOST_TEST(drawn.params.v_descale == draw_kv_descale(spec.seed, spec.kv_format, 1, amax(drawn.v)));
  BOOST_TEST(given.params.k_descale == drawn.params.k_descale);
  BOOST_TEST(given.params.v_descale == drawn.params.v_descale);
  BOOST_TEST(given.sinks == drawn.sinks);
  BOOST_TEST(given.params.k == static_cast<const void*>(given.k_storage.data()));
  Problem refused;
  auto short_k = drawn.k_storage;
  short_k.pop_back();
  BOOST_TEST(!build_problem(spec, refused, ProblemTensors{drawn.q_storage, short_k, drawn.v_storage}));
  BOOST_TEST(!build_problem(spec, refused, ProblemTensors{drawn.q_storage, drawn.v_storage, {}}));
}

BOOST_AUTO_TEST_CASE(memory_estimate_grows_with_the_problem) {
  ProblemSpec small;
  small.seq_lens = {100};
  ProblemSpec big = small;
  big.seq_lens = {1000};
  BOOST_TEST(estimate_memory_bytes(big) == 10 * estimate_memory_bytes(small));
  BOOST_TEST(default_memory_limit_bytes() > 0);
}
