// A call that must fail: `run(args)` throws nvfp4::jit::Error with `status` and a message
// containing `text` (the argument's name and what is wrong with it).
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "nvfp4/jit.hpp"

namespace testutil {

template <class Args, class Run>
void expect_error(const Args& args, Run run, nvfp4::jit::Status status, const char* text) {
  try {
    run(args);
    FAIL("expected an error mentioning: " << std::string(text));
  } catch (const nvfp4::jit::Error& e) {
    CAPTURE(e.what());
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(text) != std::string::npos);
  }
}

}  // namespace testutil
