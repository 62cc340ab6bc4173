#pragma once
// Bisect's finding when the KV cache a DUT leaves differs from the golden cache model: the cache
// check's differences, as values, classified by what the slots hold against the golden's rule
// (rows not written, rows in the wrong slot, rows written where nothing belongs, another sequence's
// rows, stored values that match no input row, the bookkeeping: tokens_written, the compact ring's
// base, the page table), with the first differing slot, the call and the held vs expected position.
#include <vector>

#include "finding.hpp"
#include "swa/harness/judge/cache_check.hpp"
#include "swa/params.hpp"

namespace swa::harness {

Finding cache_finding(const std::vector<CacheMismatch>& mismatches, const AttnParams& p);

}  // namespace swa::harness
