#include "cpu/blas_info.h"

#include <cblas.h>

namespace kiln::cpu {

std::string openblas_config() {
  const char* config = openblas_get_config();
  return config ? config : "";
}

std::string openblas_corename() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

}  // namespace kiln::cpu
