// Shared conventions for gpubench's C++ shims over libtorch.
//
// Every function that can fail returns a heap-allocated error message (free it
// with gb_free_error) or NULL on success. C++ exceptions never cross into Rust.
#pragma once
#include <cstdlib>
#include <cstring>
#include <exception>

inline char* gb_strdup(const char* s) {
  size_t n = std::strlen(s);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out) std::memcpy(out, s, n + 1);
  return out;
}

#define GB_TRY try {
#define GB_CATCH                                                   \
  }                                                                \
  catch (const std::exception& e) {                                \
    return gb_strdup(e.what());                                    \
  }                                                                \
  catch (...) {                                                    \
    return gb_strdup("unknown C++ exception");                     \
  }                                                                \
  return nullptr;
