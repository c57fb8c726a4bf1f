# NVFP4_JIT_PORTABLE: binaries that run on any x86_64 Linux with glibc 2.28 or newer
# (manylinux_2_28), linked on a newer system. libstdc++ is linked in statically and its symbols
# kept inside (the unwinder stays in libgcc_s.so.1, present on every such system: the static
# copy calls _dl_find_object, glibc 2.35); the glibc functions versioned after 2.28 are bound
# to their old versions by src/portable/glibc_compat.cpp through --wrap. libdl and libpthread
# are named as needed, since before 2.34 the old dlopen and pthread_* live there.
set(NVFP4_JIT_GLIBC_WRAPPED
    pthread_create pthread_join pthread_detach pthread_once pthread_key_create __pthread_key_create
    pthread_key_delete pthread_getspecific pthread_setspecific pthread_rwlock_rdlock pthread_rwlock_wrlock
    pthread_rwlock_unlock dlopen dlsym dlerror dlclose dladdr dladdr1 dlinfo exp log pow stat lstat fstat fstat64 fstatat __libc_single_threaded arc4random)

function(nvfp4_jit_make_portable target)
  set(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/..)
  set(wrapped ${NVFP4_JIT_GLIBC_WRAPPED})
  target_sources(${target} PRIVATE ${root}/src/portable/glibc_compat.cpp)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_sources(${target} PRIVATE ${root}/src/portable/glibc_compat_start.cpp)
    list(APPEND wrapped __libc_start_main)
  endif()
  list(TRANSFORM wrapped PREPEND "LINKER:--wrap=")
  target_link_options(${target} PRIVATE -static-libstdc++ LINKER:--exclude-libs,ALL ${wrapped})
  target_link_libraries(${target} PRIVATE -Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state)
endfunction()
