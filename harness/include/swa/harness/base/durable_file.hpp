#pragma once
// Writing a whole file so that a reader (or a power loss) never sees half of it: the bytes go to
// PATH.tmp.PID, are fsynced, renamed over PATH, and the folder is fsynced. Any failure (a full
// disk) throws std::runtime_error naming PATH and the cause, removes the temporary, and leaves an
// existing PATH as it was. Results files, JUnit XML and the in-flight marker are written this way.
// Durable writes of 16 MiB or more from page-aligned memory bypass the page cache (O_DIRECT).
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace swa::harness {

// `durable` = false skips the fsyncs (a marker that only matters while the process lives).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool durable = true);

// The temporary write_file_atomically uses for `path` in this process (an interrupt removes it).
std::filesystem::path temporary_for(const std::filesystem::path& path);

// Removes PATH.tmp.PID files left by processes that no longer run (killed while writing); returns
// how many. Temporaries of live processes are left alone.
int remove_orphaned_temporaries(const std::filesystem::path& path);

// The whole of a small file written by someone else (a task's end record, a submission's record):
// throws std::runtime_error naming PATH when it is not a regular file (a FIFO is refused unopened,
// not read forever), cannot be read, or holds more than `max_bytes`.
std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace swa::harness
