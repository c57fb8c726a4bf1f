// Binaries for a manylinux_2_28 wheel, linked on a newer glibc (cmake/portable.cmake): the
// glibc functions that got a new symbol version after 2.28 (pthread_* and dl* moved into libc
// in 2.34, stat* became real functions in 2.33, exp/log/pow lost their SVID wrappers in 2.29)
// are bound here to the version every glibc since 2.2.5 exports. The linker's --wrap sends
// every reference to them, those in the static libstdc++ included, to the __wrap_ functions
// below, which call the old version.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>

#define NVFP4_OLD_VERSION(local, symbol, version) __asm__(".symver " #local ", " #symbol "@" version)
#define NVFP4_WRAP __attribute__((visibility("hidden")))

extern "C" {
// The forwarders: `ret name(params)` calling `name`'s version `version`; most are GLIBC_2.2.5,
// the first version of x86_64.
#define NVFP4_FORWARD_VERSION(version, ret, name, params, args) \
  ret nvfp4_old_##name params;                                  \
  NVFP4_OLD_VERSION(nvfp4_old_##name, name, version);           \
  NVFP4_WRAP ret __wrap_##name params { return nvfp4_old_##name args; }
#define NVFP4_FORWARD(ret, name, params, args) NVFP4_FORWARD_VERSION("GLIBC_2.2.5", ret, name, params, args)

NVFP4_FORWARD(int, pthread_create, (pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* p), (t, a, f, p))
NVFP4_FORWARD(int, pthread_join, (pthread_t t, void** r), (t, r))
NVFP4_FORWARD(int, pthread_detach, (pthread_t t), (t))
NVFP4_FORWARD(int, pthread_once, (pthread_once_t* o, void (*f)(void)), (o, f))
NVFP4_FORWARD(int, pthread_key_create, (pthread_key_t* k, void (*d)(void*)), (k, d))
NVFP4_FORWARD(int, __pthread_key_create, (pthread_key_t* k, void (*d)(void*)), (k, d))
NVFP4_FORWARD(int, pthread_key_delete, (pthread_key_t k), (k))
NVFP4_FORWARD(void*, pthread_getspecific, (pthread_key_t k), (k))
NVFP4_FORWARD(int, pthread_setspecific, (pthread_key_t k, const void* v), (k, v))
NVFP4_FORWARD(int, pthread_rwlock_rdlock, (pthread_rwlock_t* l), (l))
NVFP4_FORWARD(int, pthread_rwlock_wrlock, (pthread_rwlock_t* l), (l))
NVFP4_FORWARD(int, pthread_rwlock_unlock, (pthread_rwlock_t* l), (l))
NVFP4_FORWARD(void*, dlopen, (const char* f, int m), (f, m))
NVFP4_FORWARD(void*, dlsym, (void* h, const char* s), (h, s))
NVFP4_FORWARD(char*, dlerror, (void), ())
NVFP4_FORWARD(int, dlclose, (void* h), (h))
NVFP4_FORWARD(int, dladdr, (const void* a, Dl_info* i), (a, i))
NVFP4_FORWARD_VERSION("GLIBC_2.3.3", int, dladdr1, (const void* a, Dl_info* i, void** e, int f), (a, i, e, f))
NVFP4_FORWARD_VERSION("GLIBC_2.3.3", int, dlinfo, (void* h, int r, void* a), (h, r, a))
NVFP4_FORWARD(double, exp, (double x), (x))
NVFP4_FORWARD(double, log, (double x), (x))
NVFP4_FORWARD(double, pow, (double x, double y), (x, y))

// Before 2.33 the stat family existed only as __xstat & co., taking the struct's version
// (_STAT_VER_LINUX, 1 on x86_64) first.
constexpr int stat_version = 1;
NVFP4_FORWARD(int, __xstat, (int v, const char* p, struct stat* s), (v, p, s))
NVFP4_FORWARD(int, __lxstat, (int v, const char* p, struct stat* s), (v, p, s))
NVFP4_FORWARD(int, __fxstat, (int v, int fd, struct stat* s), (v, fd, s))
NVFP4_FORWARD_VERSION("GLIBC_2.4", int, __fxstatat, (int v, int dir, const char* p, struct stat* s, int flags), (v, dir, p, s, flags))
NVFP4_WRAP int __wrap_stat(const char* p, struct stat* s) { return __wrap___xstat(stat_version, p, s); }
NVFP4_WRAP int __wrap_lstat(const char* p, struct stat* s) { return __wrap___lxstat(stat_version, p, s); }
NVFP4_WRAP int __wrap_fstat(int fd, struct stat* s) { return __wrap___fxstat(stat_version, fd, s); }
NVFP4_WRAP int __wrap_fstat64(int fd, struct stat* s) { return __wrap___fxstat(stat_version, fd, s); }
NVFP4_WRAP int __wrap_fstatat(int dir, const char* p, struct stat* s, int flags) {
  return __wrap___fxstatat(stat_version, dir, p, s, flags);
}

// libstdc++ skips atomic reference counts while this is nonzero (glibc 2.32+); zero keeps
// them atomic, which is always correct.
NVFP4_WRAP char __wrap___libc_single_threaded = 0;

// arc4random (2.36), for std::random_device: the kernel's getrandom (2.25) instead.
NVFP4_WRAP uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v) && errno == EINTR) {
  }
  return v;
}
}
