#include "swa/harness/judge/golden_cache.hpp"
#include "swa/harness/base/host.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/harness/base/text.hpp"

#include <chrono>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <gnu/libc-version.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>  // XXH3 through the SSE2, AVX2 or AVX-512 kernel the CPU has, picked at run time
#endif

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace swa::harness {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'S', 'W', 'A', 'G', 'O', 'L', 'D', '5'};
constexpr char kKeyedMagic[8] = {'S', 'W', 'A', 'G', 'O', 'L', 'K', '5'};  // checked with HMAC-SHA256 under a key
constexpr std::size_t kKeyChars = 64;
constexpr std::size_t kDigestBytes = 32;  // SHA-256: the key
constexpr std::size_t kChecksumBytes = 16;  // XXH3-128: an entry's checksum
constexpr std::string_view kExtension = ".golden";

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("golden cache: OpenSSL cannot start a SHA-256");
  }
  Sha256& add(const void* data, std::size_t bytes) {
    EVP_DigestUpdate(ctx_.get(), data, bytes);
    return *this;
  }
  Sha256& add(std::string_view text) {
    const std::uint64_t n = text.size();  // length-prefixed, so field boundaries are part of the hash
    return add(&n, sizeof n).add(text.data(), text.size());
  }
  std::array<unsigned char, kDigestBytes> digest() {
    std::array<unsigned char, kDigestBytes> d{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), d.data(), &len);
    return d;
  }
  std::string hex() {
    const auto d = digest();
    return hex_of(d.data(), d.size());
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// XXH3-128 (Debian's libxxhash): an entry's checksum over its hundreds of MB, at tens of GB/s where
// SHA-256 ran at about 1 GB/s. It guards against corruption, not against an adversary; the key
// itself stays SHA-256.
class Xxh3 {
 public:
  Xxh3() : state_(XXH3_createState(), XXH3_freeState) {
    if (!state_ || XXH3_128bits_reset(state_.get()) != XXH_OK)
      throw std::runtime_error("golden cache: xxHash cannot start an XXH3-128");
  }
  Xxh3& add(const void* data, std::size_t bytes) {
    XXH3_128bits_update(state_.get(), data, bytes);
    return *this;
  }
  std::array<unsigned char, kChecksumBytes> digest() {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state_.get()));
    std::array<unsigned char, kChecksumBytes> d{};
    std::memcpy(d.data(), c.digest, kChecksumBytes);
    return d;
  }

 private:
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
};

// HMAC-SHA256 under the cache's secret key (--golden-cache-key), cut to the checksum's 16 bytes: a
// writer of a shared folder who does not hold the key cannot make an entry that passes.
class HmacSha256 {
 public:
  explicit HmacSha256(const std::string& key) {
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    ctx_.reset(mac ? EVP_MAC_CTX_new(mac) : nullptr);
    EVP_MAC_free(mac);
    char digest_name[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                                 OSSL_PARAM_construct_end()};
    if (!ctx_ || EVP_MAC_init(ctx_.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1)
      throw std::runtime_error("golden cache: OpenSSL cannot start an HMAC-SHA256");
  }
  HmacSha256& add(const void* data, std::size_t bytes) {
    EVP_MAC_update(ctx_.get(), static_cast<const unsigned char*>(data), bytes);
    return *this;
  }
  std::array<unsigned char, 32> full() {
    std::array<unsigned char, 32> d{};
    std::size_t len = 0;
    EVP_MAC_final(ctx_.get(), d.data(), &len, d.size());
    return d;
  }

 private:
  struct Free {
    void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
  };
  std::unique_ptr<EVP_MAC_CTX, Free> ctx_;
};

// An entry's checksum: XXH3-128, or with a key the HMAC cut to the same 16 bytes.
class Checksum {
 public:
  explicit Checksum(const std::string& mac_key) {
    if (mac_key.empty())
      xxh3_.emplace();
    else
      hmac_.emplace(mac_key);
  }
  Checksum& add(const void* data, std::size_t bytes) {
    if (xxh3_) xxh3_->add(data, bytes);
    else hmac_->add(data, bytes);
    return *this;
  }
  std::array<unsigned char, kChecksumBytes> digest() {
    if (xxh3_) return xxh3_->digest();
    std::array<unsigned char, kChecksumBytes> d{};
    const auto full = hmac_->full();
    std::memcpy(d.data(), full.data(), kChecksumBytes);
    return d;
  }

 private:
  std::optional<Xxh3> xxh3_;
  std::optional<HmacSha256> hmac_;
};

struct Header {
  char magic[8];
  char key[kKeyChars];
  std::uint64_t out, lse, baseline;  // elements
  std::uint64_t phases;              // of the baseline's errors
  std::uint64_t q, k, v;             // bytes of dtype storage
};

// BaselineErrors as fp64 values: the whole output's four, then three per phase.
constexpr std::uint64_t kWholeErrorValues = 4, kPhaseErrorValues = 3;
std::vector<double> error_values(const BaselineErrors& e) {
  std::vector<double> v{e.max_abs, e.rel_l2, e.nmse, e.mean_ulp};
  for (const ErrorNorms& p : e.phases) v.insert(v.end(), {p.max_abs, p.rel_l2, p.nmse});
  return v;
}
BaselineErrors errors_of(const std::vector<double>& v) {
  BaselineErrors e{v[0], v[1], v[2], v[3], {}};
  for (std::size_t i = kWholeErrorValues; i + kPhaseErrorValues <= v.size(); i += kPhaseErrorValues)
    e.phases.push_back({v[i], v[i + 1], v[i + 2]});
  return e;
}

template <class T>
bool read_array(std::ifstream& in, std::vector<T>& v, std::uint64_t n, Checksum& check) {
  v.resize(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  if (!in) return false;
  check.add(v.data(), n * sizeof(T));
  return true;
}

}  // namespace

GoldenCache::GoldenCache(fs::path dir, std::int64_t max_bytes, std::string mac_key)
    : dir_(std::move(dir)), max_bytes_(max_bytes), mac_key_(std::move(mac_key)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw std::runtime_error("golden cache folder " + dir_.string() + " cannot be created: " +
                             (ec ? ec.message() : "it is not a folder"));
}

std::optional<fs::path> GoldenCache::default_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "swa-harness" / "golden";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "swa-harness" / "golden";
  return std::nullopt;
}

std::string GoldenCache::key(const std::string& scenario_id) {
  static const std::string model = cpu_model();
  Sha256 k;
  k.add("swa-golden-cache 5").add(scenario_id).add(golden::build_id()).add(SWA_INPUTS_BUILD_ID);
  k.add(gnu_get_libc_version()).add(model);
  return k.hex();
}

// With a key, the file's name is the HMAC of the content key: entries of other keys (and unkeyed
// ones) are other files, never read as this cache's.
fs::path GoldenCache::path_for(const std::string& key) const {
  if (mac_key_.empty()) return dir_ / (key + std::string(kExtension));
  const auto mac = HmacSha256(mac_key_).add(key.data(), key.size()).full();
  return dir_ / (hex_of(mac.data(), mac.size()) + std::string(kExtension));
}

namespace {

// Bytes of an entry's first part (header, golden, errors, inputs; not its checksum), and of the whole file.
std::uint64_t first_part_bytes(const Header& h) {
  const std::uint64_t errors = kWholeErrorValues + kPhaseErrorValues * h.phases;
  return sizeof h + (h.out + h.lse + errors) * sizeof(double) + h.q + h.k + h.v;
}
std::uint64_t entry_bytes(const Header& h) {
  return first_part_bytes(h) + kChecksumBytes + h.baseline * sizeof(float) + kChecksumBytes;
}

// The header of the entry for `key` when it describes a file of `file_bytes`: sizes are bounded by
// the file's own size before anything is allocated.
bool read_header(std::ifstream& in, const std::string& key, bool keyed, std::uint64_t file_bytes, Header& h) {
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  if (std::memcmp(h.magic, keyed ? kKeyedMagic : kMagic, sizeof kMagic) != 0 || std::string_view(h.key, kKeyChars) != key)
    return false;
  for (const std::uint64_t n : {h.out, h.lse, h.baseline, h.phases, h.q, h.k, h.v})
    if (n > file_bytes) return false;
  return entry_bytes(h) == file_bytes;
}

// Whether `path` can be an entry: a regular file (not a FIFO, a device or a symlink: opening a FIFO
// blocks) no larger than the cap, which no entry this cache stored exceeds (a sparse file declaring
// a TiB is refused before anything is allocated). Checked before the file is opened.
enum class Candidate { missing, entry, refused };
Candidate candidate(const fs::path& path, std::int64_t max_bytes, std::uint64_t& file_bytes) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (ec || status.type() == fs::file_type::not_found) return Candidate::missing;
  if (status.type() != fs::file_type::regular) return Candidate::refused;
  file_bytes = fs::file_size(path, ec);
  if (ec) return Candidate::missing;  // removed meanwhile
  return file_bytes > static_cast<std::uint64_t>(max_bytes) ? Candidate::refused : Candidate::entry;
}

// The entry `candidate` approved, opened so that what is read is that file: the descriptor is
// opened without following a symlink or blocking on a FIFO and must still be a regular file of the
// size seen, and the stream reads it through /proc/self/fd (not the name, which another writer of
// the folder may have pointed elsewhere meanwhile). `in` stays closed when any of that fails.
class OpenedEntry {
 public:
  OpenedEntry(const fs::path& path, std::uint64_t file_bytes) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != file_bytes)
      return;
    in.open("/proc/self/fd/" + std::to_string(fd_), std::ios::binary);
  }
  OpenedEntry(const OpenedEntry&) = delete;
  OpenedEntry& operator=(const OpenedEntry&) = delete;
  ~OpenedEntry() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::ifstream in;

 private:
  int fd_ = -1;
};

// A temporary of an interrupted store: KEY.golden.tmp.PID.TID.
bool is_temporary(const fs::path& path) {
  return path.filename().string().find(std::string(kExtension) + ".tmp.") != std::string::npos;
}

}  // namespace

void GoldenCache::discard(const fs::path& path) {
  ++corrupt_;
  std::error_code ec;
  fs::remove(path, ec);
}

std::optional<GoldenCacheEntry> GoldenCache::load(const std::string& key) {
  const fs::path path = path_for(key);
  std::uint64_t file_bytes = 0;
  switch (candidate(path, max_bytes_, file_bytes)) {
    case Candidate::missing:
      return std::nullopt;
    case Candidate::refused:
      discard(path);
      return std::nullopt;
    case Candidate::entry:
      break;
  }
  OpenedEntry opened(path, file_bytes);
  std::ifstream& in = opened.in;
  if (!in.is_open() || !in) return std::nullopt;  // replaced meanwhile
  GoldenCacheEntry e;
  Header h{};
  Checksum check(mac_key_);
  std::array<unsigned char, kChecksumBytes> stored{};
  std::error_code ec;
  const auto read_entry = [&] {
    if (!read_header(in, key, !mac_key_.empty(), file_bytes, h)) return false;
    check.add(&h, sizeof h);
    std::vector<double> error_vals;
    if (!read_array(in, e.golden.out, h.out, check) || !read_array(in, e.golden.lse, h.lse, check) ||
        !read_array(in, error_vals, kWholeErrorValues + kPhaseErrorValues * h.phases, check) ||
        !read_array(in, e.inputs.q, h.q, check) || !read_array(in, e.inputs.k, h.k, check) ||
        !read_array(in, e.inputs.v, h.v, check))
      return false;
    if (!in.read(reinterpret_cast<char*>(stored.data()), kChecksumBytes)) return false;
    e.baseline_errors = errors_of(error_vals);
    e.baseline_count = h.baseline;
    return check.digest() == stored;
  };
  bool ok = false;
  try {
    ok = read_entry();
  } catch (const std::bad_alloc&) {  // sizes the header declares, within the cap, that memory cannot hold
    ok = false;
  }
  if (!ok) {
    discard(path);
    return std::nullopt;
  }
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // the LRU clock
  ++hits_;
  return e;
}

std::optional<std::vector<float>> GoldenCache::load_baseline(const std::string& key, std::uint64_t count) {
  const fs::path path = path_for(key);
  std::uint64_t file_bytes = 0;
  if (candidate(path, max_bytes_, file_bytes) != Candidate::entry) return std::nullopt;  // evicted or replaced meanwhile
  OpenedEntry opened(path, file_bytes);
  std::ifstream& in = opened.in;
  if (!in.is_open() || !in) return std::nullopt;  // replaced meanwhile
  Header h{};
  if (!read_header(in, key, !mac_key_.empty(), file_bytes, h) || h.baseline != count) return std::nullopt;  // replaced meanwhile
  std::vector<float> baseline;
  std::array<unsigned char, kChecksumBytes> stored{};
  Checksum check(mac_key_);
  check.add(&h, sizeof h);
  in.seekg(static_cast<std::streamoff>(first_part_bytes(h) + kChecksumBytes));
  if (in && read_array(in, baseline, count, check) && in.read(reinterpret_cast<char*>(stored.data()), kChecksumBytes) &&
      check.digest() == stored)
    return baseline;
  discard(path);
  return std::nullopt;
}

void GoldenCache::store(const std::string& key, const golden::Output& golden, const std::vector<float>& baseline,
                        const BaselineErrors& baseline_errors, const Problem& problem) {
  const std::vector<double> error_vals = error_values(baseline_errors);
  Header h{};
  std::memcpy(h.magic, mac_key_.empty() ? kMagic : kKeyedMagic, sizeof kMagic);
  std::memcpy(h.key, key.data(), std::min(key.size(), kKeyChars));
  h.out = golden.out.size();
  h.lse = golden.lse.size();
  h.baseline = baseline.size();
  h.phases = baseline_errors.phases.size();
  h.q = problem.q_storage.size();
  h.k = problem.k_storage.size();
  h.v = problem.v_storage.size();
  const auto bytes = static_cast<std::int64_t>(entry_bytes(h));
  if (bytes > max_bytes_) return;
  const fs::path path = path_for(key);
  const std::string tid = std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + tid;
  const TrackedPath tracked(tmp);  // an interrupt meanwhile removes it
  Checksum check(mac_key_);
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    auto put = [&](const void* data, std::size_t n) {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
      check.add(data, n);
    };
    put(&h, sizeof h);
    put(golden.out.data(), golden.out.size() * sizeof(double));
    put(golden.lse.data(), golden.lse.size() * sizeof(double));
    put(error_vals.data(), error_vals.size() * sizeof(double));
    put(problem.q_storage.data(), problem.q_storage.size());
    put(problem.k_storage.data(), problem.k_storage.size());
    put(problem.v_storage.data(), problem.v_storage.size());
    const auto first_digest = check.digest();
    out.write(reinterpret_cast<const char*>(first_digest.data()), kChecksumBytes);
    Checksum baseline_check(mac_key_);
    baseline_check.add(&h, sizeof h);
    out.write(reinterpret_cast<const char*>(baseline.data()), static_cast<std::streamsize>(baseline.size() * sizeof(float)));
    baseline_check.add(baseline.data(), baseline.size() * sizeof(float));
    const auto baseline_digest = baseline_check.digest();
    out.write(reinterpret_cast<const char*>(baseline_digest.data()), kChecksumBytes);
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  ++stored_;
  std::lock_guard lock(listing_mutex_);
  constexpr int kStoresBetweenListings = 64;
  if (listed_bytes_ >= 0) listed_bytes_ += bytes;
  if (listed_bytes_ < 0 || listed_bytes_ > max_bytes_ || ++stores_since_listing_ >= kStoresBetweenListings)
    evict_locked();
}

void GoldenCache::evict_locked() {
  struct Item {
    fs::path path;
    fs::file_time_type used;
    std::int64_t bytes;
  };
  std::vector<Item> items;
  std::int64_t total = 0;
  std::error_code ec;
  // Temporaries count toward the cap; those of stores that ended long ago (a killed process, on
  // this host or another sharing the folder) are removed: a store takes seconds.
  const auto stale = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const bool temporary = is_temporary(it->path());
    std::error_code e0;
    if ((!temporary && it->path().extension() != kExtension) || !it->is_regular_file(e0)) continue;
    std::error_code e1, e2;
    const auto bytes = it->file_size(e1);
    const auto used = it->last_write_time(e2);
    if (e1 || e2) continue;  // removed by another process meanwhile
    if (temporary && used < stale) {
      fs::remove(it->path(), e1);
      continue;
    }
    // Larger than the cap: no store made it (store refuses such entries), and counting it would
    // evict every good entry first (a sparse file declaring a TiB). Deleted as corrupt, as load does.
    if (!temporary && bytes > static_cast<std::uintmax_t>(max_bytes_)) {
      if (fs::remove(it->path(), e1)) ++corrupt_;
      continue;
    }
    total += static_cast<std::int64_t>(bytes);
    if (!temporary) items.push_back({it->path(), used, static_cast<std::int64_t>(bytes)});
  }
  stores_since_listing_ = 0;
  listed_bytes_ = total;
  if (total <= max_bytes_) return;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.used < b.used; });
  for (const Item& item : items) {
    if (total <= max_bytes_) break;
    if (fs::remove(item.path, ec)) ++evicted_;
    total -= item.bytes;
  }
  listed_bytes_ = total;
}

GoldenCacheCounts GoldenCache::counts() const { return {hits_.load(), stored_.load(), corrupt_.load(), evicted_.load()}; }

}  // namespace swa::harness
