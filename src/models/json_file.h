// Reading the JSON files of a model folder, with errors that name the file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

// `path` itself, or `path`/`name` when path is a folder (a model folder).
std::string file_or_in_folder(const std::string& path, const char* name);
// The parsed file; "<what>: cannot open F" or "<what>: F is not valid JSON: ..." otherwise.
nlohmann::json read_json_file(const std::string& file, const char* what);

// Field `key` of the object `j` read from `file`: `dflt` when it is absent or null, else
// it must be of the type asked for ("<what>: F: 'key' must be a boolean"); nlohmann's
// own value() would throw its type_error, which is not a kiln::Error.
bool json_bool(const nlohmann::json& j, const char* key, bool dflt, const char* what, const std::string& file);
std::string json_string(const nlohmann::json& j, const char* key, const std::string& dflt, const char* what,
                        const std::string& file);
// An integer >= min ("'key' must be a positive integer, got ..." for min 1).
int64_t json_int(const nlohmann::json& j, const char* key, int64_t dflt, int64_t min, const char* what,
                 const std::string& file);
// A finite number; the caller checks its range.
double json_number(const nlohmann::json& j, const char* key, double dflt, const char* what, const std::string& file);

}  // namespace kiln
