#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a bare GPU machine into .gpu/ (git-ignored):
#   .gpu/korch                 the korch CLI built with the CUDA backend, stripped
#   .gpu/korch-libs.tar.xz     the shared libraries it needs beyond glibc and the CUDA libraries
#                              (taken from the Debian packages: apt-get download + dpkg -x here;
#                              ICU's data tables replaced by an empty stand-in, see below)
#   .gpu/python/               pure-Python packages the model exporter needs that a PyTorch
#                              image lacks: yolox 0.3.0 (source, laid out as its setup.py installs
#                              it), loguru, thop
#   .gpu/MANIFEST              commit, packages and sizes
# cuBLASLt and cuDNN are not packed: the GPU machine's PyTorch brings them (pip packages under
# site-packages/nvidia/), and the CUDA runtime is linked statically.
#
# Usage: scripts/gpu_bundle.sh [BUILD_DIR]   (default build; configured with KORCH_CUDA on)
# Then, on the GPU machine, from the repository root: scripts/gpu_check.sh OUT_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/.gpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

grep -q "^KORCH_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build is not configured with KORCH_CUDA=ON (the CUDA toolkit was not found)" >&2; exit 1; }
cmake --build "$build" --target korch
rm -rf "$out"
mkdir -p "$out/python"
strip -o "$out/korch" "$build/korch"

# Libraries: every shared object korch loads that a Debian package (not the base system: libz,
# libgcc_s, liblzma... are on any Linux) brings, less glibc's and the CUDA libraries. The C++
# runtime is packed too: gpu_check.sh prefers the machine's own copy of any soname it has.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libcublas|libcublasLt|libcudnn|libcudart|libcuda|libnvrtc)\.'
libs=()
pkgs=()
base=()
while read -r soname path; do
  pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1 || true)
  if [[ -z $pkg ]]; then
    base+=("$soname")
  else
    libs+=("$soname")
    pkgs+=("$pkg")
  fi
done < <(ldd "$build/korch" | awk '$3 ~ /^\// {print $1, $3}' | grep -Ev "$skip")
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
echo "gpu_bundle: ${#libs[@]} libraries from ${#pkgs[@]} Debian packages: ${pkgs[*]}"
echo "gpu_bundle: from the base system (not packed): ${base[*]}"
(cd "$work" && apt-get download "${pkgs[@]}" 2>/dev/null >/dev/null)
mkdir -p "$work/root" "$work/lib"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
for soname in "${libs[@]}"; do
  found=$(find "$work/root" -name "$soname" | head -1)
  [[ -n $found ]] || { echo "gpu_bundle: $soname is in no downloaded package" >&2; exit 1; }
  cp -L "$found" "$work/lib/$soname"
done
# ICU's data tables (libicudata, 31 MB, 7 MB compressed) are loaded only because LLVM links
# libxml2, which korch never calls: an empty stand-in with the same soname and data symbol keeps
# the bundle inside a 64 MiB upload. (A machine with its own libxml2 needs neither.)
for f in "$work"/lib/libicudata.so.*; do
  [[ -e $f ]] || continue
  major=${f##*.so.}
  echo "const unsigned char icudt${major}_dat[64] __attribute__((aligned(16))) = {0};" |
    gcc -shared -fPIC -x c - -o "$f" -Wl,-soname,"libicudata.so.$major"
done
tar -C "$work/lib" -cf - . | xz -9 -T0 >"$out/korch-libs.tar.xz"

# Python packages for models/paper/export_paper_models.py's YOLOX-Nano.
PY=${PYTHON:-python3}
"$PY" -m pip download --quiet --no-deps -d "$work/py" loguru==0.7.3 thop==0.1.1.post2209072238
for w in "$work"/py/*.whl; do (cd "$out/python" && "$PY" -m zipfile -e "$w" .); done
# yolox 0.3.0 exists only as an sdist whose metadata step needs torch: fetch the archive itself.
"$PY" -m pip download --no-deps --no-binary :all: yolox==0.3.0 -d "$work/py" -vv 2>/dev/null |
  grep -oE 'https://[^ "]*/yolox-0\.3\.0\.tar\.gz' | head -1 >"$work/yolox.url" || true
[[ -s $work/yolox.url ]] || { echo "gpu_bundle: cannot find yolox-0.3.0.tar.gz on the package index" >&2; exit 1; }
curl -sSfLo "$work/yolox.tar.gz" "$(cat "$work/yolox.url")"
tar -C "$work" -xzf "$work/yolox.tar.gz"
cp -r "$work/yolox-0.3.0/yolox" "$out/python/yolox"
cp -r "$work/yolox-0.3.0/exps/default" "$out/python/yolox/exp/default"  # as its setup.py maps it

{
  echo "commit $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD -- src tools CMakeLists.txt || echo ' (+ uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "packages ${pkgs[*]}"
  echo "python loguru 0.7.3, thop 0.1.1.post2209072238, yolox 0.3.0"
} >"$out/MANIFEST"
du -sh "$out"/* | sed 's/^/gpu_bundle: /'
echo "gpu_bundle: $(du -sb "$out" | cut -f1) bytes in .gpu/ (the device carries at most 64 MiB with the tree)"
