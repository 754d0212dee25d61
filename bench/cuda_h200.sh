#!/usr/bin/env bash
# Channel's CUDA backend against llama.cpp on the same GPU, in one run (issue 14, point 4):
# builds Channel with CUDA (or takes CHANNEL_BIN), builds llama.cpp's llama-bench with
# GGML_CUDA=ON for sm_90 from LLAMA_SRC (a source tree or .tar.xz of the
# kainlan/llama.cpp-intel-optimizations snapshot), writes the models with `channel mkmodel`,
# runs `channel bench --device cuda` and `llama-bench -ngl 99` (flash attention off and on,
# the better counts) and prints one table with both engines' numbers and the ratios.
#
#   LLAMA_SRC=path [CHANNEL_BIN=build-cuda/channel] [CMAKE_ARGS=...] [OUT=dir] [MODELS="12b:q8_0 1b:q8_0 ..."]
#   [REPS=3] [DEPTH=16384] [BUDGET_S=seconds of benchmarking, counted once the models are
#   written and llama.cpp is built: no new model after 60 % of it, no new llama.cpp run after
#   it] bash bench/cuda_h200.sh
# Results accumulate in OUT/results.jsonl as they come; OUT/table.md is made from them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results/cuda_h200}
work=${WORK:-/tmp/cuda_h200}
reps=${REPS:-3}
depth=${DEPTH:-16384}
models=${MODELS:-"12b:q8_0 12b:f16 12b:q4_0 1b:q8_0 1b:f16"}
jobs=$(nproc)
budget=${BUDGET_S:-100000}
t0=$SECONDS
mkdir -p "$out" "$work/models"

# --- llama.cpp: started first, it builds while Channel's side runs ---------------------------
# LLAMA_BUILD_ONLY=1: build llama-bench and stop. LLAMA_MARKER=path: someone else builds it into
# $WORK/llama-build and touches path.ok or path.fail when done.
build_llama() {
  set -e
  local src=${LLAMA_SRC:?LLAMA_SRC must name llama.cpp sources}
  if [[ -f "$src" ]]; then mkdir -p "$work/llama.cpp" && tar -xJf "$src" -C "$work/llama.cpp"; src="$work/llama.cpp"; fi
  cmake -S "$src" -B "$work/llama-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  cmake --build "$work/llama-build" -j"$jobs" --target llama-bench
}
llama_log="$out/llama_build.log"
if [[ "${LLAMA_BUILD_ONLY:-0}" == 1 ]]; then
  build_llama >"$llama_log" 2>&1
  exit $?
fi
llama_pid=""
if [[ -z "${LLAMA_MARKER:-}" ]]; then
  (build_llama) >"$llama_log" 2>&1 &
  llama_pid=$!
fi
llama_ready() {
  if [[ -n "$llama_pid" ]]; then wait "$llama_pid"; return; fi
  while [[ ! -e "$LLAMA_MARKER.ok" && ! -e "$LLAMA_MARKER.fail" ]]; do sleep 2; done
  [[ -e "$LLAMA_MARKER.ok" ]]
}

# --- Channel ----------------------------------------------------------------------------------
ch=${CHANNEL_BIN:-}
if [[ -z "$ch" ]]; then
  # CMAKE_ARGS: extra configure arguments, as scripts/test-cuda.sh takes them (a machine whose
  # libraries sit outside the default prefix).
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHANNEL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCHANNEL_BUILD_TESTS=OFF -DCHANNEL_BUILD_BENCH=OFF \
    ${CMAKE_ARGS:-} >/dev/null
  cmake --build build-cuda -j"$jobs" --target channel
  ch=build-cuda/channel
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true

shape() {  # the mkmodel flags of a shape
  case $1 in
    12b) echo "--arch gemma3 --hidden 3840 --layers 48 --heads 16 --kv-heads 8 --head-dim 256 --ffn 15360 --window 1024 --vocab 262144 --ctx 32768" ;;
    1b) echo "--arch gemma3 --hidden 1152 --layers 26 --heads 4 --kv-heads 1 --head-dim 256 --ffn 6912 --window 512 --vocab 262144 --ctx 32768" ;;
  esac
}

results="$out/results.jsonl"
: >"$results"
record() { echo "$1" >>"$results"; }

# The models are written one after another in the background with every core (while the
# caller's tests run and llama.cpp builds); a model appears under its name only once complete,
# a failed one leaves NAME.failed. No timed run starts before the writes and llama.cpp's build
# are over: a decode step waits on its host thread, and a machine busy writing 20 GB or
# compiling made Channel's 12B q8_0 tg128 219.7 +- 15.9 t/s against 234 on a quiet one.
model_file() { echo "$work/models/gemma3-${1%%:*}-${1##*:}.gguf"; }
(
  for m in $models; do
    f=$(model_file "$m")
    [[ -f $f ]] && continue
    "$ch" mkmodel $(shape "${m%%:*}") --type "${m##*:}" -t "$jobs" -o "$f.part" \
      2>>"$out/channel_bench.log" && mv "$f.part" "$f" || touch "$f.failed"
  done
) &
maker=$!
model_ready() {
  while [[ ! -f $1 && ! -f $1.failed ]]; do sleep 1; done
  [[ -f $1 ]]
}

wait "$maker" || true
llama_ok=1
llama_ready || llama_ok=0
echo "cuda_h200: models written, llama.cpp built ($llama_ok) at $((SECONDS - t0)) s" >&2
t0=$SECONDS  # the budget counts the benchmarks

done_models=""
for m in $models; do
  if (( SECONDS - t0 > budget * 6 / 10 )); then echo "cuda_h200: time budget: skipping $m" >&2; continue; fi
  s=${m%%:*} t=${m##*:}
  f=$(model_file "$m")
  model_ready "$f" || { echo "cuda_h200: mkmodel $m failed" >&2; continue; }
  done_models="$done_models $m"
  for graphs in on off; do
    flag=""
    [[ $graphs == off ]] && flag="--no-cuda-graphs"
    [[ $graphs == off && $s != 1b && $t != q8_0 ]] && continue  # launch overhead: two shapes suffice
    j=$("$ch" bench -m "$f" --device cuda -p 512 -n 128 -r "$reps" $flag 2>>"$out/channel_bench.log" | tail -1) ||
      { echo "cuda_h200: channel bench $m failed: $(tail -1 "$out/channel_bench.log")" >&2; continue; }
    echo "channel $m graphs $graphs: $j" >&2
    record "{\"engine\":\"channel\",\"model\":\"$s\",\"type\":\"$t\",\"graphs\":\"$graphs\",\"depth\":0,\"r\":$j}"
  done
  if [[ $s == 12b && $t == q8_0 ]]; then
    j=$("$ch" bench -m "$f" --device cuda -p 0 -n 128 -d "$depth" -r "$reps" 2>>"$out/channel_bench.log" | tail -1) &&
    echo "channel $m depth $depth: $j" >&2 &&
    record "{\"engine\":\"channel\",\"model\":\"$s\",\"type\":\"$t\",\"graphs\":\"on\",\"depth\":$depth,\"r\":$j}"
  fi
done

# --- llama.cpp's side -------------------------------------------------------------------------
if ((llama_ok)); then
  lb="$work/llama-build/bin/llama-bench"
  for m in $done_models; do
    if (( SECONDS - t0 > budget )); then echo "cuda_h200: time budget: no llama.cpp run for $m" >&2; continue; fi
    s=${m%%:*} t=${m##*:}
    f="$work/models/gemma3-$s-$t.gguf"
    j=$("$lb" -m "$f" -ngl 99 -r "$reps" -p 512 -n 128 -fa 0,1 -o json 2>>"$out/llama_bench.log" | tr -d '\n') ||
      { echo "cuda_h200: llama-bench $m failed" >&2; continue; }
    echo "llama.cpp $m: $j" | cut -c1-300 >&2
    record "{\"engine\":\"llama.cpp\",\"model\":\"$s\",\"type\":\"$t\",\"depth\":0,\"r\":$j}"
    if [[ $s == 12b && $t == q8_0 ]]; then
      j=$("$lb" -m "$f" -ngl 99 -r "$reps" -p 0 -n 128 -d "$depth" -fa 1 -o json 2>>"$out/llama_bench.log" | tr -d '\n') &&
      record "{\"engine\":\"llama.cpp\",\"model\":\"$s\",\"type\":\"$t\",\"depth\":$depth,\"r\":$j}"
    fi
  done
else
  echo "cuda_h200: llama.cpp did not build; see $llama_log" >&2
  tail -20 "$llama_log" >&2
fi

python3 - "$results" <<'PY' | tee "$out/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ch, ll = {}, {}
for r in rows:
    key = (r["model"], r["type"], r["depth"])
    if r["engine"] == "channel":
        g = ch.setdefault(key, {})
        g["tg_" + r["graphs"]] = r["r"]["gen_tok_per_s"]
        if r["graphs"] == "on":
            g["pp"] = r["r"]["prompt_tok_per_s"]
            g["gbs"] = r["r"]["gen_gb_per_s"]
    else:
        g = ll.setdefault(key, {})
        for e in r["r"]:
            fa = int(bool(e.get("flash_attn")))
            kind = "pp" if e["n_gen"] == 0 else "tg"
            g[f"{kind}_fa{fa}"] = e["avg_ts"]
print("| model | test | channel t/s | llama.cpp FA off | llama.cpp FA on | ratio to best | channel GB/s | channel tg without graphs |")
print("|---|---|---|---|---|---|---|---|")
fmt = lambda v: f"{v:,.1f}" if isinstance(v, (int, float)) else "–"
for key in ch:
    model, typ, depth = key
    c, l = ch[key], ll.get(key, {})
    for kind in ("pp", "tg"):
        mine = c.get("pp") if kind == "pp" else c.get("tg_on")
        if not mine:
            continue
        off, on = l.get(f"{kind}_fa0"), l.get(f"{kind}_fa1")
        best = max([v for v in (off, on) if v] or [0])
        ratio = f"{mine / best:.2f}x" if best else "–"
        test = f"{kind}{512 if kind == 'pp' else 128}" + (f" @ d{depth}" if depth else "")
        print(f"| {model} {typ} | {test} | {fmt(mine)} | {fmt(off)} | {fmt(on)} | {ratio} | "
              f"{fmt(c.get('gbs')) if kind == 'tg' else ''} | {fmt(c.get('tg_off')) if kind == 'tg' else ''} |")
PY
