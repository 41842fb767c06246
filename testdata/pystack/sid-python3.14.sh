#!/bin/sh
# Unpacks Debian sid's python3.14 into $1, runnable without installing:
# a private apt directory with a sid source list (and the host's archive
# keys), `apt-get download` of the interpreter, its standard library and
# the C library, expat and zlib it was built against, `dpkg-deb -x`, and
# `patchelf` pointing the executable at the unpacked loader and
# libraries. The interpreter finds its standard library next to itself.
set -eu
dest=$1
apt="$dest/apt"
root="$dest/root"
rm -rf "$apt" "$root"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/trusted.gpg.d" "$apt/debs" "$root"
: >"$apt/status"
echo "deb http://deb.debian.org/debian sid main" >"$apt/etc/sources.list"
cp /etc/apt/trusted.gpg.d/* "$apt/etc/trusted.gpg.d/" 2>/dev/null || true
cp /usr/share/keyrings/debian-archive-*.gpg "$apt/etc/trusted.gpg.d/" 2>/dev/null || true
opts="-o Dir::Etc=$apt/etc -o Dir::Etc::sourcelist=$apt/etc/sources.list -o Dir::Etc::sourceparts=-
 -o Dir::State=$apt -o Dir::State::Lists=$apt/lists -o Dir::State::status=$apt/status
 -o Dir::Cache=$apt/cache -o APT::Architecture=amd64 -o Acquire::Retries=0 -o Acquire::http::Timeout=20"
apt-get $opts update >/dev/null
(cd "$apt/debs" && apt-get $opts download python3.14-minimal libpython3.14-minimal libpython3.14-stdlib \
	libc6 libexpat1 zlib1g >/dev/null 2>&1)
for d in "$apt"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
lib="$root/usr/lib/x86_64-linux-gnu"
patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --set-rpath "$lib" "$root/usr/bin/python3.14"
"$root/usr/bin/python3.14" -c 'import subprocess, sys; assert sys.version_info[:2] == (3, 14)'
rm -rf "$apt"
