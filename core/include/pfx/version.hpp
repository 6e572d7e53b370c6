#pragma once

/// \file
/// pfx's version. A plain header, so that core/include copied alone is the whole library; the
/// top-level CMakeLists.txt stops at configure time unless these equal its project(VERSION).

#define PFX_VERSION_MAJOR 0
#define PFX_VERSION_MINOR 1
#define PFX_VERSION_PATCH 0
#define PFX_VERSION_STRING "0.1.0"
