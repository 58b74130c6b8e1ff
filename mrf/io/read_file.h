#pragma once
/// @file read_file.h
/// @brief Reading and writing a whole file with one-line errors (shared by the readers and the writers).

#include <string>

namespace mrf {

/// The bytes of the file at `path`. A missing file and a read error (a folder, an I/O error) throw
/// mrf::Error naming `what`, the file and the system's reason, e.g.
/// "cannot open image 'x': No such file or directory". A path that is not a regular file (a pipe, a
/// device) is read up to 1 GiB; longer is an error. With `magic`, reading stops at the first chunk when
/// the file does not start with it (the caller's parser then refuses the bytes read), so that a wrong
/// file, /dev/zero say, is not read whole first.
std::string ReadWholeFile(const std::string& path, const char* what, const std::string& magic = "");

/// Writes `bytes` to the file at `path` (created or truncated), checking every step up to closing the
/// file, so a full disk or a device that refuses writes is an error, not a silently short file. Throws
/// mrf::Error, e.g. "cannot write PNG 'x.png': No space left on device".
void WriteWholeFile(const std::string& path, const std::string& bytes, const char* what);

}  // namespace mrf
