#pragma once
// What every mrf program shares: one-line errors with a non-zero exit, and progress on stderr.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mrf/device.h"
#include "mrf/options.h"

namespace mrf::app {

/// Milliseconds of wall clock since `start`.
double MsSince(std::chrono::steady_clock::time_point start);

/// Parses the command line, with --threads N added to `cli` (every TBB loop of the run on at most N
/// threads; 0, the default, leaves TBB's choice), runs `body` and turns any failure into
/// "NAME: error: MESSAGE" on stderr.
/// Exit codes: 0 success, 1 bad input or failed solve (conflicting options found by `body` included),
/// 2 a command line the option parser or its validators reject (the message ends with "(see --help)").
int Run(const std::string& program, int argc, char** argv, CLI::App& cli, const std::function<int()>& body);

/// Prints "NAME: MESSAGE" (OneLine) to stderr unless quiet; for progress on long runs.
void Progress(const std::string& program, const std::string& message);

/// Sets whether Progress() prints (programs turn it off with --quiet or --json).
void SetQuiet(bool quiet);

/// Option check: a finite number >= 0 ("--time-limit: must be a finite number >= 0 (got nan)"). Unlike
/// CLI::NonNegativeNumber it rejects NaN and infinity and gives a short message; on integer options
/// (seeds) it rejects the negative values that would otherwise wrap around.
CLI::Validator FiniteNonNegative();

/// Option check: a finite number > 0 ("--sigma: must be a finite number > 0 (got 0)"): CLI::PositiveNumber's
/// message prints the largest double in full.
CLI::Validator FinitePositive();

/// The registry's solvers (every one, or those computing `only`) as a JSON array, one object each: name,
/// algorithm, device, priority, compiled_in, available, unavailable_reason (null when available) and
/// summary. What --list-solvers and --list-backends print with --json.
std::string RegistryJson(std::optional<Algorithm> only);

/// A file a program reads or writes, with the option (or argument) that names it; empty paths are skipped.
struct NamedFile {
  std::string option;
  std::string path;
};
/// Checks the outputs before any work: throws mrf::Error when one cannot be written ("-o: folder 'no' does
/// not exist", "... is a folder, not a file", "cannot write 'x': Permission denied"), or names the same file
/// as an input or as another output ("-o: 'left.png' is also LEFT: the output would overwrite it"). Paths
/// are compared as files (links and "./" resolved); devices such as /dev/null may be named twice.
void CheckOutputs(const std::vector<NamedFile>& inputs, const std::vector<NamedFile>& outputs);

/// Where writing `path` puts the file: `path` itself, or, when it is a symbolic link, the end of its chain
/// of links (a dangling link creates its target). Relative targets are taken from the link's folder and
/// the result is not made absolute. Stops after 40 links: a loop gives one of its own links (status()
/// reports ELOOP for those; CheckOutputs refuses them).
std::filesystem::path WhereNewFileGoes(const std::string& path);

/// Whether `ec`, from looking a path up, says the path may exist but cannot be looked at (a folder above
/// it that cannot be searched, say), rather than that it is not there: such a folder is "cannot reach",
/// not "does not exist".
bool CannotLookUp(const std::error_code& ec);

/// Throws mrf::Error when an output path that does not exist yet names a folder: it ends in a separator,
/// "." or ".." ("out/", "out/."), or is a dangling link to such a path. Writing it would fail, and a program that creates
/// folders for its outputs would first create that one. CheckOutputs calls it.
void RefuseFolderName(const NamedFile& out);

/// `text` with its control characters (a path's newline, say) shown as '?', so that a report line
/// naming a path stays one line. Only ASCII controls (bytes below 0x20, and 0x7f) are replaced: bytes
/// from 0x80 up belong to UTF-8 names.
std::string OneLine(std::string text);

/// Prints "NAME: error: MESSAGE" on stderr as one line (OneLine).
void PrintError(const std::string& program, const std::string& message);

/// `j` as JSON text (compact, or indented by `indent`); bytes that are not UTF-8 (in paths) become U+FFFD.
std::string JsonText(const nlohmann::json& j, int indent = -1);

/// Starts the GPU's context in the background (CudaStartInBackground) when the solve may run there:
/// `solver` is "auto" and `device` is not "cpu", or `solver` names a CUDA solver. Null otherwise. A
/// program holds it while it reads its input.
std::unique_ptr<CudaStartInBackground> StartGpuIfUsed(const std::string& solver, const std::string& device = "auto");

}  // namespace mrf::app
