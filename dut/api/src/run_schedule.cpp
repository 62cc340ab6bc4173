#include "swa/dut/dut.hpp"

namespace swa::dut {

Status run_schedule(Dut& dut, const AttnParams& p, ScheduleObserver* observer) {
  if (p.mode == RunMode::prefill) return dut.prefill(p);
  KvCache cache = make_kv_cache(p);
  for (int c = 0, n = chunk_count(p); c < n; ++c) {
    take_call_pages(p, cache, RunMode::chunked_prefill, c);
    if (Status s = dut.chunked_prefill(p, cache, c); !s.ok) return s;
    free_call_pages(p, cache, RunMode::chunked_prefill, c);
    if (observer) observer->after_chunk(p, cache, c);
  }
  if (p.mode == RunMode::decode)
    for (int t = 0; t < p.decode_steps; ++t) {
      take_call_pages(p, cache, RunMode::decode, t);
      if (Status s = dut.decode_step(p, cache, t); !s.ok) return s;
      free_call_pages(p, cache, RunMode::decode, t);
      if (observer) observer->after_decode_step(p, cache, t);
    }
  return Status::success();
}

}  // namespace swa::dut
