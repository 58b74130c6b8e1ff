#include "mrf/io/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "mrf/types.h"

namespace mrf {

std::string ReadWholeFile(const std::string& path, const char* what) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error(std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno));
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    const std::size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.append(chunk, got);
    if (got < sizeof chunk) break;
  }
  if (std::ferror(file.get())) throw Error(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
  return bytes;
}

}  // namespace mrf
