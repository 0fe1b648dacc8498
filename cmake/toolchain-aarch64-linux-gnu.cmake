# Cross build for aarch64 (arm64) with Debian's g++-aarch64-linux-gnu:
#   cmake -S . -B build/release-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
#         -DAL_ARM64_SYSROOT=DIR ...
# The C library and libstdc++ are the cross compiler's (/usr/aarch64-linux-gnu).
# The third-party libraries and headers come from AL_ARM64_SYSROOT: Debian 12's
# arm64 -dev packages unpacked there with dpkg-deb -x (scripts/package.sh
# --arch arm64 makes it), so nothing is installed on the host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(AL_ARM64_SYSROOT "" CACHE PATH "Debian 12 arm64 -dev packages unpacked (dpkg-deb -x)")
if(NOT AL_ARM64_SYSROOT OR NOT IS_DIRECTORY "${AL_ARM64_SYSROOT}/usr/include")
  message(FATAL_ERROR "AL_ARM64_SYSROOT must name the unpacked arm64 -dev packages")
endif()
# try_compile projects get the variable too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES AL_ARM64_SYSROOT)

set(CMAKE_FIND_ROOT_PATH "${AL_ARM64_SYSROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config reads only the sysroot's .pc files and prefixes their paths.
set(ENV{PKG_CONFIG_LIBDIR}
    "${AL_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${AL_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${AL_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")

# The sysroot's headers after the cross compiler's own (its /usr/include
# holds no C library), and its libraries for the linker.
set(CMAKE_C_FLAGS_INIT "-idirafter ${AL_ARM64_SYSROOT}/usr/include -idirafter ${AL_ARM64_SYSROOT}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-L${AL_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")
