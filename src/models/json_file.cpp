#include "models/json_file.h"

#include <cmath>
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

int64_t json_int(const nlohmann::json& j, const char* key, int64_t dflt, int64_t min, const char* what,
                 const std::string& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  const auto& v = j[key];
  // an unsigned past int64's range is not a number_integer that get<int64_t> keeps
  const bool fits = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX);
  if (fits && v.get<int64_t>() >= min) return v.get<int64_t>();
  const std::string range = min == 0   ? "a non-negative integer"
                            : min == 1 ? "a positive integer"
                                       : "an integer >= " + std::to_string(min);
  KILN_THROW(what, ": ", file, ": '", key, "' must be ", range, ", got ", v.dump());
}

double json_number(const nlohmann::json& j, const char* key, double dflt, const char* what, const std::string& file) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  const auto& v = j[key];
  KILN_CHECK(v.is_number() && std::isfinite(v.get<double>()), what, ": ", file, ": '", key,
             "' must be a finite number, got ", v.dump());
  return v.get<double>();
}

}  // namespace kiln
