#include "mrf/io/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>

#include "mrf/types.h"

namespace mrf {

std::string ReadWholeFile(const std::string& path, const char* what, const std::string& magic) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error(std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno));
  // A regular file ends where its size says; anything else (a device such as /dev/zero, a pipe) could
  // stream forever, so it is read up to a bound.
  struct stat info {};
  const bool regular = fstat(fileno(file.get()), &info) == 0 && S_ISREG(info.st_mode);
  constexpr std::size_t kStreamLimit = std::size_t{1} << 30;
  std::string bytes;
  if (regular) bytes.reserve(static_cast<std::size_t>(info.st_size));
  char chunk[1 << 16];
  for (;;) {
    const std::size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.append(chunk, got);
    if (got < sizeof chunk) break;
    if (bytes.size() == got && bytes.compare(0, magic.size(), magic) != 0) break;  // not such a file: stop
    if (!regular && bytes.size() > kStreamLimit)
      throw Error(std::string("cannot read ") + what + " '" + path + "': not a regular file, and longer than 1 GiB");
  }
  if (std::ferror(file.get())) throw Error(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
  return bytes;
}

void WriteWholeFile(const std::string& path, const std::string& bytes, const char* what) {
  auto fail = [&] { throw Error(std::string("cannot write ") + what + " '" + path + "': " + std::strerror(errno ? errno : EIO)); };
  errno = 0;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) fail();
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size() && std::fflush(file) == 0;
  const int saved = errno;
  if (std::fclose(file) != 0 || !written) {
    if (!written) errno = saved;
    fail();
  }
}

}  // namespace mrf
