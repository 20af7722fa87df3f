#!/usr/bin/env bash
# FlashAttention-4 (the harness's optional `fa4` peer) for a GPU machine without a package index: download its pinned
# wheels here and split them into three folders that each fit one device call beside the working tree (64 MiB in
# all; libs-cu13 alone is 92 MB).  Run from the repository root, where pip reaches an index:
#   bash validation/fa4/fetch.sh            -> .fa4-part1/, .fa4-part2/, .fa4-part3/ (ignored through .git/info/exclude)
# Then carry one part a call, in order, while the machine stays warm (its idle release is short):
#   run(carry=[".fa4-part1"], command="bash validation/fa4/stage.sh"), the same with part 2, and with part 3
#   command="bash validation/fa4/stage.sh && export PYTHONPATH=.:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages && ..."
set -euo pipefail
PINS="flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 quack-kernels==0.6.5
apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5"   # the machine has cuda-bindings, einops, protobuf
PLATFORMS=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do
    PLATFORMS="$PLATFORMS --platform $p"
done
DL=$(mktemp -d)
for pin in $PINS; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATFORMS \
        -d "$DL" "$pin"
done
mkdir -p .git/info
for n in 1 2 3; do
    rm -rf ".fa4-part$n" && mkdir ".fa4-part$n"
    grep -qx "/.fa4-part$n/" .git/info/exclude 2>/dev/null || echo "/.fa4-part$n/" >> .git/info/exclude
done
big=$(ls "$DL"/nvidia_cutlass_dsl_libs_cu13-*.whl)
split -b 31m "$big" "$DL/cu13.part."          # three parts: .aa .ab .ac
echo "$(basename "$big")" > .fa4-part3/cu13.name
mv "$DL/cu13.part.aa" .fa4-part1/ && mv "$DL/cu13.part.ab" .fa4-part2/ && mv "$DL/cu13.part.ac" .fa4-part3/
rm "$big" && mv "$DL"/*.whl .fa4-part3/   # (beside the smallest piece: each part and the tree within a call's 64 MiB)
rmdir "$DL"
du -sh .fa4-part1 .fa4-part2 .fa4-part3
