#!/usr/bin/env bash
# End-to-end test of `korch export`:
#   plan (korch optimize --cost measured) -> export -> configure + build the package and the C
#   consumer from a clean folder -> run on the case's test input -> outputs must equal
#   `korch run --plan` BIT FOR BIT (same plan, same threads); the shared library must not need
#   korch, ONNX, protobuf, CBC/CLP/CoinUtils or libHalide; misuse gives clear errors.
# usage: export_test.sh KORCH KORCH_EXPORT SOURCE_DIR WORK_DIR [CASE_DIR] [THREADS] [PROFILE_CACHE]
#   CASE_DIR holds model.onnx and test_data_set_0/input_K.pb (default: examples/tiny_cnn);
#   PROFILE_CACHE: korch's profile cache to reuse (default: a fresh one in WORK_DIR).
# Environment: KORCH_EXPORT_PLAN=plan.json exports that plan instead of optimising (measured costs);
#   KORCH_EXPORT_EXPECT_SYMBOL=NAME: the package's Halide kernels must call NAME, and no kernel may
#   fall back to the reference (a plan that names schedule variants checks that they export).
set -euo pipefail
KORCH=$1 KORCH_EXPORT=$2 SRC=$3 WORK=$4
CASE=${5:-$SRC/examples/tiny_cnn}
THREADS=${6:-2}
CACHE=${7:-$WORK/cache.sqlite}
PY=/usr/bin/python3   # Debian's python3-onnx (only to convert the .pb test data)
GEN=()
command -v ninja > /dev/null && GEN=(-G Ninja)

fail() { echo "FAIL: $*" >&2; exit 1; }
phase() { echo "== $1 (t=${SECONDS}s)"; }
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK"

phase plan
if [[ -n ${KORCH_EXPORT_PLAN:-} ]]; then
  cp "$KORCH_EXPORT_PLAN" plan.json
else
  "$KORCH" optimize "$CASE/model.onnx" --cost measured --cache "$CACHE" --threads "$THREADS" -o plan.json > optimize.log 2>&1 \
    || { cat optimize.log; fail "korch optimize"; }
fi

# Halide lets LLVM reassociate float sums unless the target has strict_float, and its JIT and
# AOT code generators then reassociate differently (a 1-ulp difference in inline reductions such
# as ReduceMean). Bit-for-bit comparison therefore runs `korch run` (JIT) and the export (AOT)
# with the same strict_float target; the plan itself is made with the default target.
export HL_JIT_TARGET=${HL_JIT_TARGET:-host-strict_float}

phase "export"
"$KORCH_EXPORT" "$CASE/model.onnx" --plan plan.json -o pkg --threads "$THREADS" | tee export.log
for f in model.kpkg weights.bin CMakeLists.txt include/korch_model.h kernels/halide_runtime.o kernels/kernels.cc; do
  [[ -f pkg/$f ]] || fail "package lacks $f"
done
if [[ -n ${KORCH_EXPORT_EXPECT_SYMBOL:-} ]]; then
  ! grep -q "reference fallback" export.log || fail "a kernel fell back to the reference: $(grep 'reference fallback' export.log)"
  nm pkg/kernels/*.o > kernel_symbols.txt
  grep -q " U $KORCH_EXPORT_EXPECT_SYMBOL\$" kernel_symbols.txt || fail "no kernel calls $KORCH_EXPORT_EXPECT_SYMBOL"
fi
# The package is self-contained: nothing in it refers back to the korch source tree.
! grep -rIl -- "$SRC" pkg > /dev/null || fail "package refers to $SRC: $(grep -rIl -- "$SRC" pkg | head -3)"
# Move it: builds and runs from anywhere.
mv pkg pkg_moved && PKG=$WORK/pkg_moved

phase "build package + C consumer (clean folder)"
cmake -S "$SRC/examples/c_consumer" -B consumer "${GEN[@]}" -DKORCH_MODEL_DIR="$PKG" -DCMAKE_BUILD_TYPE=Release > configure.log 2>&1 \
  || { cat configure.log; fail "configure"; }
cmake --build consumer -j 2 > build.log 2>&1 || { tail -50 build.log; fail "build"; }
SO=consumer/korch_model/libkorch_model.so
[[ -f $SO && -f consumer/korch_model/libkorch_model.a ]] || fail "package did not build libkorch_model.so and .a"

phase "ldd"
ldd "$SO" | tee ldd.txt
echo "ldd: $(wc -l < ldd.txt) libraries: $(awk '{print $1}' ldd.txt | tr '\n' ' ')"
# Match library names only (first field): the hex load addresses can spell "cbc".
awk '{print $1}' ldd.txt > ldd_names.txt
if grep -Ei 'onnx|protobuf|cbc|clp|coin|halide|korch_core|sqlite' ldd_names.txt; then fail "the exported library links a build-time dependency"; fi
ldd consumer/korch_consumer_static | awk '{print $1}' | grep -Ei 'onnx|protobuf|cbc|clp|coin|halide|korch_model' && fail "static consumer links a forbidden library"
# Only the C API is exported from the shared library.
nm -D --defined-only "$SO" | awk '$2 ~ /^[TtWwVv]$/ {print $3}' | grep -v '^korch_' > extra_symbols.txt || true
[[ ! -s extra_symbols.txt ]] || { head extra_symbols.txt; fail "libkorch_model.so exports non-API symbols"; }

phase "inputs"
inputs=()
for pb in "$CASE"/test_data_set_0/input_*.pb; do
  i=$(basename "$pb" .pb); i=${i#input_}
  "$PY" - "$pb" "$WORK/input_$i.bin" << 'PYEOF'
import sys, onnx, onnx.numpy_helper as nh
t = onnx.TensorProto(); t.ParseFromString(open(sys.argv[1], 'rb').read())
a = nh.to_array(t); a.astype(a.dtype.newbyteorder('<')).tofile(sys.argv[2]); print(t.name, a.dtype, a.shape)
PYEOF
  name=$("$PY" -c "import onnx,sys; t=onnx.TensorProto(); t.ParseFromString(open(sys.argv[1],'rb').read()); print(t.name)" "$pb")
  inputs+=("$name=$pb")
done

phase "korch run (reference for the comparison)"
run_args=()
for s in "${inputs[@]}"; do run_args+=(--input "$s"); done
"$KORCH" run "$CASE/model.onnx" --plan plan.json "${run_args[@]}" --output out_korch --threads "$THREADS"

cbins=()
for pb in "$CASE"/test_data_set_0/input_*.pb; do i=$(basename "$pb" .pb); cbins+=(--input "$WORK/input_${i#input_}.bin"); done
for variant in korch_consumer korch_consumer_static; do
  phase "$variant"
  mkdir -p "out_$variant"
  (cd / && "$WORK/consumer/$variant" "$PKG" --threads "$THREADS" "${cbins[@]}" --output-dir "$WORK/out_$variant") | tee "$variant.log"
  grep -q "top-" "$variant.log" || grep -q "wrote" "$variant.log" || fail "$variant printed no result"
  "$PY" - out_korch "out_$variant" << 'PYEOF'
import sys, glob, os, onnx, onnx.numpy_helper as nh, numpy as np
ref_dir, got_dir = sys.argv[1:]
files = sorted(glob.glob(os.path.join(ref_dir, 'output_*.pb')))
assert files, 'korch run wrote no outputs'
for f in files:
    t = onnx.TensorProto(); t.ParseFromString(open(f, 'rb').read())
    a = nh.to_array(t)
    k = os.path.basename(f)[len('output_'):-3]
    b = np.fromfile(os.path.join(got_dir, 'output_%s.bin' % k), dtype=a.dtype)
    if b.size != a.size or a.tobytes() != b.reshape(a.shape).tobytes():
        d = np.abs(a.astype(np.float64).ravel() - b.astype(np.float64).ravel()).max() if b.size == a.size else 'size'
        sys.exit('output %s (%s) differs from korch run: max |diff| %s' % (k, t.name, d))
    print('output %s (%s): bit-identical, %d elements' % (k, t.name, a.size))
PYEOF
done

phase "API misuse"
cc -std=c99 -Wall -Werror "$SRC/tests/export/api_misuse.c" -I "$PKG/include" -L consumer/korch_model -lkorch_model \
  -Wl,-rpath,"$WORK/consumer/korch_model" -o api_misuse
./api_misuse "$PKG"

phase "errors"
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1; shift
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [[ $rc -ne 0 && $rc -lt 128 ]] || fail "'$*' exited $rc (expected a clean error): $out"
  grep -q -- "$pattern" <<< "$out" || fail "'$*' said '$out', expected '$pattern'"
  echo "ok: $(head -1 <<< "$out")"
}
expect_error "cannot open" consumer/korch_consumer "$WORK/no_such_package"
# Wrong input size.
head -c 7 "$WORK/input_0.bin" > short.bin
expect_error "bytes" consumer/korch_consumer "$PKG" --input short.bin $(for ((n = 1; n < ${#cbins[@]} / 2; n++)); do echo --input short.bin; done)
# A CPU feature this machine lacks: the package refuses to load.
cp -r "$PKG" pkg_foreign
"$PY" - pkg_foreign/model.kpkg << 'PYEOF'
import sys
p = sys.argv[1]; b = open(p, 'rb').read()
for f in (b'sse4.1', b'avx2', b'avx'):
    if f in b:
        b = b.replace(f, b'z' * len(f), 1); break
else:
    sys.exit('no x86 feature recorded in model.kpkg')
open(p, 'wb').write(b)
PYEOF
expect_error "this CPU lacks" consumer/korch_consumer pkg_foreign
# A corrupt model file.
head -c 40 "$PKG/model.kpkg" > pkg_foreign/model.kpkg
expect_error "truncated or corrupt\|holds package" consumer/korch_consumer pkg_foreign
# Data of another export with this library.
"$PY" - "$PKG/model.kpkg" pkg_foreign/model.kpkg << 'PYEOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read()); b[20] = ord('0') if b[20] != ord('0') else ord('1')
open(sys.argv[2], 'wb').write(bytes(b))
PYEOF
expect_error "holds package" consumer/korch_consumer pkg_foreign
echo "PASS (t=${SECONDS}s)"
