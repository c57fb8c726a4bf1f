// The context a call runs in (CallDevice's rule), as a table; GPU cases in
// tests/gpu/test_gpu_ensure_loaded.cpp.
#include <doctest/doctest.h>

#include "core/launcher.hpp"

using namespace nvfp4::jit::detail;

TEST_SUITE("launcher") {
  TEST_CASE("a call runs in its stream's context") {
    struct Case {
      const char* what;
      bool has_current, legacy, owner_is_current;
      ContextRule expected;
    };
    const Case cases[] = {
        {"current context, its own stream", true, false, true, {ContextRule::current, false, false}},
        {"current context, the legacy stream", true, true, false, {ContextRule::current, false, false}},
        {"current context, another context's stream", true, false, false, {ContextRule::stream_owner, false, true}},
        {"no context, a stream", false, false, false, {ContextRule::stream_owner, true, false}},
        {"no context, the legacy stream", false, true, false, {ContextRule::primary_of_device_0, true, false}},
    };
    for (const Case& c : cases) {
      INFO(c.what);
      const ContextRule got = context_rule(c.has_current, c.legacy, c.owner_is_current);
      CHECK(int(got.source) == int(c.expected.source));
      CHECK(got.adopt == c.expected.adopt);
      CHECK(got.push == c.expected.push);
    }
  }

  TEST_CASE("the legacy streams are null, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD") {
    CHECK(is_legacy_stream(nullptr));
    CHECK(is_legacy_stream(CU_STREAM_LEGACY));
    CHECK(is_legacy_stream(CU_STREAM_PER_THREAD));
    CHECK_FALSE(is_legacy_stream(reinterpret_cast<CUstream>(uintptr_t(0x1000))));
  }
}
