/* A counting NVRTC for the shared-cache test: appends one line per nvrtcCompileProgram call (the
 * library's only way to compile a kernel) to $NVRTC_COUNT_FILE, then calls the real one. The
 * library loads NVRTC itself (dlopen) and resolves its functions from that handle, so the shim is
 * given to it as the NVRTC: NVFP4_JIT_NVRTC=nvrtc_count.so, built linked to the real libnvrtc
 * (whose other functions the handle's lookup then finds behind this one):
 *   cc -shared -fPIC -O2 -o nvrtc_count.so nvrtc_count.c -ldl -Wl,--no-as-needed /path/libnvrtc.so.13 \
 *      -Wl,-rpath,/path */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char* const* options) {
  typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char* const*);
  static compile_fn real;
  if (!real) real = (compile_fn)dlsym(RTLD_NEXT, "nvrtcCompileProgram");
  if (!real) { /* NVRTC loaded into a local scope (a dlopen'ed extension's dependency): ask it */
    static const char* const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (unsigned i = 0; !real && i < sizeof names / sizeof *names; ++i) {
      void* h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
      if (h) real = (compile_fn)dlsym(h, "nvrtcCompileProgram");
    }
  }
  if (!real) {
    fprintf(stderr, "nvrtc_count: no nvrtcCompileProgram to forward to\n");
    abort();
  }
  const char* path = getenv("NVRTC_COUNT_FILE");
  if (path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      char line[32];
      int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
      if (write(fd, line, (size_t)n) != n) perror("nvrtc_count");
      close(fd);
    }
  }
  return real(prog, num_options, options);
}
