#!/usr/bin/env bash
# Builds the release artifacts into dist/ (or --out DIR):
#   agentloop-VERSION-linux-ARCH.tar.gz   the binary, the man page, shell
#                                         completions, the docs and SHA256SUMS
#   agentloop_VERSION_DEBARCH.deb         /usr/bin/agentloop, agentloop.service,
#                                         /etc/agentloop/config.toml, the user
#   agentloop-VERSION.tgz and agentloop-linux-CPU-VERSION.tgz
#                                         the npm launcher and platform package
#   SHA256SUMS                            of the files above
# VERSION is the CMake project version (CMakeLists.txt).
#
# Usage: scripts/package.sh [--arch amd64|arm64] [--binary PATH] [--out DIR]
#                           [--only tar,deb,npm]
#   --binary PATH  package this agentloop instead of building the release
#                  preset's build/release/apps/cli/agentloop
#   --arch arm64   cross-build agentloop for aarch64 (build/release-arm64,
#                  g++-aarch64-linux-gnu against Debian 12's arm64 -dev
#                  packages unpacked in ~/.cache/agentloop/arm64-sysroot:
#                  nothing is installed on the host), or package --binary;
#                  the man page and completions come from the host's release
#                  binary (the same on every architecture)
#   --only LIST    build only some of tar, deb, npm
# Network: only deb.debian.org for --arch arm64's -dev packages (once);
# npm pack reads only the staged directories.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
root=$PWD
# abs PATH: PATH relative to the caller's directory, made absolute.
abs() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }

arch=amd64
binary=""
out=dist
only="tar,deb,npm"
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --binary) binary=$(abs "$2"); shift 2 ;;
    --out) out=$(abs "$2"); shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
case "$arch" in
  amd64) triple=x86_64; npm_cpu=x64; tool_prefix="" ;;
  arm64) triple=aarch64; npm_cpu=arm64; tool_prefix=aarch64-linux-gnu- ;;
  *) echo "package: --arch must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

version=$(sed -n 's/^project(agentloop VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)
if [ -z "$version" ]; then
  echo "package: no 'project(agentloop VERSION x.y.z' in CMakeLists.txt" >&2
  exit 1
fi
# Timestamps of every file in the archives: the commit's time, so that the
# same commit packs to the same bytes.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
maintainer="agentloop maintainers <maintainers@users.noreply.a-seed-f0907919.example>"

# The host binary makes the man page and completions.
host_binary=build/release/apps/cli/agentloop
build_release() {
  cmake --preset release >/dev/null
  cmake --build --preset release --target agentloop >/dev/null
}
# The arm64 -dev packages the cross build links (static archives and
# headers) and the header-only ones it includes, from Debian 12's arm64
# release: unpacked with dpkg-deb -x, so that nothing is installed on the host
# (cmake/toolchain-aarch64-linux-gnu.cmake), into AL_ARM64_SYSROOT (default
# ~/.cache/agentloop/arm64-sysroot: outside the source tree, whose paths the
# installed CMake package may not name).
arm64_sysroot_dir=${AL_ARM64_SYSROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/agentloop/arm64-sysroot}
# libc6 is not linked against (the cross compiler brings its C library): it is
# there for check_needed.
ARM64_DEBS=(libsqlite3-dev libssl-dev libre2-dev libedit-dev libbsd-dev libmd-dev libncurses-dev
  libtinfo6 libpq-dev nlohmann-json3-dev libboost1.74-dev libtomlplusplus-dev libc6)
arm64_sysroot() {
  local sysroot=$arm64_sysroot_dir apt_dir=$arm64_sysroot_dir.apt
  [ -f "$sysroot/.complete" ] && return 0
  rm -rf "$sysroot" "$apt_dir"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs" "$sysroot"
  local apt_opts=(-q -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
    -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1
    -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update >/dev/null
  (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" download "${ARM64_DEBS[@]}" >/dev/null)
  local d
  for d in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$d" "$sysroot"; done
  rm -rf "$apt_dir"
  touch "$sysroot/.complete"
}
cross_build_arm64() {
  if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
    echo "package: aarch64-linux-gnu-g++ not found (scripts/install-deps.sh installs g++-aarch64-linux-gnu)" >&2
    exit 1
  fi
  local t=$SECONDS
  arm64_sysroot
  echo "== package: cross-building agentloop for aarch64 (build/release-arm64)"
  cmake -S . -B build/release-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-aarch64-linux-gnu.cmake" \
    -DAL_ARM64_SYSROOT="$arm64_sysroot_dir" \
    -DAL_BUILD_TESTS=OFF -DAL_BUILD_BENCH=OFF -DAL_STATIC_DEPS=ON >/dev/null
  cmake --build build/release-arm64 --target agentloop
  echo "== package: the aarch64 build took $((SECONDS - t)) s"
}

# check_needed BINARY: BINARY is an aarch64 ELF, and each shared library it
# needs (and its interpreter) is a file of Debian 12's arm64 packages, as
# unpacked in the sysroot.
check_needed() {
  local sysroot=$arm64_sysroot_dir lib found missing=0
  "${tool_prefix}readelf" -h "$1" | grep -q 'Machine:.*AArch64' ||
    { echo "package: $1 is not an aarch64 ELF" >&2; exit 1; }
  for lib in $("${tool_prefix}readelf" -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') \
    $("${tool_prefix}readelf" -l "$1" | sed -n 's|.*Requesting program interpreter: \(.*\)\]|\1|p'); do
    found=""
    for dir in lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu lib; do
      [ -e "$sysroot/$dir/$(basename "$lib")" ] && found=$dir
    done
    if [ -n "$found" ]; then
      echo "== package: needs $lib: /$found/$(basename "$lib") of Debian's arm64 packages"
    else
      echo "package: $1 needs $lib, which no unpacked arm64 package has" >&2
      missing=1
    fi
  done
  [ $missing -eq 0 ] || exit 1
}

if [ "$arch" = amd64 ]; then
  if [ -z "$binary" ]; then
    echo "== package: building the release preset (build/release)"
    build_release
    binary=$host_binary
  fi
  host_binary=$binary
else
  if [ -z "$binary" ]; then
    cross_build_arm64
    binary=build/release-arm64/apps/cli/agentloop
  fi
  [ -f "$binary" ] || { echo "package: no binary at $binary" >&2; exit 1; }
  arm64_sysroot
  check_needed "$binary"
  if [ ! -x "$host_binary" ]; then
    echo "== package: building the host's release binary (man page, completions)"
    build_release
  fi
fi
[ -f "$binary" ] || { echo "package: no binary at $binary" >&2; exit 1; }
[ -x "$host_binary" ] || { echo "package: no host binary at $host_binary" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# --- the files every artifact carries --------------------------------------
files=$stage/files
mkdir -p "$files"
"${tool_prefix}strip" --strip-unneeded -o "$files/agentloop" "$binary"
chmod 0755 "$files/agentloop"
"$host_binary" completion man >"$files/agentloop.1"
"$host_binary" completion bash >"$files/agentloop.bash"
"$host_binary" completion zsh >"$files/_agentloop"
"$host_binary" completion fish >"$files/agentloop.fish"
touch -d "@$SOURCE_DATE_EPOCH" "$files"/*

# pack_tar DIR NAME: DIR's content as NAME.tar.gz, ordered, owned by root,
# dated SOURCE_DATE_EPOCH.
pack_tar() {
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$(dirname "$1")" -cf - "$(basename "$1")" | gzip -9n >"$out/$2.tar.gz"
}

artifacts=()

# --- the tarball: a prefix (bin/, share/) to unpack into /usr/local ---------
if want tar; then
  name=agentloop-$version-linux-$triple
  t=$stage/tar/$name
  install -D -m 0755 "$files/agentloop" "$t/bin/agentloop"
  install -D -m 0644 "$files/agentloop.1" "$t/share/man/man1/agentloop.1"
  install -D -m 0644 "$files/agentloop.bash" "$t/share/bash-completion/completions/agentloop"
  install -D -m 0644 "$files/_agentloop" "$t/share/zsh/site-functions/_agentloop"
  install -D -m 0644 "$files/agentloop.fish" "$t/share/fish/vendor_completions.d/agentloop.fish"
  install -D -m 0644 README.md "$t/share/doc/agentloop/README.md"
  for f in docs/*.md; do install -m 0644 "$f" "$t/share/doc/agentloop/"; done
  (cd "$t" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort |
    xargs sha256sum >SHA256SUMS)
  find "$t" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  pack_tar "$t" "$name"
  artifacts+=("$name.tar.gz")
  echo "== package: $out/$name.tar.gz"
fi

# --- the Debian package ------------------------------------------------------
if want deb; then
  d=$stage/deb/root
  install -D -m 0755 "$files/agentloop" "$d/usr/bin/agentloop"
  # The man page names the documentation's directory as the release build's
  # prefix (/usr/local) has it; the package puts it under /usr.
  install -d "$d/usr/share/man/man1"
  sed 's|/usr/local/share/doc/agentloop|/usr/share/doc/agentloop|g' "$files/agentloop.1" |
    gzip -9n >"$d/usr/share/man/man1/agentloop.1.gz"
  install -D -m 0644 "$files/agentloop.bash" "$d/usr/share/bash-completion/completions/agentloop"
  install -D -m 0644 "$files/_agentloop" "$d/usr/share/zsh/vendor-completions/_agentloop"
  install -D -m 0644 "$files/agentloop.fish" "$d/usr/share/fish/vendor_completions.d/agentloop.fish"
  install -D -m 0644 packaging/agentloop.service "$d/lib/systemd/system/agentloop.service"
  install -D -m 0644 packaging/config.toml "$d/etc/agentloop/config.toml"
  doc=$d/usr/share/doc/agentloop
  install -D -m 0644 packaging/deb/copyright "$doc/copyright"
  install -D -m 0644 packaging/deb/lintian-overrides "$d/usr/share/lintian/overrides/agentloop"
  install -m 0644 README.md "$doc/README.md"
  for f in docs/*.md; do install -m 0644 "$f" "$doc/"; done
  # A native package's changelog: one entry for this version, dated as the
  # commit.
  {
    echo "agentloop ($version) unstable; urgency=medium"
    echo
    echo "  * agentloop $version (commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown))."
    echo
    echo " -- $maintainer  $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
  } | gzip -9n >"$doc/changelog.gz"
  chmod 0644 "$doc/changelog.gz"
  install -d "$d/DEBIAN"
  install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$d/DEBIAN/"
  echo /etc/agentloop/config.toml >"$d/DEBIAN/conffiles"
  # libc6 (>= the newest GLIBC_ symbol version the binary needs): the binary
  # maps only libc and libm (AL_STATIC_DEPS), both in libc6.
  glibc=$("${tool_prefix}readelf" -V --wide "$files/agentloop" |
    sed -n 's/.*Name: GLIBC_\([0-9.]*\).*/\1/p' | sort -uV | tail -1)
  size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
  sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|libc6 (>= $glibc)|" packaging/deb/control.in \
    >"$d/DEBIAN/control"
  (cd "$d" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
    xargs md5sum >DEBIAN/md5sums)
  chmod 0644 "$d/DEBIAN/control" "$d/DEBIAN/conffiles" "$d/DEBIAN/md5sums"
  find "$d" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  deb=agentloop_${version}_$arch.deb
  dpkg-deb --root-owner-group -Zxz --build "$d" "$out/$deb" >/dev/null
  artifacts+=("$deb")
  echo "== package: $out/$deb"
fi

# --- npm: the launcher and this architecture's platform package -------------
if want npm; then
  if ! command -v npm >/dev/null; then
    echo "package: npm not found (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  n=$stage/npm
  mkdir -p "$n/agentloop" "$n/platform/bin"
  cp -r packaging/npm/agentloop/bin packaging/npm/agentloop/lib packaging/npm/agentloop/install.js \
    packaging/npm/agentloop/README.md "$n/agentloop/"
  sed "s|@VERSION@|$version|g" packaging/npm/agentloop/package.json.in >"$n/agentloop/package.json"
  install -m 0755 "$files/agentloop" "$n/platform/bin/agentloop"
  sed -e "s|@VERSION@|$version|g" -e "s|@PLATFORM@|linux-$npm_cpu|g" -e "s|@CPU@|$npm_cpu|g" \
    packaging/npm/platform/package.json.in >"$n/platform/package.json"
  for p in agentloop platform; do
    tgz=$(cd "$n/$p" && npm pack --silent --offline --pack-destination "$out" 2>/dev/null | tail -1)
    artifacts+=("$tgz")
    echo "== package: $out/$tgz"
  done
fi

# SHA256SUMS of every artifact in the directory (those of another --arch run
# included).
(cd "$out" && find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.deb' -o -name '*.tgz' \) |
  sed 's|^\./||' | LC_ALL=C sort | xargs -r sha256sum >SHA256SUMS)
echo "== package: ${#artifacts[@]} artifacts for linux-$triple in $out (SHA256SUMS)"
