#pragma once
/// @file read_file.h
/// @brief Reading a whole file into memory with one-line errors (shared by the image and model readers).

#include <string>

namespace mrf {

/// The bytes of the file at `path`. A missing file and a read error (a folder, an I/O error) throw
/// mrf::Error naming `what`, the file and the system's reason, e.g.
/// "cannot open image 'x': No such file or directory".
std::string ReadWholeFile(const std::string& path, const char* what);

}  // namespace mrf
