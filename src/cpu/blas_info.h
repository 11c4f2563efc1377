// What OpenBLAS this process runs, for `kiln doctor`: its build and the kernels
// it picked for this CPU when it loaded (OPENBLAS_CORETYPE overrides the pick).
#pragma once

#include <string>

namespace kiln::cpu {

std::string openblas_config();    // "OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... USE_OPENMP ..."
std::string openblas_corename();  // "Haswell", "SkylakeX", ...

}  // namespace kiln::cpu
