// An executable's entry for a manylinux_2_28 wheel (cmake/portable.cmake). glibc 2.34's crt1.o
// calls __libc_start_main@GLIBC_2.34 with no init function, leaving the program's constructors
// to the new libc. Older glibc runs only the init function it is given, so the wrapper binds
// the GLIBC_2.2.5 entry and passes one that runs _init and the init array, as the
// __libc_csu_init of older crt files did (every glibc runs a given init function instead of
// its own). The fini array is run by the dynamic linker in both.
extern "C" {
using nvfp4_main_fn = int (*)(int, char**, char**);
using nvfp4_init_fn = void (*)(int, char**, char**);

int nvfp4_old_libc_start_main(nvfp4_main_fn main, int argc, char** argv, nvfp4_init_fn init, void (*fini)(void),
                              void (*rtld_fini)(void), void* stack_end);
__asm__(".symver nvfp4_old_libc_start_main, __libc_start_main@GLIBC_2.2.5");

void _init(void);
extern nvfp4_init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern nvfp4_init_fn __init_array_end[] __attribute__((visibility("hidden")));

static void nvfp4_run_constructors(int argc, char** argv, char** envp) {
  _init();
  for (nvfp4_init_fn* f = __init_array_start; f != __init_array_end; ++f) (*f)(argc, argv, envp);
}

__attribute__((visibility("hidden"))) int __wrap___libc_start_main(nvfp4_main_fn main, int argc, char** argv,
                                                                    nvfp4_init_fn, void (*)(void),
                                                                    void (*rtld_fini)(void), void* stack_end) {
  return nvfp4_old_libc_start_main(main, argc, argv, nvfp4_run_constructors, nullptr, rtld_fini, stack_end);
}
}
