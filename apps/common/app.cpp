#include "common/app.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "mrf/config.h"
#include "mrf/model.h"
#include "mrf/registry.h"
#include "mrf/threads.h"
#include "mrf/types.h"

namespace mrf::app {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

namespace {
bool g_quiet = false;

// CLI11 names a negatable flag "--x,--no-x{false}" in the help; users type "--no-x", so the help says that.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(option, is_positional);
    for (std::size_t open = name.find('{'); open != std::string::npos; open = name.find('{', open)) {
      const std::size_t close = name.find('}', open);
      if (close == std::string::npos) break;
      name.erase(open, close - open + 1);
    }
    return name;
  }
};

// CLI11's "--x: At Most 1 required but received 2" for an option given twice, in the users' words.
std::string ArgumentCountMessage(const std::string& text) {
  const std::string at_most = ": At Most ", required = " required but received ";
  const std::size_t a = text.find(at_most), r = text.find(required);
  if (a == std::string::npos || r == std::string::npos || r < a) return text;
  const std::string most = text.substr(a + at_most.size(), r - a - at_most.size());
  return text.substr(0, a) + ": takes " + (most == "1" ? "one value" : "at most " + most + " values") + " but got " +
         text.substr(r + required.size()) + " (given more than once?)";
}
}  // namespace

void SetQuiet(bool quiet) { g_quiet = quiet; }

std::string RegistryJson(std::optional<Algorithm> only) {
  const Registry& registry = Registry::Global();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const SolverEntry& e : registry.entries()) {
    if (only && e.algorithm != *only) continue;
    std::string why;
    const bool available = registry.IsAvailable(e.name, &why);
    list.push_back({{"name", e.name},
                    {"algorithm", ToString(e.algorithm)},
                    {"device", ToString(e.device)},
                    {"priority", e.priority},
                    {"compiled_in", e.compiled_in},
                    {"available", available},
                    {"unavailable_reason", available ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(why)},
                    {"summary", e.summary}});
  }
  return JsonText(list);
}

std::unique_ptr<CudaStartInBackground> StartGpuIfUsed(const std::string& solver, const std::string& device) {
  if (!CudaCompiledIn()) return nullptr;
  const SolverEntry* entry = Registry::Global().Find(solver);
  const bool may_use_gpu = solver == "auto" ? device != "cpu" : entry && entry->device == Device::kCuda;
  return may_use_gpu ? std::make_unique<CudaStartInBackground>() : nullptr;
}

void Progress(const std::string& program, const std::string& message) {
  if (!g_quiet) std::fprintf(stderr, "%s: %s\n", program.c_str(), OneLine(message).c_str());
}

namespace {

// A finite number >= 0, or > 0 when `positive`; the message names the bound.
CLI::Validator FiniteNumber(bool positive) {
  const std::string bound = positive ? "> 0" : ">= 0";
  return CLI::Validator(
      [positive, bound](const std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0 || (positive && value == 0))
          return "must be a finite number " + bound + " (got '" + text + "')";
        return {};
      },
      "NUMBER " + bound);
}

}  // namespace

CLI::Validator FiniteNonNegative() { return FiniteNumber(false); }

CLI::Validator FinitePositive() { return FiniteNumber(true); }

namespace {

// CLI11 reads integers with strtoll(text, ..., 0), so "010" would be 8 and "0x10" 16, and a value beyond
// the 64-bit range is clamped to it. An integer option takes a plain decimal number: checked here on the
// text given, after the parse (a check added to the option would run after its Range check).
// Numbers with a fraction are read by strtod, which also takes hexadecimal ("0x1p3"): refused too, so
// that every number is written one way. Empty texts are refused as well.
void CheckOptionValues(const CLI::App& cli) {
  for (const CLI::Option* option : cli.get_options()) {
    const std::string type = option->get_type_name();
    // An empty text ('' for a path) is a mistake, not "not given": it would quietly run the default input.
    if (type.rfind("TEXT", 0) == 0)
      for (const std::string& text : option->results())
        if (text.empty()) throw CLI::ValidationError(option->get_name(), "is empty");
    if (type.rfind("FLOAT", 0) == 0) {
      for (const std::string& text : option->results()) {
        if (text.find_first_of("xX") != std::string::npos)  // (strtod skips leading blanks: " 0x10")
          throw CLI::ValidationError(option->get_name(), "must be a decimal number (got '" + PrintableText(text) + "')");
      }
      continue;
    }
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (!is_unsigned && type.rfind("INT", 0) != 0) continue;
    for (const std::string& text : option->results()) {
      const std::size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
      bool decimal = text.size() > digits && (text[digits] != '0' || text.size() == digits + 1);
      for (std::size_t i = digits; decimal && i < text.size(); ++i) decimal = text[i] >= '0' && text[i] <= '9';
      if (!decimal)
        throw CLI::ValidationError(option->get_name(), "must be a decimal integer without leading zeros (got '" + text + "')");
      errno = 0;
      if (is_unsigned) (void)std::strtoull(text.c_str(), nullptr, 10);
      else (void)std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) throw CLI::ValidationError(option->get_name(), "out of range (got '" + text + "')");
    }
  }
}

}  // namespace

int Run(const std::string& program, int argc, char** argv, CLI::App& cli, const std::function<int()>& body) {
  cli.footer(
      "\nEnvironment (engine tunings and fault injection, for measurements and tests; docs/environment.md):\n"
      "  MRF_PR_TUNING=name=value,...              push-relabel engines (tbb-pr, cuda-pr, cuda-expansion, cuda-swap)\n"
      "  MRF_CUDA_EXPANSION_TUNING=name=value,...  cuda-expansion and cuda-swap\n"
      "  MRF_BP_CUDA_LAUNCH, MRF_BP_CUDA_KERNEL, MRF_BP_LABELS_PER_LANE  cuda-bp's launch mode, kernel, lanes\n"
      "  MRF_BP_CUDA_MAIL=0|1                      cuda-bp's handoff between tile columns (1: mailbox)\n"
      "  MRF_BP_CUDA_SETUP=device|host             cuda-bp's coarse levels and buffers (host: the older setup)\n"
      "  MRF_CUDA_UPLOAD=staged|pageable           GPU uploads through a pinned buffer, or plain copies\n"
      "  MRF_CUDA_DEBUG_SYNC=1, MRF_INJECT_CUDA_FAULT=oom|launch|nodevice  debugging and fault tests\n"
      "  MRF_CUDA_KEPT_POISON=1                    GPU memory kept between solves handed out as 0xff bytes (tests)");
  cli.formatter(std::make_shared<HelpFormatter>());
  cli.set_version_flag("--version",
                       program + " (mrf " + MRF_VERSION + ", " +
                           (MRF_HAVE_CUDA ? "CUDA backends compiled in" : "CPU-only build") + ")",
                       "Print the program's version and whether this build has the CUDA backends, and exit");
  int threads = 0;
  cli.add_option("--threads", threads,
                 "CPU threads for the run's parallel loops (0 = every core; more than the cores = every core)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  try {
    cli.parse(argc, argv);
    CheckOptionValues(cli);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ConversionError& e) {
    // CLI11 says "Could not convert: NAME = VALUE" both for words and for numbers too large for the
    // option's type: name the type instead.
    const std::string text = e.what(), prefix = "Could not convert: ";
    const std::size_t equals = text.find(" = ");
    std::string type;
    if (text.rfind(prefix, 0) == 0 && equals != std::string::npos) {
      const std::string name = text.substr(prefix.size(), equals - prefix.size()), value = text.substr(equals + 3);
      try {
        type = cli.get_option(name)->get_type_name();
        type = type.substr(0, type.find(':'));
      } catch (const CLI::Error&) {
      }
      const std::string kind = type == "INT"     ? "an integer"
                               : type == "UINT"  ? "a non-negative integer"
                               : type == "FLOAT" ? "a number"
                                                 : "";
      if (!kind.empty()) {
        PrintError(program, name + ": '" + value + "' is not " + kind + ", or is out of its range (see --help)");
        return 2;
      }
    }
    PrintError(program, std::string(e.what()) + " (see --help)");
    return 2;
  } catch (const CLI::ArgumentMismatch& e) {
    PrintError(program, ArgumentCountMessage(e.what()) + " (see --help)");
    return 2;
  } catch (const CLI::ParseError& e) {
    PrintError(program, std::string(e.what()) + " (see --help)");
    return 2;
  }
  auto guarded = [&]() -> int {
    try {
      return body();
    } catch (const std::bad_alloc&) {
      PrintError(program, "out of memory");
    } catch (const std::exception& e) {
      PrintError(program, e.what());
    }
    return 1;
  };
  // Every TBB loop of the run, the model's construction included, on at most `threads` threads.
  int status = 1;
  RunOnThreads(threads, [&] { status = guarded(); });
  // A report that could not be written (a full disk, a closed pipe) is a failure, not a silent exit 0.
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed || std::ferror(stdout)) {
    const int code = errno;
    PrintError(program, std::string("cannot write to standard output") + (code ? ": " + std::string(std::strerror(code)) : ""));
    return 1;
  }
  return status;
}

std::string OneLine(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

void PrintError(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", program.c_str(), OneLine(message).c_str());
}

std::string JsonText(const nlohmann::json& j, int indent) {
  // Paths need not be UTF-8: invalid bytes are shown as U+FFFD rather than failing the report.
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::filesystem::path WhereNewFileGoes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path where = path;  // not made absolute: a message then shows the folder relative to where the user is
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(where, ec)); ++hops) {
    const fs::path target = fs::read_symlink(where, ec);
    if (ec) break;
    where = target.is_absolute() ? target : where.parent_path() / target;
  }
  return where;
}

namespace {

// Which file a path names. An existing one is compared by identity (device and inode: links and other
// spellings of it are the same file); a new one by where it would be created (dangling links followed).
struct FileIdentity {
  bool exists = false;
  std::filesystem::path path;
};

// False for paths that are not regular files or new ones (devices, pipes): those may repeat.
bool Identify(const std::string& path, FileIdentity* id) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status)) {
    if (!std::filesystem::is_regular_file(status)) return false;
    *id = {true, path};
    return true;
  }
  const std::filesystem::path where = std::filesystem::absolute(WhereNewFileGoes(path), ec);
  *id = {false, std::filesystem::weakly_canonical(where, ec)};
  return !ec;
}

bool SameFile(const FileIdentity& a, const FileIdentity& b) {
  if (a.exists != b.exists) return false;
  std::error_code ec;
  return a.exists ? std::filesystem::equivalent(a.path, b.path, ec) : a.path == b.path;
}

}  // namespace

bool CannotLookUp(const std::error_code& ec) {
  return ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory;
}

void RefuseFolderName(const NamedFile& out) {
  // "out/", "out/." or "out/..", or a dangling link to one, names a folder that does not exist yet: no
  // file can be written there.
  const std::filesystem::path where = WhereNewFileGoes(out.path);
  const std::filesystem::path name = where.filename();
  if ((name.empty() || name == "." || name == "..") && !out.path.empty())
    throw Error(out.option + ": '" + out.path + "' names a folder, not a file" +
                (where.string() != out.path ? " (the link points to '" + where.string() + "')" : ""));
}

// A new file needs a folder that exists and can be written; an existing one, write permission. Devices
// (/dev/null, /dev/stdout) pass.
void CheckWritable(const NamedFile& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(out.path, ec);
  if (ec == std::errc::too_many_symbolic_link_levels)  // a loop of links: the write would fail after the solve
    throw Error(out.option + ": cannot write '" + out.path + "': " + std::strerror(ELOOP));
  if (fs::is_directory(status)) throw Error(out.option + ": '" + out.path + "' is a folder, not a file");
  const bool exists = fs::exists(status);
  if (exists && !fs::is_regular_file(status)) return;
  RefuseFolderName(out);
  fs::path parent = fs::path(out.path).parent_path();
  // A dangling link creates its target: that target's folder must exist.
  const bool dangling_link = !exists && fs::is_symlink(fs::symlink_status(out.path, ec));
  if (dangling_link) parent = WhereNewFileGoes(out.path).parent_path();
  if (parent.empty()) parent = ".";
  const std::string via = dangling_link ? " (the link '" + out.path + "' points into it)" : "";
  std::error_code parent_ec;
  if (!exists && !fs::is_directory(parent, parent_ec)) {
    if (CannotLookUp(parent_ec))  // a folder that may exist, but cannot be searched, is not a missing one
      throw Error(out.option + ": cannot reach folder '" + parent.string() + "': " + parent_ec.message() + via);
    throw Error(out.option + (fs::exists(parent, ec) ? ": '" + parent.string() + "' is not a folder" + via
                                                     : ": folder '" + parent.string() + "' does not exist" + via));
  }
  if (::access(exists ? out.path.c_str() : parent.c_str(), exists ? W_OK : W_OK | X_OK) != 0)
    throw Error(out.option + ": cannot write '" + out.path + "': " + std::strerror(errno));
}

void CheckOutputs(const std::vector<NamedFile>& inputs, const std::vector<NamedFile>& outputs) {
  for (const NamedFile& out : outputs)
    if (!out.path.empty()) CheckWritable(out);
  std::vector<std::pair<const NamedFile*, FileIdentity>> seen;
  for (const NamedFile& f : inputs) {  // a missing input is left to the reader's own message
    FileIdentity file;
    if (!f.path.empty() && Identify(f.path, &file) && file.exists) seen.emplace_back(&f, file);
  }
  const std::size_t num_inputs = seen.size();
  for (const NamedFile& out : outputs) {
    FileIdentity file;
    if (out.path.empty() || !Identify(out.path, &file)) continue;
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (SameFile(seen[i].second, file))
        throw Error(out.option + ": '" + out.path + "' is also " + seen[i].first->option +
                    (i < num_inputs ? ": the output would overwrite it" : ": give each output its own file"));
    seen.emplace_back(&out, file);
  }
}

}  // namespace mrf::app
