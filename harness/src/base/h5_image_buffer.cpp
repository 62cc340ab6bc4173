#include "h5_image_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace swa::h5 {
namespace {

std::size_t whole_pages(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

ImageBuffer& buffer_of(void* udata) { return *static_cast<ImageBuffer*>(udata); }

// The kernel zero-fills a fresh anonymous page at its first touch, one fault at a time on the thread
// that touches it: HDF5's copy of a dataset into a grown image would take every fault on one core. A
// grown region of 16 MB or more is touched first from every core (a 32768-token golden file, 2.4 GB,
// spent 8 of its 11 s of writing in first-touch faults on one core of a 2-core VM).
void touch_in_parallel(unsigned char* from, std::size_t bytes) {
  constexpr std::size_t kWorthIt = 16 << 20;
  if (bytes < kWorthIt) return;
  const auto page = static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
  const auto pages = static_cast<std::int64_t>(bytes) / page;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < pages; ++i) from[i * page] = 0;  // the page is zero already: no change
}

}  // namespace

ImageBuffer::~ImageBuffer() {
  if (data_) ::munmap(data_, mapped_);
}

void* ImageBuffer::resize(void* current, std::size_t bytes) {
  if (current != data_) return nullptr;  // not ours: HDF5 reports the failed allocation
  const std::size_t want = whole_pages(bytes == 0 ? 1 : bytes);
  if (want <= mapped_) return data_;  // never shrinks: the bytes past the end are simply unused
  void* grown = data_ ? ::mremap(data_, mapped_, want, MREMAP_MAYMOVE)
                      : ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (grown == MAP_FAILED) return nullptr;
  touch_in_parallel(static_cast<unsigned char*>(grown) + mapped_, want - mapped_);
  data_ = grown;
  mapped_ = want;
  return data_;
}

H5FD_file_image_callbacks_t ImageBuffer::callbacks() {
  H5FD_file_image_callbacks_t c{};
  c.image_malloc = [](std::size_t size, H5FD_file_image_op_t, void* udata) -> void* {
    return buffer_of(udata).resize(buffer_of(udata).data_, size);
  };
  c.image_memcpy = [](void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*) -> void* {
    return std::memcpy(dest, src, size);
  };
  c.image_realloc = [](void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata) -> void* {
    return buffer_of(udata).resize(ptr, size);
  };
  // Kept past H5Fclose for commit(); unmapped with the buffer.
  c.image_free = [](void*, H5FD_file_image_op_t, void*) -> herr_t { return 0; };
  // The property list copies share the one buffer.
  c.udata_copy = [](void* udata) -> void* { return udata; };
  c.udata_free = [](void*) -> herr_t { return 0; };
  c.udata = this;
  return c;
}

}  // namespace swa::h5
