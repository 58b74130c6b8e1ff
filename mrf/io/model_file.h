#pragma once
/// @file model_file.h
/// @brief Saving and loading an mrf::Model (format documented in docs/model_format.md).
///
/// A versioned little-endian binary format with a checksum: users exchange problems with it and
/// mrf-bench / mrf-solve replay them. Readers check every size against the file before allocating,
/// so a corrupt or hostile file ends in a one-line mrf::Error, never a crash or a huge allocation.

#include <iosfwd>
#include <string>

#include "mrf/model.h"

namespace mrf {

/// Current version written by SaveModel.
constexpr std::uint32_t kModelFileVersion = 2;
/// Oldest version LoadModel() still reads. Version 1 is version 2 with another checksum: its FNV-1a
/// started from an offset basis a digit short of the standard one (docs/model_format.md).
constexpr std::uint32_t kOldestModelFileVersion = 1;

/// Writes `model` (validated first) to a file; throws mrf::Error on failure.
void SaveModel(const Model& model, const std::string& path);
/// Writes `model` to a stream.
void SaveModel(const Model& model, std::ostream& out);
/// Reads a model from a file; throws mrf::Error naming the file and the problem.
Model LoadModel(const std::string& path);
/// Reads a model from memory (used by the fuzz target); `name` appears in error messages.
Model LoadModelFromBytes(const std::string& bytes, const std::string& name);

}  // namespace mrf
