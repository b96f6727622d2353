#!/bin/bash
# A/B: issue-4 metadata rows, the 98b5192 build against main's, alternating
cd /work/main
for round in 1 2; do
  for side in before after; do
    b=/work/main/build; [ $side = before ] && b=/work/wt-before/build
    bash bench/run.sh --build $b --results /tmp/ab/$side --fuse-uring off --readers kernel,lazy-local --workloads findsize,findtype --comps zstd,xz --runtime 5 --repeat 3 > /tmp/ab/$side-$round.log 2>&1
  done
done
echo done > /tmp/ab/done
