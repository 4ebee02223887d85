# CMake package of the shmbus C API: find_package(shmbus) gives
#   shmbus::shmbus         the shared library (libshmbus.so)
#   shmbus::shmbus_static  the static library (libshmbus.a) with the system libraries it needs
# Relocatable: the paths are found from this file's place, <prefix>/lib/cmake/shmbus/.
get_filename_component(_shmbus_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET shmbus::shmbus)
  add_library(shmbus::shmbus SHARED IMPORTED)
  set_target_properties(shmbus::shmbus PROPERTIES
    IMPORTED_LOCATION "${_shmbus_prefix}/lib/libshmbus.so"
    IMPORTED_SONAME "libshmbus.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_shmbus_prefix}/include")
endif()

if(NOT TARGET shmbus::shmbus_static)
  find_package(Threads REQUIRED)
  add_library(shmbus::shmbus_static STATIC IMPORTED)
  set_target_properties(shmbus::shmbus_static PROPERTIES
    IMPORTED_LOCATION "${_shmbus_prefix}/lib/libshmbus.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_shmbus_prefix}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;dl;m;rt;util")
endif()

unset(_shmbus_prefix)
