#define BOOST_TEST_MODULE harness_durable_file
#include <sys/mman.h>
#include <sys/resource.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "scratch_dir.hpp"
#include "swa/harness/base/durable_file.hpp"

namespace fs = std::filesystem;
using swa::harness::write_file_atomically;

namespace {

const swa::test::ScratchDir scratch_dir("swa_durable_test");

fs::path scratch(const std::string& name) { return scratch_dir / name; }

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Page-aligned bytes, as AtomicFile hands them over: large ones take the O_DIRECT path.
struct AlignedBytes {
  explicit AlignedBytes(std::size_t n) : size(n) {
    data = static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  ~AlignedBytes() { std::free(data); }
  std::string_view view() const { return {data, size}; }
  char* data;
  std::size_t size;
};

}  // namespace

BOOST_AUTO_TEST_CASE(small_write_reads_back) {
  const fs::path path = scratch("small");
  write_file_atomically(path, "hello");
  BOOST_TEST(read_all(path) == "hello");
}

// Whole 4096-byte blocks go direct and the tail after them buffered: both must land, in order.
BOOST_AUTO_TEST_CASE(large_aligned_write_reads_back_byte_for_byte) {
  for (std::size_t n : {std::size_t{16} << 20, (std::size_t{20} << 20) + 1234}) {
    const fs::path path = scratch("large");
    const AlignedBytes bytes(n);
    write_file_atomically(path, bytes.view());
    const std::string back = read_all(path);
    BOOST_TEST(back.size() == n);
    BOOST_TEST((back == bytes.view()), "file differs from the bytes written, size " << n);
  }
}

// An unaligned view of the same size takes the buffered path, with the same result.
BOOST_AUTO_TEST_CASE(large_unaligned_write_reads_back) {
  const fs::path path = scratch("unaligned");
  const AlignedBytes bytes((std::size_t{17} << 20) + 8);
  const std::string_view view = bytes.view().substr(8);
  write_file_atomically(path, view);
  BOOST_TEST((read_all(path) == view));
}

// A file-size limit (as a full disk) stops the direct write half-way: an error naming the file,
// the old file untouched, no temporary left.
BOOST_AUTO_TEST_CASE(large_write_over_the_size_limit_fails_cleanly) {
  const fs::path path = scratch("limited");
  write_file_atomically(path, "old contents");
  rlimit old{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = old;
  limited.rlim_cur = std::size_t{8} << 20;
  BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  const AlignedBytes bytes(std::size_t{24} << 20);
  std::string message;
  try {
    write_file_atomically(path, bytes.view());
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  BOOST_TEST(message.find(path.string()) != std::string::npos, "message: " << message);
  BOOST_TEST(read_all(path) == "old contents");
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    BOOST_TEST(entry.path().filename().string().find("limited.tmp") == std::string::npos);
}
