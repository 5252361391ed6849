// Output files: checked before a run starts, written whole or not at all.
//
// Every command that writes checks its outputs first (check_output_file, check_output_directory),
// so a missing or read-only directory, or a directory where a file is expected, is an error before
// any tracking starts. Files are written to a temporary file in the same directory and renamed over
// the target (write_file_atomically, commit_temporary): a reader never sees a half-written file and
// a run that fails leaves the previous output as it was.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

namespace ft {

/// Refuses, with an InputError naming `option`, an output file that cannot be written: its directory
/// is missing, is not a directory or is not writable (probed by creating and removing a file there),
/// or the path is a directory.
void check_output_file(const std::string& path, const std::string& option);

/// Refuses an output directory that is a file, exists but is not writable, or cannot be created
/// because its nearest existing ancestor is not a writable directory.
void check_output_directory(const std::string& directory, const std::string& option);

/// A temporary file name, unique to this process and call, in the directory of `path`.
std::string temporary_path_for(const std::string& path);

/// Renames the finished temporary file `tmp` over `path`; on failure removes `tmp` and throws an
/// Error naming `path`.
void commit_temporary(const std::string& tmp, const std::string& path);

/// Writes `path` through `writer` into a temporary file in the same directory, then renames it over
/// `path`. If the writer throws or a write fails, the temporary file is removed, `path` is left as it
/// was, and an Error names `path`.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& writer,
                           bool binary = false);
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace ft
