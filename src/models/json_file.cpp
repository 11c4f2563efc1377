#include "models/json_file.h"

#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace kiln {

std::string file_or_in_folder(const std::string& path, const char* name) {
  namespace fs = std::filesystem;
  return fs::is_directory(path) ? (fs::path(path) / name).string() : path;
}

nlohmann::json read_json_file(const std::string& file, const char* what) {
  // a directory opens as a stream and fails only as it is read, with a std::ios_base::failure
  KILN_CHECK(!std::filesystem::is_directory(file), what, ": ", file, " is a directory, not a JSON file");
  std::ifstream in(file, std::ios::binary);
  KILN_CHECK(in.good(), what, ": cannot open ", file);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    KILN_THROW(what, ": ", file, " is not valid JSON: ", e.what());
  } catch (const std::ios_base::failure& e) {
    KILN_THROW(what, ": cannot read ", file, ": ", e.what());
  }
}

bool json_bool(const nlohmann::json& j, const char* key, bool dflt, const char* what, const std::string& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  KILN_CHECK(j[key].is_boolean(), what, ": ", file, ": '", key, "' must be true or false, got ", j[key].dump());
  return j[key].get<bool>();
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& dflt, const char* what,
                        const std::string& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  KILN_CHECK(j[key].is_string(), what, ": ", file, ": '", key, "' must be a string, got ", j[key].dump());
  return j[key].get<std::string>();
}

}  // namespace kiln
