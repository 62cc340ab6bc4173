#include "swa/harness/base/h5.hpp"

#include "swa/harness/base/durable_file.hpp"
#include "h5_image_buffer.hpp"

#include <system_error>

namespace swa::h5 {
namespace {

// HDF5 prints its own error stack by default; errors here become exceptions with our message.
struct SilenceHdf5 {
  SilenceHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
const SilenceHdf5 silence_once;

// HDF5's own words for the failure that just happened: the innermost entry of its error stack
// (e.g. "unable to open file: ... errno = 2, error message = 'No such file or directory'").
std::string hdf5_cause() {
  std::string cause;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
             if (n == 0 && e->desc) *static_cast<std::string*>(out) = e->desc;
             return 0;
           },
           &cause);
  H5Eclear2(H5E_DEFAULT);
  return cause.empty() ? "" : " (" + cause + ")";
}

void check(herr_t status, const std::string& what) {
  if (status < 0) throw Error("HDF5: " + what + " failed" + hdf5_cause());
}

template <class T>
hid_t native_type();
template <>
hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <>
hid_t native_type<std::int32_t>() { return H5T_NATIVE_INT32; }
template <>
hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }

template <class T>
void write_typed(hid_t loc, const std::string& name, std::span<const T> data, const std::vector<hsize_t>& dims) {
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;
  if (count != data.size()) throw Error("HDF5: dataset " + name + " shape does not match its data");
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose, "dataspace " + name);
  Handle set(H5Dcreate2(loc, name.c_str(), native_type<T>(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose, "create dataset " + name);
  check(H5Dwrite(set.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), "write dataset " + name);
}

}  // namespace

Handle::Handle(hid_t id, Closer closer, const std::string& what) : id_(id), closer_(closer) {
  if (id < 0) throw Error("HDF5: " + what + " failed" + hdf5_cause());
}
Handle::Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    close();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}
Handle::~Handle() { close(); }
void Handle::close() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = H5I_INVALID_HID;
}

Handle create_file(const std::filesystem::path& path) {
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                "create file " + path.string());
}
Handle open_file_readonly(const std::filesystem::path& path) {
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "open file " + path.string());
}
Handle open_file_readwrite(const std::filesystem::path& path) {
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "open file " + path.string());
}
Handle create_group(hid_t loc, const std::string& name) {
  return Handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                "create group " + name);
}

void write_dataset(hid_t loc, const std::string& name, std::span<const float> d, const std::vector<hsize_t>& dims) {
  write_typed(loc, name, d, dims);
}
void write_dataset(hid_t loc, const std::string& name, std::span<const double> d, const std::vector<hsize_t>& dims) {
  write_typed(loc, name, d, dims);
}
void write_dataset(hid_t loc, const std::string& name, std::span<const std::int32_t> d,
                   const std::vector<hsize_t>& dims) {
  write_typed(loc, name, d, dims);
}

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  // Variable-length UTF-8, which h5py reads back as str.
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check(H5Tset_size(type.id(), H5T_VARIABLE), "string size");
  check(H5Tset_cset(type.id(), H5T_CSET_UTF8), "string charset");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle attr(H5Acreate2(obj, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "create attribute " + name);
  const char* text = value.c_str();
  check(H5Awrite(attr.id(), type.id(), &text), "write attribute " + name);
}

namespace {
void write_numeric_attr(hid_t obj, const std::string& name, hid_t type, const void* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle attr(H5Acreate2(obj, name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "create attribute " + name);
  check(H5Awrite(attr.id(), type, value), "write attribute " + name);
}
}  // namespace

void write_attr(hid_t obj, const std::string& name, std::int64_t value) {
  write_numeric_attr(obj, name, H5T_NATIVE_INT64, &value);
}

void write_attr(hid_t obj, const std::string& name, double value) {
  write_numeric_attr(obj, name, H5T_NATIVE_DOUBLE, &value);
}

namespace {
std::vector<hsize_t> shape_of(hid_t set, const std::string& name) {
  Handle space(H5Dget_space(set), H5Sclose, "dataspace of " + name);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) throw Error("HDF5: dataspace of " + name);
  std::vector<hsize_t> shape(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.id(), shape.data(), nullptr);
  return shape;
}

template <class T>
std::vector<T> read_typed(hid_t loc, const std::string& name, std::vector<hsize_t>* dims) {
  Handle set(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  const std::vector<hsize_t> shape = shape_of(set.id(), name);
  hsize_t count = 1;
  for (hsize_t d : shape) count *= d;
  std::vector<T> out(count);
  check(H5Dread(set.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read dataset " + name);
  if (dims) *dims = shape;
  return out;
}
}  // namespace

std::vector<float> read_floats(hid_t loc, const std::string& name, std::vector<hsize_t>* dims) {
  return read_typed<float>(loc, name, dims);
}
std::vector<double> read_doubles(hid_t loc, const std::string& name, std::vector<hsize_t>* dims) {
  return read_typed<double>(loc, name, dims);
}
std::vector<std::int64_t> read_int64s(hid_t loc, const std::string& name, std::vector<hsize_t>* dims) {
  return read_typed<std::int64_t>(loc, name, dims);
}

std::vector<hsize_t> dataset_dims(hid_t loc, const std::string& name) {
  Handle set(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  return shape_of(set.id(), name);
}

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists checks the last link only; walk the path so "a/b" with no "a" is false, not an error.
  for (std::size_t end = 0;; ++end) {
    end = path.find('/', end);
    if (H5Lexists(loc, path.substr(0, end).c_str(), H5P_DEFAULT) <= 0) return false;
    if (end == std::string::npos) return true;
  }
}

std::vector<std::string> member_names(hid_t group) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), "group info");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) throw Error("HDF5: member name failed");
    std::string name(static_cast<std::size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<std::size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

std::map<std::string, AttrValue> read_attrs(hid_t obj) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names), "list attributes");
  std::map<std::string, AttrValue> attrs;
  for (const std::string& name : names) {
    Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
    Handle type(H5Aget_type(attr.id()), H5Tclose, "type of " + name);
    Handle space(H5Aget_space(attr.id()), H5Sclose, "space of " + name);
    if (H5Sget_simple_extent_type(space.id()) != H5S_SCALAR) continue;
    switch (H5Tget_class(type.id())) {
      case H5T_STRING: attrs[name] = read_string_attr(obj, name); break;
      case H5T_INTEGER: attrs[name] = read_int_attr(obj, name); break;
      case H5T_FLOAT: {
        double v = 0;
        check(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, &v), "read attribute " + name);
        attrs[name] = v;
        break;
      }
      default: break;
    }
  }
  return attrs;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle type(H5Aget_type(attr.id()), H5Tclose, "type of " + name);
  if (H5Tis_variable_str(type.id()) > 0) {
    char* text = nullptr;
    check(H5Aread(attr.id(), type.id(), &text), "read attribute " + name);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  std::string value(H5Tget_size(type.id()), '\0');
  check(H5Aread(attr.id(), type.id(), value.data()), "read attribute " + name);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

std::int64_t read_int_attr(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  std::int64_t v = 0;
  check(H5Aread(attr.id(), H5T_NATIVE_INT64, &v), "read attribute " + name);
  return v;
}

AtomicFile::AtomicFile(std::filesystem::path final_path)
    : final_path_(std::move(final_path)), image_(std::make_unique<ImageBuffer>()) {
  const std::filesystem::path dir = final_path_.has_parent_path() ? final_path_.parent_path() : ".";
  if (!std::filesystem::is_directory(dir))
    throw Error("cannot write " + final_path_.string() + ": directory " + dir.string() + " does not exist");
  // Built in memory (HDF5's core driver, no backing store) and written by commit() with plain
  // POSIX calls: a full disk is then an error with its cause, never an I/O failure inside HDF5
  // (which left a file HDF5 could not close, and a segfault in H5_term_library at exit).
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  check(H5Pset_fapl_core(fapl.id(), 1 << 20, 0), "in-memory file driver");
  // Closing the file closes whatever is still open in it: the image is final at commit(), and no
  // handle that outlives this object makes HDF5 write into the unmapped buffer later.
  check(H5Pset_fclose_degree(fapl.id(), H5F_CLOSE_STRONG), "file close degree");
  const H5FD_file_image_callbacks_t callbacks = image_->callbacks();
  check(H5Pset_file_image_callbacks(fapl.id(), const_cast<H5FD_file_image_callbacks_t*>(&callbacks)),
        "in-memory file buffer");
  const std::string memory_name = harness::temporary_for(final_path_).string() + ".in-memory";
  file_ = Handle(H5Fcreate(memory_name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()), H5Fclose,
                 "create " + final_path_.string() + " in memory");
}

AtomicFile::~AtomicFile() = default;  // without commit() nothing was written

void AtomicFile::commit() {
  check(H5Fflush(file_.id(), H5F_SCOPE_LOCAL), "flush " + final_path_.string() + " in memory");
  // The file's bytes are [0, end of allocated space) of the buffer: what H5Fget_file_image would
  // copy out (harness_h5_test compares the two).
  const ssize_t size = H5Fget_file_image(file_.id(), nullptr, 0);
  if (size <= 0 || static_cast<std::size_t>(size) > image_->mapped_bytes())
    throw Error("HDF5: image of " + final_path_.string() + " failed");
  file_.close();
  try {
    harness::write_file_atomically(
        final_path_, std::string_view(reinterpret_cast<const char*>(image_->data()), static_cast<std::size_t>(size)));
  } catch (const std::runtime_error& e) {
    throw Error(e.what());
  }
  committed_ = true;
}


namespace {

struct IndirectionVisit {
  std::string found;
};

herr_t visit_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto& visit = *static_cast<IndirectionVisit*>(data);
  const std::string path = std::string("/") + name;
  if (info->type != H5L_TYPE_HARD) {
    visit.found = path + (info->type == H5L_TYPE_EXTERNAL ? " is an external link"
                          : info->type == H5L_TYPE_SOFT   ? " is a soft link"
                                                          : " is a user-defined link");
    return 1;
  }
  H5O_info_t object;
  if (H5Oget_info_by_name2(group, name, &object, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    visit.found = path + " cannot be inspected";
    return 1;
  }
  if (object.type != H5O_TYPE_DATASET) return 0;
  const hid_t dataset = H5Dopen2(group, name, H5P_DEFAULT);
  if (dataset < 0) {
    visit.found = path + " cannot be opened";
    return 1;
  }
  const hid_t plist = H5Dget_create_plist(dataset);
  const H5D_layout_t layout = plist < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(plist);
  if (layout == H5D_VIRTUAL) {
    visit.found = path + " is a virtual dataset (its data is in other files)";
  } else if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED) {
    visit.found = path + " has a storage layout this reader does not take";
  } else if (H5Pget_external_count(plist) != 0) {
    visit.found = path + " keeps its data in external files";
  } else {
    const int filters = H5Pget_nfilters(plist);
    for (int i = 0; i < filters && visit.found.empty(); ++i) {
      unsigned flags = 0;
      size_t elements = 0;
      char filter_name[64] = {};
      unsigned config = 0;
      const H5Z_filter_t id = H5Pget_filter2(plist, static_cast<unsigned>(i), &flags, &elements, nullptr,
                                             sizeof filter_name, filter_name, &config);
      if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32 &&
          id != H5Z_FILTER_NBIT && id != H5Z_FILTER_SCALEOFFSET)
        visit.found = path + " uses HDF5 filter " + std::to_string(id) + ", not one built into HDF5";
    }
  }
  if (plist >= 0) H5Pclose(plist);
  H5Dclose(dataset);
  return visit.found.empty() ? 0 : 1;
}

}  // namespace

std::string indirection(hid_t file) {
  IndirectionVisit visit;
  if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit_link, &visit) < 0 && visit.found.empty())
    return "its links cannot be listed";
  return visit.found;
}

}  // namespace swa::h5
