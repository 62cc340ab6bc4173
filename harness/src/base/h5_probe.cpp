#include "swa/harness/base/h5_probe.hpp"

#include <hdf5.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "swa/harness/base/h5.hpp"
#include "swa/platform/child_process.hpp"
#include "swa/platform/install_layout.hpp"

#ifndef SWA_H5_PROBE_PATH
#define SWA_H5_PROBE_PATH "swa-h5-probe"
#endif

namespace swa::h5 {
namespace {

struct Reader {
  std::uintmax_t max_bytes;
  std::string failure;
};

// Reads one object's attributes, whole.
herr_t read_attribute(hid_t object, const char* name, const H5A_info_t*, void* data) {
  auto& reader = *static_cast<Reader*>(data);
  const hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
  const hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
  const hid_t native = type < 0 ? -1 : H5Tget_native_type(type, H5T_DIR_DEFAULT);
  const hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
  const hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
  bool ok = native >= 0 && points >= 0;
  if (ok && static_cast<std::uintmax_t>(points) * H5Tget_size(native) > reader.max_bytes) {
    reader.failure = std::string("attribute ") + name + " is larger than the file can need";
    ok = false;
  } else if (ok) {
    std::vector<unsigned char> buffer(static_cast<std::size_t>(points) * H5Tget_size(native) + 1);
    ok = H5Aread(attr, native, buffer.data()) >= 0;
    if (ok && (H5Tdetect_class(native, H5T_VLEN) > 0 || H5Tis_variable_str(native) > 0))
      H5Dvlen_reclaim(native, space, H5P_DEFAULT, buffer.data());
  }
  if (!ok && reader.failure.empty()) reader.failure = std::string("attribute ") + name + " cannot be read";
  for (hid_t id : {space}) if (id >= 0) H5Sclose(id);
  for (hid_t id : {native, type}) if (id >= 0) H5Tclose(id);
  if (attr >= 0) H5Aclose(attr);
  return ok ? 0 : 1;
}

herr_t read_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto& reader = *static_cast<Reader*>(data);
  const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
  if (object < 0) {
    reader.failure = std::string("/") + name + " cannot be opened";
    return 1;
  }
  hsize_t index = 0;
  if (H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, &index, read_attribute, &reader) != 0 &&
      reader.failure.empty())
    reader.failure = std::string("/") + name + "'s attributes cannot be read";
  if (reader.failure.empty() && info->type == H5O_TYPE_DATASET) {
    const hid_t type = H5Dget_type(object);
    const hid_t native = type < 0 ? -1 : H5Tget_native_type(type, H5T_DIR_DEFAULT);
    const hid_t space = H5Dget_space(object);
    const hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (native < 0 || points < 0) {
      reader.failure = std::string("/") + name + " has no type or shape this reader takes";
    } else if (static_cast<std::uintmax_t>(points) * H5Tget_size(native) > reader.max_bytes) {
      reader.failure = std::string("/") + name + " declares more data than the file can need";
    } else {
      std::vector<unsigned char> buffer(static_cast<std::size_t>(points) * H5Tget_size(native) + 1);
      if (H5Dread(object, native, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0)
        reader.failure = std::string("/") + name + " cannot be read";
      else if (H5Tdetect_class(native, H5T_VLEN) > 0 || H5Tis_variable_str(native) > 0)
        H5Dvlen_reclaim(native, space, H5P_DEFAULT, buffer.data());
    }
    if (space >= 0) H5Sclose(space);
    if (native >= 0) H5Tclose(native);
    if (type >= 0) H5Tclose(type);
  }
  H5Oclose(object);
  return reader.failure.empty() ? 0 : 1;
}

}  // namespace

std::string probe_here(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  try {
    Handle file = open_file_readonly(path);
    if (const std::string found = indirection(file.id()); !found.empty()) return "is refused unread: " + found;
    Reader reader{max_bytes, {}};
    if (H5Ovisit2(file.id(), H5_INDEX_NAME, H5_ITER_NATIVE, read_object, &reader, H5O_INFO_BASIC) < 0 &&
        reader.failure.empty())
      return "cannot be read (its objects cannot be listed)";
    return reader.failure.empty() ? std::string() : "cannot be read: " + reader.failure;
  } catch (const std::exception& e) {
    return std::string("cannot be read (") + e.what() + ")";
  }
}

std::string probe_in_child(const std::filesystem::path& path, std::uintmax_t max_bytes, double seconds) {
  const char* env = std::getenv("SWA_H5_PROBE");
  platform::ChildSpec spec;
  spec.argv = {env && *env ? std::string(env)
                          : platform::installed_or_built(std::string(platform::kInstalledLibexec) + "/swa-h5-probe", SWA_H5_PROBE_PATH),
               path.string(), std::to_string(max_bytes)};
  spec.capture_limit = 4096;
  platform::Finished probe;
  try {
    probe = platform::run_to_end(std::move(spec), seconds);
  } catch (const std::exception& e) {
    return std::string("could not be checked: ") + e.what();
  }
  using Kind = platform::Ending::Kind;
  switch (probe.ending.kind) {
    case Kind::timed_out:
      return "did not finish reading in " + std::to_string(static_cast<long long>(seconds)) + " s";
    case Kind::killed_by_signal:
      return "crashed the HDF5 library (" + probe.ending.describe() + ")";
    case Kind::exited:
      break;
  }
  if (probe.ending.code == 0) return {};
  if (probe.ending.code == 127)
    return std::string("could not be checked: cannot run ") + spec.argv[0] + " (set SWA_H5_PROBE to its path)";
  return probe.output.empty() ? "cannot be read" : probe.output;
}

}  // namespace swa::h5
