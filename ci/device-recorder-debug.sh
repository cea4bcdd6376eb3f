#!/usr/bin/env bash
# Diagnostic, on the GPU machine: which part of the launch recorder makes the dlopen-kernels
# app die (SIGSEGV) under CUDA_INJECTION64_PATH. Builds the example and recorder variants.
set -u
out=${OUT:-$PWD/device-out}; mkdir -p "$out"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CUPTI=$(dirname "$(dirname "$NVCC")")/extras/CUPTI
w=/tmp/recdebug; rm -rf "$w"; mkdir -p "$w"; cp -r examples/dlopen-kernels "$w/ex"
(cd "$w/ex" && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
   -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null && cmake --build build --parallel 8 >/dev/null) || echo "example build failed"
sed 's/^  dlclose(handle);$/  \/\/ no dlclose/' examples/dlopen-kernels/src/app.cpp > "$w/app-nodlclose.cpp"
g++ -O2 -I examples/dlopen-kernels/src "$w/app-nodlclose.cpp" -o "$w/ex/build/app-nodlclose" -ldl || echo "app-nodlclose build failed"
segv='#include <stdio.h>\n#include <execinfo.h>\n#include <signal.h>\nstatic void on_segv(int s){void*b[64];int n=backtrace(b,64);dprintf(2,"RECDEBUG signal %d backtrace:\\n",s);backtrace_symbols_fd(b,n,2);signal(s,SIG_DFL);raise(s);}\n'
variant() {  # name, sed expressions...
  local name=$1; shift
  cp gate/cuda/launchrec.cpp "$w/$name.cpp"
  for e in "$@"; do sed -i "$e" "$w/$name.cpp"; done
  sed -i "1i $segv" "$w/$name.cpp"
  sed -i 's/^  folder = dir;$/  folder = dir; signal(SIGSEGV, on_segv); signal(SIGBUS, on_segv);/' "$w/$name.cpp"
  "$NVCC" -shared -cudart=none -O1 -g -Xcompiler -fPIC,-fvisibility=hidden,-rdynamic -I"$CUPTI/include" \
    "$w/$name.cpp" -o "$w/$name.so" -L"$CUPTI/lib64" -lcupti -Xlinker=-rpath="$CUPTI/lib64" -ldl \
    2> "$w/$name.build.log" || { echo "$name: build failed"; tail -5 "$w/$name.build.log"; }
}
variant full
variant noruntime 's/status = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);/status = CUPTI_SUCCESS;/'
variant inert 's/^  active = true;$/  active = false;/'
variant subonly 's/^  status = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);$/  active = false; return 1;/'
variant noatexit 's/^  atexit(at_exit);$//'
variant finalize 's/^  active = false;$/  active = false; cuptiUnsubscribe(subscriber); cuptiFinalize();/'
variant nounload 's/^                                 CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);$/                                 CUPTI_CBID_RESOURCE_MODULE_LOADED);/'
echo "gdb: $(command -v gdb || echo none)"
for app in app app-nodlclose; do
  for mode in f32 sum; do
    for v in none full noruntime inert subonly noatexit finalize nounload; do
      d=$w/rec-$v-$app-$mode; mkdir -p "$d"
      if [ $v = none ]; then env=(); else env=(CUDA_INJECTION64_PATH=$w/$v.so CUDA_GATE_LAUNCH_DIR=$d); fi
      for jit in 0 1; do
        ( cd "$w/ex" && env "${env[@]}" CUDA_DISABLE_PTX_JIT=$((1-jit)) CUDA_FORCE_PTX_JIT=$jit timeout 60 build/$app $mode ) > "$d/log.$jit" 2>&1
        rc=$?
        echo "$app $mode $v jit=$jit rc=$rc $(grep -c RECDEBUG "$d/log.$jit") $(tr '\n' '|' < "$d/log.$jit" | cut -c1-300)"
      done
    done
  done
done > "$out/recdebug.txt" 2>&1
# The full variant's backtrace, resolved
grep -h -A30 RECDEBUG "$w"/rec-full-app-f32/log.0 > "$out/bt-full.txt" 2>/dev/null
if command -v gdb >/dev/null; then
  (cd "$w/ex" && CUDA_INJECTION64_PATH=$w/full.so CUDA_GATE_LAUNCH_DIR=$w gdb -batch -ex run -ex bt -ex "info sharedlibrary" --args build/app f32) > "$out/gdb.txt" 2>&1
fi
cat "$out/recdebug.txt"; cat "$out/bt-full.txt"; tail -60 "$out/gdb.txt" 2>/dev/null
