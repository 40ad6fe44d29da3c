#!/bin/sh
# tests/deps.sh PKG... - install the Debian packages that are missing.
# Runs apt-get update first, as a fresh Debian 12 machine needs it. Quiet
# when everything is present, so `make test` stays readable.
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "csq: installing Debian packages:$missing"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null || {
  echo "csq: could not install:$missing (run as root, or install them by hand)" >&2; exit 1; }
