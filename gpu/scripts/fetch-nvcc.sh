#!/usr/bin/env bash
# fetch-nvcc.sh DIR — extract nvcc 11.8 from Debian 12 (bookworm) packages into DIR
# without installing anything on the system.
#
# Debian ships CUDA 11.8 in its non-free component. This script points apt at a
# sources list of its own (in DIR/apt, via -o Dir::Etc::SourceList=...), downloads
# only the packages nvcc needs to emit PTX with `apt-get download` (no dependency
# resolution, no dpkg database change) and unpacks each with `dpkg-deb -x` into
# DIR/root. /etc/apt and the system package state are left untouched.
#
# Afterwards DIR/env.sh sets PATH so that `nvcc` runs from DIR; gen-ptx.sh
# sources it. Downloads are about 1-2 GB; keep DIR outside the repository.
set -euo pipefail

dir=${1:?usage: fetch-nvcc.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt_dir=$dir/apt
debs=$dir/debs
root=$dir/root
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts" "$debs" "$root"

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cat > "$apt_dir/sources.list" <<SRC
deb $mirror bookworm main contrib non-free non-free-firmware
deb $mirror bookworm-updates main contrib non-free non-free-firmware
SRC

apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list"
  -o "Dir::Etc::SourceParts=$apt_dir/parts"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::Cache=$apt_dir/cache"
  -o "Dir::State::status=/dev/null"
  -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=root"
)
if [[ $(id -u) -ne 0 ]]; then
  apt_opts=("${apt_opts[@]:0:${#apt_opts[@]}-1}")
fi

echo "== apt-get update (private lists in $apt_dir)"
apt-get "${apt_opts[@]}" update

# nvcc driver + cudafe++/cicc/ptxas, libnvvm, the CUDA headers, and the
# libraries the tools link against that a minimal system may lack.
pkgs=(
  nvidia-cuda-toolkit
  nvidia-cuda-dev
  libnvvm4
  libcudart11.0
  libnvidia-ptxjitcompiler1
  libcuinj64-11.8
  libaccinj64-11.8
  libnvtoolsext1
  libcupti11.8
  libnvrtc11.2
  libnvrtc-builtins11.8
)
echo "== apt-get download ${pkgs[*]}"
cd "$debs"
for p in "${pkgs[@]}"; do
  if ! ls "$debs"/"${p}"_*.deb >/dev/null 2>&1; then
    apt-get "${apt_opts[@]}" download "$p" || echo "warning: could not download $p" >&2
  fi
done

echo "== dpkg-deb -x into $root"
for d in "$debs"/*.deb; do
  mark=$root/.extracted-$(basename "$d")
  if [[ ! -e $mark ]]; then
    dpkg-deb -x "$d" "$root"
    touch "$mark"
  fi
done

# Debian's nvcc.profile is a link to /etc/nvcc.profile, which names absolute
# /usr paths; replace the link with a profile that points into $root.
tk=$root/usr/lib/nvidia-cuda-toolkit
if [[ -x $tk/bin/nvcc ]]; then
  rm -f "$tk/bin/nvcc.profile"
  cat > "$tk/bin/nvcc.profile" <<PROF
TOP              = \$(_HERE_)/..
NVVMIR_LIBRARY_DIR = $tk/libdevice
LD_LIBRARY_PATH += $root/usr/lib/x86_64-linux-gnu:
PATH            += $tk/bin:$root/usr/bin:\$(_HERE_):
INCLUDES        +=  "-I$root/usr/include" \$(_SPACE_)
LIBRARIES        =+ \$(_SPACE_) "-L$root/usr/lib/x86_64-linux-gnu/stubs" "-L$root/usr/lib/x86_64-linux-gnu"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
PROF
fi

cat > "$dir/env.sh" <<ENV
# source me: puts the extracted nvcc first on PATH
export PATH="$tk/bin:$root/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV

echo "== done"
. "$dir/env.sh"
command -v nvcc
nvcc --version
du -sh "$debs" "$root"
