#!/usr/bin/env bash
# Dense decode regression check, same call: the vega of older commits against this
# tree's, in turn, on `vega synth --shape llama2-7b --type Q4_0` (tg128 at depth 0 and
# the aggregate of 16 sequences after a 128-token cache, as issue 9's tables).
#   for c in C1 C2; do git archive $c | gzip > .devdata/ab-$c.tgz; done   (dev machine; carry .devdata)
#   scripts/dense_ab.sh .devdata/ab-C1.tgz .devdata/ab-C2.tgz .           (GPU machine; "." = this tree)
# Builds each (vega only) under $W, then ROUNDS (default 2) rounds over all of them.
# TESTS="b1 b16" picks the benches (b1: tg128, b16: -B 16 -d 128, pp512 / pp2048: the prompt,
# pp2048d8k: pp2048 at depth 8192, tgd8k: tg128 at depth 8192; the depth rows with -c 10304);
# AB_TYPES="Q4_0 Q4_K_M ..." the synth types (default Q4_0), each file made once; SHAPE (default
# llama2-7b) the synth shape; SYNTH_DIR (default $W) where the files are (shared with types_bench.sh);
# DROP=1 deletes each file after its type's last bench. AB_BUILD_ONLY=1: the builds only (a
# background step while something else runs).
set -u
ROUNDS=${ROUNDS:-2}
TESTS=${TESTS:-b1 b16}
W=${W:-/tmp/dense_ab}
mkdir -p $W
. scripts/device_env.sh
labels=()
for src in "$@"; do
  if [ "$src" = . ]; then label=tree; dir=$PWD
  else
    label=$(basename "$src" .tgz); dir=$W/$label-src
    if [ ! -f $dir/CMakeLists.txt ]; then mkdir -p $dir && tar xzf "$src" -C $dir; fi
    [ -e $dir/.devdata ] || ln -s "$PWD/.devdata" $dir/.devdata  # its sysroot: this one
  fi
  b=$W/build-$label
  # TREE_VEGA: this tree's vega already built (no second build of ".")
  if [ "$label" = tree ] && [ -n "${TREE_VEGA:-}" ] && [ -x "$TREE_VEGA" ]; then mkdir -p $b; ln -sf "$TREE_VEGA" $b/vega; fi
  if [ ! -x $b/vega ]; then
    cmake -S $dir -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_TESTS=OFF -DVEGA_NET=OFF \
      -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $b.configure.log 2>&1 \
      && cmake --build $b -j16 --target vega > $b.build.log 2>&1 || { echo "$label: build failed"; tail -5 $b.build.log; continue; }
  fi
  labels+=("$label")
done
[ "${AB_BUILD_ONLY:-0}" = 1 ] && { echo "built: ${labels[*]}"; exit 0; }
AB_TYPES=${AB_TYPES:-Q4_0}
SHAPE=${SHAPE:-llama2-7b}
SYNTH_DIR=${SYNTH_DIR:-$W}
mkdir -p $SYNTH_DIR
nvidia-smi --query-gpu=name --format=csv,noheader
# One line per bench: label, type, test, t/s. Each file is made before its type's first
# bench (nothing else runs meanwhile) and, with DROP=1, deleted after its last (disk).
for i in $(seq "$ROUNDS"); do
  for ty in $AB_TYPES; do
    m=$SYNTH_DIR/$SHAPE-$ty.gguf
    [ -f $m ] || $W/build-${labels[-1]}/vega synth --shape $SHAPE --type $ty -o $m > $W/synth.log 2>&1 \
      || { echo "$ty: synth failed: $(tail -1 $W/synth.log)"; continue; }
    for l in "${labels[@]}"; do
      for t in $TESTS; do
        case $t in
          b1) a="-p 0 -n 128";; b16) a="-p 0 -n 128 -d 128 -B 16";;
          pp512) a="-p 512 -n 0";; pp2048) a="-p 2048 -n 0";;
          pp2048d8k) a="-c 10304 -p 2048 -n 0 -d 8192";; tgd8k) a="-c 10304 -p 0 -n 128 -d 8192";;
          *) echo "unknown test $t"; continue;;
        esac
        r=$($W/build-$l/vega bench -m $m --device gpu -r 2 $a 2>&1 | grep -E "^\|.*(tg|pp)[0-9]" | awk -F'|' '{ print $7, $8 }')
        echo "round $i $ty $l $t: $r"
      done
    done
    [ "${DROP:-0}" = 1 ] && [ "$i" = "$ROUNDS" ] && rm -f $m
  done
done
