#!/usr/bin/env bash
# Whole-model CPU speed of Channel against llama.cpp's llama-bench on the same GGUF files,
# both engines alternating in one run (issue 17, section 3).
#
#   bench/compare_llamacpp.sh CHANNEL_BIN LLAMA_BIN_DIR WORK_DIR [THREADS]
#
# Cases (CASES, default "q8_0 f16 q4_0 q4_k_m default ring"):
#   q8_0 f16 q4_0 q4_k_m  the Gemma-3-1B-shape random models, made in WORK_DIR unless they
#                         exist (`channel mkmodel`; Q4_K_M by `channel quantize` from the f16
#                         file with llama-quantize's per-tensor rules: hidden 1152 is not a
#                         multiple of 256, so most tensors fall back to q5_0, as in a real
#                         Gemma 3 1B Q4_K_M): prompt 512 (pp512) and generation 128 (tg128);
#   default               the embedded default model (DEFAULT_MODEL, models/channel-default.gguf
#                         beside this script), pp512 and tg128;
#   ring                  ring ingestion: `channel stream -f TEXT --turns --memory STORE` with
#                         the default model, its rate once the 4096-slot window is full,
#                         against llama.cpp's pp512 at depth 3584 (`llama-bench -d 3584`).
# ROUNDS rounds (default 3) of REPS repetitions (default 3); in each round every case runs
# Channel then llama.cpp back to back. BASE_CHANNEL=BIN adds a third engine to every case, an
# older Channel build (main before a change), run just after Channel in odd rounds and just
# before it in even ones: the summary then also gives
# the new/base ratios per case, so that "no slowdown" is measured side by side in one run.
# The read bandwidth of the machine (bench/read_bandwidth_bench, BW_BIN: default beside
# CHANNEL_BIN in ../bench/) is measured at the start of every round and again just before each
# case's Channel run. Prints every raw number as it comes, then a summary: per case the best
# round of each engine and the ratio of the bests (and the range of the per-round ratios), the
# best bandwidth and Channel's generation rate as a share of it, and the generation's share of
# the bandwidth measured just before it in the same round (median and range over the rounds:
# the machine's figure moves by half from one minute to the next). The cores' f32 FMA peak (bench/fma_peak_bench, FMA_BIN, beside the
# other) is measured at the start and the end of every round (the best counts: a minute of the
# shared machine can halve it): the prompt rates are also given in GFLOP/s (`channel bench`'s
# prompt_gflop_per_s; llama.cpp's from the same count a token), and for the float types (f16,
# whose products both engines run as f32 FMAs) as a share of that peak. The raw numbers also go
# to WORK_DIR/compare.jsonl.
set -euo pipefail
channel=$(realpath "$1") llama_dir=$(realpath "$2") work=$3 threads=${4:-2}
base=${BASE_CHANNEL:+$(realpath "$BASE_CHANNEL")}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
work=$(realpath "$work")

cases=${CASES:-q8_0 f16 q4_0 q4_k_m default ring}
rounds=${ROUNDS:-3}
reps=${REPS:-3}  # repetitions of each test within a round (both engines)
default_model=${DEFAULT_MODEL:-$here/../models/channel-default.gguf}
ring_text=${RING_TEXT:-$here/../train/results/heldout.txt}
ring_tokens=${RING_TOKENS:-8192}  # the window (4096 slots) is full for the second half
bw_bin=${BW_BIN:-$(dirname "$channel")/bench/read_bandwidth_bench}
[[ -x $bw_bin ]] || { echo "compare_llamacpp: no read bandwidth bench at $bw_bin (set BW_BIN)" >&2; exit 2; }
fma_bin=${FMA_BIN:-$(dirname "$channel")/bench/fma_peak_bench}
[[ -x $fma_bin ]] || { echo "compare_llamacpp: no FMA peak bench at $fma_bin (set FMA_BIN)" >&2; exit 2; }
[[ -x $llama_dir/llama-bench ]] || { echo "compare_llamacpp: no llama-bench in $llama_dir" >&2; exit 2; }
raw=$work/compare.jsonl
: >"$raw"

has() { [[ " $cases " == *" $1 "* ]]; }

# ---- the models --------------------------------------------------------------------------
for type in q8_0 f16 q4_0; do
  if ! has "$type" && ! { [[ $type == f16 ]] && has q4_k_m; }; then continue; fi
  model=$work/gemma3-1b-shape-$type.gguf
  [[ -f $model ]] || "$channel" mkmodel --arch gemma3 --hidden 1152 --layers 26 --heads 4 \
    --kv-heads 1 --head-dim 256 --ffn 6912 --window 512 --vocab 262144 --type "$type" \
    --seed 1 -t "$threads" -o "$model"
done
if has q4_k_m && [[ ! -f $work/gemma3-1b-shape-q4_k_m.gguf ]]; then
  "$channel" quantize "$work/gemma3-1b-shape-f16.gguf" "$work/gemma3-1b-shape-q4_k_m.gguf" \
    q4_k_m -t "$threads"
fi
model_of() {
  if [[ $1 == default || $1 == ring ]]; then echo "$default_model"; else
    echo "$work/gemma3-1b-shape-$1.gguf"; fi
}

# ---- one measurement each ------------------------------------------------------------------
record() { echo "$1" >>"$raw"; echo "$1"; }

bandwidth() {  # best of 3 reads of 512 MiB on $threads threads, GB/s
  "$bw_bin" --benchmark_filter="BM_ReadBandwidth/$threads/" --benchmark_repetitions=3 \
    --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
print("%.2f" % (max(b["bytes_per_second"] for b in runs) / 1e9))'
}

fma_peak() {  # best of 3 runs of twelve FMA chains a thread on $threads threads, GFLOP/s
  "$fma_bin" --benchmark_filter="BM_FmaPeak/$threads/" --benchmark_repetitions=3 \
    --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
print("%.1f" % (max(b["flops"] for b in runs) / 1e9))'
}

channel_bench() {  # pp512 and tg128 of Channel: JSON {prompt_tok_per_s, gen_tok_per_s, ...}
  "${bin:-$channel}" bench -m "$1" -p 512 -n 128 -t "$threads" -r "$reps" 2>/dev/null | tail -n 1
}

llama_bench() {  # llama-bench's JSON, pp512 and tg128 (or ARGS instead)
  "$llama_dir/llama-bench" -m "$1" -t "$threads" -r "$reps" -o json "${@:2}" 2>/dev/null
}

# Tokens per second of ring ingestion once the window is full: the stats lines of `channel
# stream` (every 256 tokens) carry the session clock and the spans evicted so far; the rate
# is measured from the first line after the window filled (spans evicted) to the last, by
# the time each line arrives.
channel_ring() {
  local store=$work/ring-store.mem
  rm -rf "$store"
  python3 - "${bin:-$channel}" "$default_model" "$ring_text" "$store" "$ring_tokens" "$threads" <<'PY'
import json, subprocess, sys, time
channel, model, text, store, tokens, threads = sys.argv[1:]
cmd = [channel, "stream", "-m", model, "-f", text, "--turns", "--memory", store,
       "--tokens", tokens, "--stats-every", "256", "-t", threads]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
marks = []  # (arrival time, clock) of the stats lines once spans leave the window
window = 0
for line in p.stdout:
    try:
        s = json.loads(line)
    except ValueError:
        continue
    if not isinstance(s, dict) or "window_used" not in s:  # a stats line (recall events differ)
        continue
    window = max(window, s["window_used"])
    if s["evicted_spans"] > 0:  # the window is full: every new span pushes one out
        marks.append((time.monotonic(), s["clock"]))
if p.wait() != 0 or len(marks) < 2:
    sys.exit(f"compare_llamacpp: channel stream failed or never filled its window "
             f"(rc {p.returncode}, window {window} slots)")
(t0, c0), (t1, c1) = marks[0], marks[-1]
print(json.dumps({"ring_tok_per_s": (c1 - c0) / (t1 - t0), "tokens": c1 - c0}))
PY
}

# ---- the rounds ----------------------------------------------------------------------------
echo "load: $(uptime)"
for round in $(seq 1 "$rounds"); do
  bw=$(bandwidth)
  record "{\"round\": $round, \"case\": \"bandwidth\", \"gb_per_s\": $bw}"
  record "{\"round\": $round, \"case\": \"fma_peak\", \"gflop_per_s\": $(fma_peak)}"
  for c in $cases; do
    model=$(model_of "$c")
    olds=null
    # With a base build, odd rounds run it after this Channel and even rounds before, so
    # that the minute's drift does not always fall on the same side of the new/base ratio.
    run_case() { if [[ $c == ring ]]; then channel_ring; else channel_bench "$model"; fi; }
    if [[ -n $base && $((round % 2)) == 0 ]]; then olds=$(bin=$base run_case); fi
    # The bandwidth of this minute, just before Channel's run: the generation's share of it
    # is the goal's yardstick ("the read bandwidth measured in the same run"), and the
    # machine's figure moves by half between rounds.
    bw_now=null
    [[ $c == ring ]] || bw_now=$(bandwidth)
    ours=$(run_case)
    if [[ -n $base && $((round % 2)) == 1 ]]; then olds=$(bin=$base run_case); fi
    if [[ $c == ring ]]; then
      theirs=$(llama_bench "$model" -p 512 -n 0 -d 3584)
    else
      theirs=$(llama_bench "$model" -p 512 -n 128)
    fi
    record "$(python3 - "$round" "$c" "$ours" "$theirs" "$olds" "$bw_now" <<'PY'
import json, sys
rnd, case, ours, theirs = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
olds, bw_now = json.loads(sys.argv[5]), json.loads(sys.argv[6])
pp = next((r["avg_ts"] for r in theirs if r["n_prompt"] > 0), None)
tg = next((r["avg_ts"] for r in theirs if r["n_gen"] > 0), None)
out = {"round": rnd, "case": case}
if case == "ring":
    out |= {"channel_ring": ours["ring_tok_per_s"], "llama_pp512_d3584": pp}
else:
    out |= {"channel_pp": ours["prompt_tok_per_s"], "llama_pp": pp,
            "channel_tg": ours["gen_tok_per_s"], "llama_tg": tg,
            "channel_gb_per_s": ours["gen_gb_per_s"],
            "channel_gflop_per_s": ours["prompt_gflop_per_s"],
            "llama_gflop_per_s": ours["prompt_gflop_per_s"] / ours["prompt_tok_per_s"] * pp,
            "bw_before": bw_now}
if olds is not None:
    out |= ({"base_ring": olds["ring_tok_per_s"]} if case == "ring" else
            {"base_pp": olds["prompt_tok_per_s"], "base_tg": olds["gen_tok_per_s"]})
print(json.dumps(out))
PY
)"
  done
  # The peak again after the round: a minute of the shared machine can halve it.
  record "{\"round\": $round, \"case\": \"fma_peak\", \"gflop_per_s\": $(fma_peak)}"
done
echo "load: $(uptime)"

# ---- the summary ---------------------------------------------------------------------------
python3 - "$raw" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bw = max([r["gb_per_s"] for r in rows if r["case"] == "bandwidth"] +
         [r["bw_before"] for r in rows if r.get("bw_before")])
peak = max(r["gflop_per_s"] for r in rows if r["case"] == "fma_peak")
print(f"\nsummary, {sys.argv[2]} threads, best of {max(r['round'] for r in rows)} rounds "
      f"(ratio of the bests; per-round ratios in brackets); read bandwidth {bw:.2f} GB/s, "
      f"f32 FMA peak {peak:.1f} GFLOP/s")
print("| case | test | channel tok/s | llama.cpp tok/s | ratio | per round | channel GB/s or GFLOP/s "
      "| % of bw or of the FMA peak (llama.cpp) | % of the bandwidth just before, median (range) |")
print("|---|---|---|---|---|---|---|---|---|")
cases = []
for r in rows:
    if r["case"] not in ("bandwidth", "fma_peak") and r["case"] not in cases: cases.append(r["case"])
float_cases = ("f16", "bf16", "f32")  # products run as f32 FMAs in both engines
def line(case, test, ours, theirs, gb=None, gflop=None):
    rs = [r for r in rows if r["case"] == case]
    a, b = max(r[ours] for r in rs), max(r[theirs] for r in rs)
    per = [r[ours] / r[theirs] for r in rs]
    extra = "| | |"
    if gb:
        g = max(r[gb] for r in rs)
        now = sorted(100 * r[gb] / r["bw_before"] for r in rs if r.get("bw_before"))
        same = f"{statistics.median(now):.0f} % ({now[0]:.0f}-{now[-1]:.0f} %)" if now else ""
        extra = f"| {g:.2f} | {100 * g / bw:.0f} % | {same} |"
    if gflop and all(gflop in r for r in rs):
        g, gl = max(r[gflop] for r in rs), max(r["llama_gflop_per_s"] for r in rs)
        share = f"{100 * g / peak:.0f} % ({100 * gl / peak:.0f} %)" if case in float_cases else ""
        extra = f"| {g:.1f} GFLOP/s | {share} | |"
    print(f"| {case} | {test} | {a:.2f} | {b:.2f} | {a / b:.2f} | {min(per):.2f}-{max(per):.2f} {extra}")
for c in cases:
    if c == "ring":
        line(c, "ring vs pp512@d3584", "channel_ring", "llama_pp512_d3584")
    else:
        line(c, "pp512", "channel_pp", "llama_pp", gflop="channel_gflop_per_s")
        line(c, "tg128", "channel_tg", "llama_tg", "channel_gb_per_s")
if any("base_pp" in r or "base_ring" in r for r in rows):
    import statistics
    print("\nthis Channel against BASE_CHANNEL, measured in the same rounds "
          "(median of the per-round ratios, range in brackets; > 1: faster)")
    print("| case | test | ratio | per round |")
    print("|---|---|---|---|")
    for c in cases:
        tests = ([("ring", "channel_ring", "base_ring")] if c == "ring" else
                 [("pp512", "channel_pp", "base_pp"), ("tg128", "channel_tg", "base_tg")])
        for test, ours, olds in tests:
            per = [r[ours] / r[olds] for r in rows if r["case"] == c and r.get(olds)]
            if per:
                print(f"| {c} | {test} | {statistics.median(per):.3f} | "
                      f"{min(per):.3f}-{max(per):.3f} |")
PY
