#!/usr/bin/env bash
# Builds Channel with the CUDA backend and runs the CUDA tests: every kernel against its CPU
# reference (tests/unit/cuda_ops_test.cpp), whole models against the CPU engine and llama.cpp's
# goldens (cuda_model_test.cpp), both in the unit_cuda_tests executable, and the CLI on the device against the CPU. Needs nvcc; on a machine
# without a GPU the GPU tests skip with a loud message and the rest still runs.
#   BUILD_DIR (build-cuda), CUDA_ARCH (90), SKIP_BUILD=1 to reuse an existing build,
#   CMAKE_ARGS for more configure flags.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  # `serve` is not under test here; a GPU machine without cpp-httplib still builds the rest.
  server=ON
  pkg-config --exists cpp-httplib 2>/dev/null || server=OFF
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHANNEL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DCHANNEL_BUILD_BENCH=OFF \
    -DCHANNEL_BUILD_SERVER=$server ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$build" -j"$(nproc)" --target unit_cuda_tests channel
fi
nvidia-smi -L 2>/dev/null || echo "test-cuda: nvidia-smi lists no GPU"

rc=0
echo "== unit_cuda_tests (cuda_ops_test.cpp, cuda_model_test.cpp) =="
"$build"/tests/unit_cuda_tests || rc=1

echo "== CLI: channel logits on cuda vs cpu =="
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ch="$build"/channel
# bounded_f32: an f32 bounded (swa_sink_v1) model on a contiguous context, 200 ids (three
# windows of 64).
for arch in llama gemma3 bounded_f32; do
  ids=2,17,300,45,999,12,7,1500,33
  if [[ $arch == bounded_f32 ]]; then
    "$ch" mkmodel --arch bounded --type f32 --hidden 256 --layers 6 --heads 4 --kv-heads 2 \
      --head-dim 64 --ffn 512 --vocab 2000 --window 64 --rope-dims 32 -o "$tmp/$arch.gguf" 2>/dev/null
    ids=$(seq -s, 3 7 1400)
  else
    "$ch" mkmodel --arch "$arch" --type q8_0 --hidden 256 --layers 4 --heads 4 --kv-heads 2 \
      --head-dim 64 --ffn 512 --vocab 2000 -o "$tmp/$arch.gguf" 2>/dev/null
  fi
  cpu=$("$ch" logits -m "$tmp/$arch.gguf" --ids $ids --top 5 2>/dev/null)
  if gpu=$("$ch" logits -m "$tmp/$arch.gguf" --ids $ids --top 5 --device cuda 2>"$tmp/err"); then
    echo "$arch cpu:  $cpu"
    echo "$arch cuda: $gpu"
    top_cpu=$(echo "$cpu" | sed -E 's/.*"top":\[\[([0-9]+),.*/\1/')
    top_gpu=$(echo "$gpu" | sed -E 's/.*"top":\[\[([0-9]+),.*/\1/')
    [[ "$top_cpu" == "$top_gpu" ]] || { echo "test-cuda: top token differs for $arch"; rc=1; }
  else
    echo "test-cuda: SKIPPED the CLI check: $(grep -v '^channel: loaded' "$tmp/err")"
  fi
done
# run on a contiguous context on the device: the one generation loop over the CUDA session.
if out=$("$ch" run -m "$tmp/gemma3.gguf" --ctx 64 -p "hello there" -n 12 --temp 0 --no-echo \
    --device cuda 2>"$tmp/err"); then
  echo "run --device cuda: $(printf '%s' "$out" | head -c 120 | tr '\n' ' ')"
  grep -E "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: run did not say its device"; rc=1; }
  echo "run --device cpu:  $("$ch" run -m "$tmp/gemma3.gguf" --ctx 64 -p "hello there" -n 12 \
    --temp 0 --no-echo 2>/dev/null | head -c 120 | tr '\n' ' ')"
else
  echo "test-cuda: run --ctx 64 --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
# embed and perplexity on the device: the CPU's vectors (cosine) and score, to rounding.
texts=("hello there" "the quick brown fox jumps over the lazy dog, twice over")
if "$ch" embed -m "$tmp/gemma3.gguf" --device cuda "${texts[@]}" >"$tmp/emb_gpu" 2>"$tmp/err"; then
  "$ch" embed -m "$tmp/gemma3.gguf" "${texts[@]}" >"$tmp/emb_cpu" 2>/dev/null
  grep -qE "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: embed did not say its device"; rc=1; }
  python3 - "$tmp/emb_gpu" "$tmp/emb_cpu" <<'PY' || { echo "test-cuda: embed on cuda differs from the cpu"; rc=1; }
import json, math, sys
g = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
assert len(g) == len(c) == 2, (len(g), len(c))
for a, b in zip(g, c):
    cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    print(f"embed --device cuda: {len(a)} dims, cosine to the cpu's {cos:.6f}")
    assert cos > 0.999, cos
PY
else
  echo "test-cuda: embed --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
for _ in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog. '; done >"$tmp/text.txt"
if gpu=$("$ch" perplexity -m "$tmp/gemma3.gguf" -f "$tmp/text.txt" --ctx 32 --chunks 3     --device cuda 2>"$tmp/err"); then
  cpu=$("$ch" perplexity -m "$tmp/gemma3.gguf" -f "$tmp/text.txt" --ctx 32 --chunks 3 2>/dev/null)
  echo "perplexity cuda: $gpu cpu: $cpu"
  python3 -c "import json,sys; g,c=json.loads(sys.argv[1]),json.loads(sys.argv[2]); \
assert g['tokens']==c['tokens'] and abs(g['ppl']/c['ppl']-1)<1e-3, (g,c)" "$gpu" "$cpu" ||
    { echo "test-cuda: perplexity on cuda differs from the cpu"; rc=1; }
else
  echo "test-cuda: perplexity --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
# mem add / mem query on the device (the llama model: gemma3's 4 layers are all sliding, nothing
# to store): episodes written through the device ring, and a query by the centroid and by the
# cue's state (keys), each ranking the episodes as the CPU does.
"$ch" mem create -m "$tmp/llama.gguf" "$tmp/dev.mem" >/dev/null 2>&1 &&
  cp "$tmp/dev.mem" "$tmp/cpu.mem"
facts=("the red door opens at noon" "bread is baked on tuesdays by the old miller"
       "the river floods every spring near the mill")
mem_ok=1
for f in "${facts[@]}"; do
  "$ch" mem add -m "$tmp/llama.gguf" --device cuda --text "$f" "$tmp/dev.mem" >/dev/null 2>"$tmp/err" ||
    { echo "test-cuda: mem add --device cuda failed: $(tail -1 "$tmp/err")"; rc=1; mem_ok=0; break; }
  "$ch" mem add -m "$tmp/llama.gguf" --text "$f" "$tmp/cpu.mem" >/dev/null 2>&1
done
if ((mem_ok)); then
  for m in centroid keys; do
    for st in dev cpu; do  # the device's store queried on the device, the CPU's on the CPU
      dev=(); [[ $st == dev ]] && dev=(--device cuda)
      "$ch" mem query -m "$tmp/llama.gguf" "${dev[@]}" --json -k 3 --recall-method $m \
        --text "when does the red door open" "$tmp/$st.mem" >"$tmp/q_$st" 2>"$tmp/err" ||
        { echo "test-cuda: mem query ($st, $m) failed: $(tail -1 "$tmp/err")"; rc=1; }
    done
    python3 - "$tmp/q_dev" "$tmp/q_cpu" "$m" <<'PY' || { echo "test-cuda: mem query $m on cuda ranks unlike the cpu"; rc=1; }
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
ids = lambda r: [x["id"] for x in r]
print(f"mem query {sys.argv[3]} cuda: {[(x['id'], round(x.get('score', x.get('cosine', 0)), 4)) for x in g]}"
      f" cpu: {[(x['id'], round(x.get('score', x.get('cosine', 0)), 4)) for x in c]}")
assert ids(g) == ids(c), (ids(g), ids(c))
PY
  done
fi
# serve --device cuda: /v1/embeddings and a scored prompt (echo + logprobs) run on the device's
# contiguous contexts (ServerConfig::device_context); against a CPU server's answers.
if "$ch" serve --help >/dev/null 2>&1; then
  python3 - "$ch" "$tmp/gemma3.gguf" <<'PY' || { echo "test-cuda: serve --device cuda differs from the cpu"; rc=1; }
import json, math, socket, subprocess, sys, time, urllib.request
ch, model = sys.argv[1], sys.argv[2]
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
def ask(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))
answers = {}
for device in ("cuda", "cpu"):
    port = free_port()
    srv = subprocess.Popen([ch, "serve", "-m", model, "--port", str(port), "--device", device],
                           stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        emb = ask(port, "/v1/embeddings", {"input": ["hello there", "the lazy dog sleeps"]})
        cmp = ask(port, "/v1/completions", {"prompt": "the quick brown fox jumps", "max_tokens": 0,
                                            "echo": True, "logprobs": 2})
        answers[device] = ([d["embedding"] for d in emb["data"]],
                           cmp["choices"][0]["logprobs"]["token_logprobs"])
    finally:
        srv.terminate()
        err = srv.communicate(timeout=30)[1]
    if device == "cuda":
        assert "running on cuda" in err, err
(ge, gl), (ce, cl) = answers["cuda"], answers["cpu"]
for a, b in zip(ge, ce):
    cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    assert cos > 0.999, cos
assert len(gl) == len(cl) > 1, (gl, cl)
worst = max(abs(x - y) for x, y in zip(gl, cl) if x is not None and y is not None)
print(f"serve --device cuda: embeddings cosine to the cpu's > 0.999, prompt logprobs within {worst:.2e}")
assert worst < 0.05, (gl, cl)  # q8_0: logits differ as in the logits check above
PY
else
  echo "test-cuda: SKIPPED the serve check: this build has no channel serve (cpp-httplib)"
fi
# Speculative decoding on the device (target and draft model there): the greedy text of
# one-token decoding on the device, exactly.
plain=$("$ch" run -m "$tmp/gemma3.gguf" --ctx 128 -p "a b c a b c a b" -n 48 --temp 0 --no-echo \
  --device cuda 2>/dev/null) || true
for draft in ngram "$tmp/gemma3.gguf"; do
  if out=$("$ch" run -m "$tmp/gemma3.gguf" --ctx 128 -p "a b c a b c a b" -n 48 --no-echo \
      --draft "$draft" --device cuda 2>"$tmp/err"); then
    echo "run --draft $(basename "$draft") --device cuda: $(grep -E '^channel: draft' "$tmp/err")"
    grep -qE "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: run --draft did not say its device"; rc=1; }
    [[ "$out" == "$plain" ]] || { echo "test-cuda: run --draft $(basename "$draft") text differs from greedy"; rc=1; }
  else
    echo "test-cuda: run --draft --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
  fi
done
# The same on the device's slot ring (no --ctx): verifies are tentative ring feeds there.
plain_ring=$("$ch" run -m "$tmp/gemma3.gguf" -p "a b c a b c a b" -n 48 --temp 0 --no-echo \
  --device cuda 2>/dev/null) || true
if out=$("$ch" run -m "$tmp/gemma3.gguf" -p "a b c a b c a b" -n 48 --no-echo --draft ngram \
    --device cuda 2>"$tmp/err"); then
  echo "run --draft ngram --device cuda on the ring: $(grep -E '^channel: draft' "$tmp/err")"
  [[ -n "$out" && "$out" == "$plain_ring" ]] || { echo "test-cuda: ring run --draft text differs from greedy"; rc=1; }
else
  echo "test-cuda: ring run --draft --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
# run and stream on the slot ring on the device (RingSessionConfig::compute): 600 streamed
# tokens through 256 slots evict spans on the GPU; the sessions' K/V stay in device memory.
if out=$("$ch" run -m "$tmp/gemma3.gguf" --slots 256 --recall-slots 8 -p "hello there" -n 40 \
    --temp 0 --no-echo --device cuda 2>"$tmp/err"); then
  echo "run (ring) --device cuda: $(printf '%s' "$out" | head -c 120 | tr '\n' ' ')"
  grep -E "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: run (ring) did not say its device"; rc=1; }
  echo "run (ring) --device cpu:  $("$ch" run -m "$tmp/gemma3.gguf" --slots 256 --recall-slots 8 \
    -p "hello there" -n 40 --temp 0 --no-echo 2>/dev/null | head -c 120 | tr '\n' ' ')"
else
  echo "test-cuda: run (ring) --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
if "$ch" stream -m "$tmp/gemma3.gguf" --slots 256 --recall-slots 8 --tokens 600 --stats-every 300 \
    --temp 0 --device cuda >"$tmp/stream" 2>"$tmp/err"; then
  echo "stream --device cuda: $(tail -1 "$tmp/stream")"
  grep -E "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: stream did not say its device"; rc=1; }
else
  echo "test-cuda: stream --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
fi
# The bounded architecture (swa_sink_v1) on the device, on the slot ring and on a contiguous
# context (--ctx N, CudaSession): a random one, and the trained models/channel-bounded.gguf
# where BOUNDED_MODEL names it (greedy text past the window of 64 on both devices).
"$ch" mkmodel --arch bounded --type q8_0 --hidden 256 --layers 6 --heads 4 --kv-heads 2 \
  --head-dim 64 --ffn 512 --vocab 2000 --window 64 --rope-dims 32 -o "$tmp/bounded.gguf" 2>/dev/null
for where in "--slots 256 --recall-slots 8" "--ctx 512"; do
  for m in "$tmp/bounded.gguf" ${BOUNDED_MODEL:+"$BOUNDED_MODEL"}; do
    name="bounded $(basename "$m") ${where%% *}"
    # shellcheck disable=SC2086  # $where is two or four words
    if gpu=$("$ch" run -m "$m" $where -p "Once upon a time" -n 96 --temp 0 --no-echo \
        --device cuda 2>"$tmp/err"); then
      # shellcheck disable=SC2086
      cpu=$("$ch" run -m "$m" $where -p "Once upon a time" -n 96 --temp 0 --no-echo 2>/dev/null)
      echo "$name cuda: $(printf '%s' "$gpu" | head -c 160 | tr '\n' ' ')"
      echo "$name cpu:  $(printf '%s' "$cpu" | head -c 160 | tr '\n' ' ')"
      echo "$name: greedy text $([[ "$gpu" == "$cpu" ]] && echo same || echo differs)"
      grep -qE "^channel: running on cuda" "$tmp/err" || { echo "test-cuda: $name did not say its device"; rc=1; }
    else
      echo "test-cuda: $name --device cuda failed: $(tail -1 "$tmp/err")"; rc=1
    fi
  done
done
# An f16 model whose weights hold NaN (the first 8 halves of blk.1.ffn_down, at the offset
# `channel info` gives; matrices are not scanned at load): run on the device, on a contiguous
# context and on the slot ring, stops with the non-finite error of the step's logits check
# (nonfinite_flags), exit 1.
"$ch" mkmodel --arch llama --type f16 --hidden 256 --layers 4 --heads 4 --kv-heads 2 \
  --head-dim 64 --ffn 512 --vocab 2000 -o "$tmp/nan.gguf" 2>/dev/null
"$ch" info -m "$tmp/nan.gguf" >"$tmp/info" 2>/dev/null
python3 - "$tmp/info" "$tmp/nan.gguf" <<'PY' || { echo "test-cuda: could not poke NaNs"; rc=1; }
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}["blk.1.ffn_down.weight"]
assert t["type"] == "f16", t
with open(sys.argv[2], "r+b") as f:
    f.seek(t["offset"])
    f.write(bytes([0x00, 0x7e]) * 8)
PY
for where in "--ctx 64" "--slots 256 --recall-slots 8"; do
  # shellcheck disable=SC2086  # $where is two or four words
  st=0
  "$ch" run -m "$tmp/nan.gguf" $where -p "hello there" -n 8 --temp 0 --no-echo --device cuda \
    >/dev/null 2>"$tmp/err" || st=$?
  if [[ $st == 1 ]] && grep -q "non-finite" "$tmp/err"; then
    echo "NaN weights ${where%% *} --device cuda: $(grep 'non-finite' "$tmp/err" | head -1)"
  else
    echo "test-cuda: NaN weights ${where%% *} --device cuda: exit $st, $(tail -1 "$tmp/err")"; rc=1
  fi
done
# A device that does not exist: one line, exit 1.
if "$ch" logits -m "$tmp/llama.gguf" --ids 1,2 --device cuda:99 2>"$tmp/err"; then
  echo "test-cuda: --device cuda:99 did not fail"; rc=1
fi
grep -v '^channel: loaded' "$tmp/err" >"$tmp/err1" || true  # the model's load line comes first
[[ $(wc -l <"$tmp/err1") == 1 ]] || { echo "test-cuda: not a one-line error:"; cat "$tmp/err"; rc=1; }
echo "cuda:99 -> $(cat "$tmp/err1")"
echo "test-cuda: done, $([[ $rc == 0 ]] && echo all passed || echo FAILURES)"
exit $rc
