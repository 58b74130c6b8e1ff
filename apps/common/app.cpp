#include "common/app.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "mrf/types.h"

namespace mrf::app {

namespace {
bool g_quiet = false;
}

void SetQuiet(bool quiet) { g_quiet = quiet; }

void Progress(const std::string& program, const std::string& message) {
  if (!g_quiet) std::fprintf(stderr, "%s: %s\n", program.c_str(), message.c_str());
}

CLI::Validator FiniteNonNegative() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0)
          return "must be a finite number >= 0 (got '" + text + "')";
        return {};
      },
      "NUMBER >= 0");
}

int Run(const std::string& program, int argc, char** argv, CLI::App& cli, const std::function<int()>& body) {
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", program.c_str(), e.what());
    return 2;
  }
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", program.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  }
  return 1;
}

}  // namespace mrf::app
