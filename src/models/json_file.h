// Reading the JSON files of a model folder, with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

// `path` itself, or `path`/`name` when path is a folder (a model folder).
std::string file_or_in_folder(const std::string& path, const char* name);
// The parsed file; "<what>: cannot open F" or "<what>: F is not valid JSON: ..." otherwise.
nlohmann::json read_json_file(const std::string& file, const char* what);

}  // namespace kiln
