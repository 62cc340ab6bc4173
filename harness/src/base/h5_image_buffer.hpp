#pragma once
// The memory behind AtomicFile's in-memory HDF5 file, handed to HDF5's core driver through its
// file-image callbacks. Two things a plain heap buffer cannot do:
//   - it outlives H5Fclose, so commit() writes HDF5's own bytes instead of a copy of them
//     (H5Fget_file_image copies the whole file: 300 MB for one 4096-token golden problem);
//   - it is page-aligned anonymous memory grown with mremap (no copy as the file grows), so the
//     write can bypass the page cache (write_file_atomically's O_DIRECT path).
#include <hdf5.h>

#include <cstddef>

namespace swa::h5 {

class ImageBuffer {
 public:
  ImageBuffer() = default;
  ~ImageBuffer();
  ImageBuffer(const ImageBuffer&) = delete;
  ImageBuffer& operator=(const ImageBuffer&) = delete;

  // For H5Pset_file_image_callbacks; `this` must outlive the file.
  H5FD_file_image_callbacks_t callbacks();
  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }
  std::size_t mapped_bytes() const { return mapped_; }

 private:
  void* resize(void* current, std::size_t bytes);

  void* data_ = nullptr;
  std::size_t mapped_ = 0;
};

}  // namespace swa::h5
