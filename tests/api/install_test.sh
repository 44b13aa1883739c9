#!/usr/bin/env bash
# The installed CMake package end to end: `cmake --install` into a temporary prefix, configure and
# build examples/cpp_consumer from a clean folder with find_package(korch) against that prefix
# only, run it on examples/tiny_cnn (optimise, save and reload the plan, run) and check its output
# against the test case's expected output; the installed library exports the API only.
# usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
BUILD=$1 SRC=$2 WORK=$3
GEN=()
command -v ninja > /dev/null && GEN=(-G Ninja)
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK"

echo "== install"
cmake --install "$BUILD" --prefix "$WORK/prefix" > install.log || { cat install.log; fail "cmake --install"; }
cat install.log
# The library directory is lib/ or, with a /usr-like prefix on Debian, lib/<multiarch>/.
CFG=$(find prefix -name korchConfig.cmake | head -1)
[[ -n $CFG ]] || fail "the install lacks korchConfig.cmake"
CFG_DIR=$(cd "$(dirname "$CFG")" && pwd)
LIB_DIR=$(cd "$CFG_DIR/../.." && pwd)
for f in prefix/include/korch/korch.h "$CFG_DIR/korchConfigVersion.cmake" "$CFG_DIR/korchTargets.cmake"; do
  [[ -f $f ]] || fail "the install lacks $f"
done
SO=$(ls "$LIB_DIR"/libkorch.so.* 2> /dev/null | head -1)
[[ -n $SO ]] || fail "the install lacks $LIB_DIR/libkorch.so.*"
# Only korch::api symbols (and no internal korch:: ones) are exported.
nm -D -C --defined-only "$SO" | awk '$2 ~ /^[TtWwVv]$/' | grep 'korch::' | grep -v 'korch::api::' > internal.txt || true
[[ ! -s internal.txt ]] || { head internal.txt; fail "libkorch exports internal symbols"; }
# The public header needs no other korch header.
grep -E '#include +"' prefix/include/korch/korch.h && fail "korch.h includes a non-system header"

echo "== configure + build examples/cpp_consumer against the prefix (clean folder)"
cmake -S "$SRC/examples/cpp_consumer" -B consumer "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$WORK/prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF > configure.log 2>&1 \
  || { cat configure.log; fail "configure"; }
grep -q "korch_DIR:PATH=$CFG_DIR" consumer/CMakeCache.txt \
  || fail "find_package(korch) did not use the installed package: $(grep korch_DIR consumer/CMakeCache.txt)"
cmake --build consumer > build.log 2>&1 || { cat build.log; fail "build"; }
grep -i "warning" build.log && fail "the example builds with warnings"
ldd consumer/korch_cpp_consumer | grep libkorch | tee ldd.txt
grep -q "$LIB_DIR" ldd.txt || fail "the example does not load the installed libkorch"

echo "== run"
# From another directory, with the plan saved and reloaded.
(cd / && "$WORK/consumer/korch_cpp_consumer" "$SRC/examples/tiny_cnn/model.onnx" --threads 2 \
   --save-plan "$WORK/plan.json") | tee run.log
grep -q "^top-5 of " run.log || fail "no top-5 printed"
grep -q "saved and reloaded" run.log || fail "plan not saved"
diff=$(sed -n 's/^max |diff| vs .*: //p' run.log)
[[ -n $diff ]] || fail "no comparison with the expected output"
awk -v d="$diff" 'BEGIN { exit !(d + 0 <= 1e-4) }' || fail "output differs from the test case by $diff"
# The saved plan runs again.
"$WORK/consumer/korch_cpp_consumer" "$SRC/examples/tiny_cnn/model.onnx" --plan "$WORK/plan.json" > run2.log
grep -q "max |diff|" run2.log || fail "run with --plan failed"

echo "== errors"
set +e
out=$("$WORK/consumer/korch_cpp_consumer" "$WORK/no_such_model.onnx" 2>&1); rc=$?
set -e
[[ $rc -eq 1 ]] && grep -q "^error: " <<< "$out" || fail "missing model: rc $rc, '$out'"
echo "ok: $out"
echo "PASS"
