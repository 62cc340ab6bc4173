#define BOOST_TEST_MODULE harness_h5
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "scratch_dir.hpp"
#include "swa/harness/base/h5.hpp"

namespace fs = std::filesystem;
using namespace swa::h5;

namespace {
const swa::test::ScratchDir scratch_dir("swa_h5_test");

fs::path scratch(const std::string& name) { return scratch_dir / name; }
}  // namespace

BOOST_AUTO_TEST_CASE(committed_file_reads_back) {
  const fs::path path = scratch("ok.h5");
  {
    AtomicFile f(path);
    const std::vector<float> data = {1.f, -2.f, 3.5f, 4.f, 5.f, 6.f};
    write_dataset(f.id(), "x", data, {2, 3});
    write_attr(f.id(), "name", std::string("swa"));
    write_attr(f.id(), "n", std::int64_t{42});
    BOOST_TEST(!fs::exists(path));  // nothing at the final path before commit
    f.commit();
  }
  BOOST_TEST(fs::exists(path));
  Handle f = open_file_readonly(path);
  std::vector<hsize_t> dims;
  const auto x = read_floats(f.id(), "x", &dims);
  BOOST_TEST((dims == std::vector<hsize_t>{2, 3}));
  BOOST_TEST(x[2] == 3.5f);
  BOOST_TEST(read_string_attr(f.id(), "name") == "swa");
  BOOST_TEST(read_int_attr(f.id(), "n") == 42);
}

BOOST_AUTO_TEST_CASE(uncommitted_file_leaves_nothing_behind) {
  const fs::path path = scratch("abandoned.h5");
  try {
    AtomicFile f(path);
    write_dataset(f.id(), "x", std::vector<float>{1.f}, {1});
    throw std::runtime_error("simulated failure mid-write");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(!fs::exists(path));
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    BOOST_TEST(entry.path().filename().string().find("abandoned.h5") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(errors_name_the_path) {
  BOOST_CHECK_EXCEPTION(AtomicFile("/nonexistent-dir/x.h5"), Error, [](const Error& e) {
    return std::string(e.what()).find("/nonexistent-dir") != std::string::npos;
  });
  const fs::path path = scratch("shape.h5");
  AtomicFile f(path);
  BOOST_CHECK_THROW(write_dataset(f.id(), "x", std::vector<float>{1.f, 2.f}, {3}), Error);
}

// commit() writes the core driver's own buffer, not H5Fget_file_image's copy of it: the two must
// be the same bytes (a file large enough to take the direct write, and a small one).
BOOST_AUTO_TEST_CASE(committed_bytes_are_the_file_image) {
  for (std::size_t n : {std::size_t{10}, std::size_t{3} << 20}) {
    const fs::path path = scratch("image.h5");
    std::vector<char> image;
    {
      AtomicFile f(path);
      std::vector<double> data(n);
      for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<double>(i) * 0.25 - 7.0;
      write_dataset(f.id(), "x", data, {n});
      Handle g = create_group(f.id(), "g");
      write_attr(g.id(), "note", std::string("an attribute in a group"));
      g.close();
      BOOST_REQUIRE(H5Fflush(f.id(), H5F_SCOPE_LOCAL) >= 0);
      const ssize_t size = H5Fget_file_image(f.id(), nullptr, 0);
      BOOST_REQUIRE(size > 0);
      image.resize(static_cast<std::size_t>(size));
      BOOST_REQUIRE(H5Fget_file_image(f.id(), image.data(), image.size()) == size);
      f.commit();
    }
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> written{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    BOOST_TEST(written.size() == image.size());
    BOOST_TEST((written == image), "file of " << n << " doubles differs from H5Fget_file_image");
    Handle back = open_file_readonly(path);
    BOOST_TEST(read_doubles(back.id(), "x")[n - 1] == static_cast<double>(n - 1) * 0.25 - 7.0);
  }
}

// A group still open at commit() must not keep the file open past the AtomicFile: its memory is
// gone then. The file is closed with it, the group's later close is harmless, and the file is whole.
BOOST_AUTO_TEST_CASE(a_handle_left_open_at_commit_neither_crashes_nor_truncates) {
  const fs::path path = scratch("left_open.h5");
  Handle group;
  {
    AtomicFile f(path);
    write_dataset(f.id(), "x", std::vector<double>(1000, 2.5), {1000});
    group = create_group(f.id(), "still_open");
    write_attr(group.id(), "note", std::string("written before commit"));
    f.commit();
  }
  group.close();
  Handle back = open_file_readonly(path);
  BOOST_TEST(read_doubles(back.id(), "x")[999] == 2.5);
  BOOST_TEST(exists(back.id(), "still_open"));
}
