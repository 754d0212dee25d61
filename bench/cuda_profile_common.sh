# Sourced by bench/cuda_decode_profile.sh and bench/cuda_prefill_profile.sh.

# The Gemma-3-12B shape (hidden 3840, 16 heads, 8 KV heads of 256, FFN 15360, window 1024,
# vocab 262144) with $3 layers in type $4, made in $2 by channel $1 unless it is there; prints
# its path.
cuda_profile_model() {
  local ch=$1 out=$2 layers=$3 type=$4
  local model=$out/gemma3-12b-shape-${layers}l-$type.gguf
  [[ -f $model ]] || "$ch" mkmodel --arch gemma3 --hidden 3840 --layers "$layers" --heads 16 \
    --kv-heads 8 --head-dim 256 --ffn 15360 --window 1024 --vocab 262144 --type "$type" --seed 1 \
    -t "$(nproc)" -o "$model" >&2 || return 1
  echo "$model"
}

# Nsight Compute's ncu, on PATH or in its usual folder; exits 2 when there is none.
cuda_profile_ncu() {
  local ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  [[ -n $ncu ]] || { echo "cuda profile: no ncu on this machine" >&2; exit 2; }
  echo "$ncu"
}
