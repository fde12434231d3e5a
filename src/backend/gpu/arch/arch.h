// Selects the per-target table: one file per target, no #ifdefs inside kernels.
#pragma once
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#include "backend/gpu/arch/gfx906.h"
#else
#include "backend/gpu/arch/nvidia.h"
#endif
