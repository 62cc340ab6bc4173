#pragma once
// A thin RAII layer over the HDF5 C API: the only place that talks to libhdf5.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace swa::h5 {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer, const std::string& what);
  Handle(Handle&& o) noexcept;
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t id() const { return id_; }
  void close();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

Handle create_file(const std::filesystem::path& path);  // truncates
Handle open_file_readonly(const std::filesystem::path& path);
Handle open_file_readwrite(const std::filesystem::path& path);  // a file this process wrote
Handle create_group(hid_t loc, const std::string& name);

void write_dataset(hid_t loc, const std::string& name, std::span<const float> data, const std::vector<hsize_t>& dims);
void write_dataset(hid_t loc, const std::string& name, std::span<const double> data, const std::vector<hsize_t>& dims);
void write_dataset(hid_t loc, const std::string& name, std::span<const std::int32_t> data,
                   const std::vector<hsize_t>& dims);

void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr(hid_t obj, const std::string& name, std::int64_t value);
void write_attr(hid_t obj, const std::string& name, double value);

// A scalar attribute as read back: integers widen to int64, floats to double.
using AttrValue = std::variant<std::int64_t, double, std::string>;

std::vector<float> read_floats(hid_t loc, const std::string& name, std::vector<hsize_t>* dims = nullptr);
std::vector<double> read_doubles(hid_t loc, const std::string& name, std::vector<hsize_t>* dims = nullptr);
std::vector<std::int64_t> read_int64s(hid_t loc, const std::string& name, std::vector<hsize_t>* dims = nullptr);
bool exists(hid_t loc, const std::string& path);
// A dataset's shape, without reading it (check a shape before reading an untrusted file).
std::vector<hsize_t> dataset_dims(hid_t loc, const std::string& name);  // a link (dataset or group) at this path
std::vector<std::string> member_names(hid_t group);  // in name order
// Every scalar attribute of an object (string, integer or float); others are skipped.
std::map<std::string, AttrValue> read_attrs(hid_t obj);
// What in `file` reaches outside it or runs code when read, named ("/out is a virtual dataset"):
// a link that is not a hard link (external, soft, user-defined), a virtual dataset, raw data in
// external files, or a filter other than HDF5's built-in ones (an unknown one loads a plugin
// library). Empty when every object is plain local data. Reads no dataset's data.
std::string indirection(hid_t file);
std::string read_string_attr(hid_t obj, const std::string& name);
std::int64_t read_int_attr(hid_t obj, const std::string& name);

class ImageBuffer;

// The file is built in memory; commit() writes it to a temporary file beside `final_path`, fsyncs
// it, renames it into place and fsyncs the folder, so a reader never sees a half-written file, even
// after a power loss. Any failure (a full disk) throws Error naming the file and the cause and
// leaves the old file as it was. Without commit() nothing is written.
// commit() writes the core driver's own buffer (harness/README.md, "Crash safety").
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  hid_t id() const { return file_.id(); }
  void commit();

 private:
  std::filesystem::path final_path_;
  std::unique_ptr<ImageBuffer> image_;  // before file_: the file closes first
  Handle file_;
  bool committed_ = false;
};

}  // namespace swa::h5
