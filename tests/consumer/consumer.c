#include <nvfp4/jit.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  nvfp4_dequantize_args args;
  memset(&args, 0, sizeof args);
  args.k = 24;
  if (nvfp4_jit_dequantize(&args, NULL) != NVFP4_INVALID_ARGUMENT) return 1;
  printf("C API: %s\n", nvfp4_jit_last_error());
  return strstr(nvfp4_jit_last_error(), "k = 24") ? 0 : 1;
}
