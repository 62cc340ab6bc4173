#include "swa/dut/baseline_dut.hpp"

#include "swa/baseline.hpp"

namespace swa::dut {
namespace {

class BaselineDut final : public Dut {
 public:
  std::string name() const override { return "baseline"; }
  Support supports(const AttnParams&) const override { return Support::yes(); }

  Status prefill(const AttnParams& p) override {
    const std::vector<float> out = baseline::attention(p);
    const std::int64_t n = total_tokens(p);
    auto* bytes = static_cast<unsigned char*>(p.out);
    const std::size_t elem = dtype_bytes(p.dtype);
    for (std::int64_t r = 0; r < n; ++r)
      for (int h = 0; h < p.heads_q; ++h)
        store_all_as(p.dtype, &out[(r * p.heads_q + h) * p.head_size], static_cast<std::size_t>(p.head_size),
                     bytes + (r * p.out_row_stride + h * p.out_head_stride) * elem);
    return Status::success();
  }

  Status chunked_prefill(const AttnParams& p, KvCache&, int chunk_index) override {
    return chunk_index == 0 ? prefill(p) : Status::success();
  }

  Status decode_step(const AttnParams&, KvCache&, int) override { return Status::success(); }

  Traits traits() const override {
    Traits t;
    t.cache = CacheReport::none;  // dense, no cache
    return t;
  }
};

}  // namespace

std::unique_ptr<Dut> make_baseline_dut() { return std::make_unique<BaselineDut>(); }

}  // namespace swa::dut
