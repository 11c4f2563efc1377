// The whole public API of kiln.
#pragma once

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/linalg.h"
#include "kiln/memory.h"
#include "kiln/ops.h"
#include "kiln/scalar_types.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"
