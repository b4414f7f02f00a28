#!/bin/bash
# Session 28, call 2 (call 1's machine, warm): Fashion-MNIST (too large to travel with call 1's packages), then
# bench/run_all.sh build-gpu /tmp/ra detached (every default step, one invocation, as make bench-gpu runs it
# after its build), polled here and in the calls after (poll28.sh). Where run_all leaves time, an A/B of
# --numa-binding exclusive on the e2e step's ResNet-18 rows follows it (its synthetic rows reused).
for f in .mnist/*.deb; do dpkg -x $f /opt/deps; done
ls -la /opt/deps/usr/share/datasets/fashion-mnist > $OUT/call2.txt
source /tmp/env.sh
cat > /tmp/ra.sh <<'SH'
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
while [ -f /tmp/mk.txt ] && ! grep -q MK_RC /tmp/mk.txt; do sleep 2; done
echo "jpegs: $(find $E2E/train -name '*.jpg' | wc -l) at $(date -u +%T)"
start=$(date +%s)
bash bench/run_all.sh build-gpu /tmp/ra
rc=$?
took=$(( $(date +%s) - start ))
echo "RUN_ALL_RC=$rc after $took s at $(date -u +%T)"
if [ $took -le 1380 ] && [ -s /tmp/ra/e2e/e2e-bench.json ]; then
  echo "== numa A/B: e2e_bench resnet18, --e2e-flags '--numa-binding exclusive'"
  python3 bench/e2e_bench.py --build build-gpu --out /tmp/ra/numa-ab --models resnet18 --no-pytorch \
    --e2e-flags "--numa-binding exclusive" --synthetic-from /tmp/ra/e2e/e2e-bench.json --run-timeout 120
  echo "EXTRA_RC=$? at $(date -u +%T)"
else
  echo "EXTRA_RC=skipped (run_all took $took s)"
fi
SH
setsid nohup bash /tmp/ra.sh > /tmp/ra.log 2>&1 < /dev/null &
bash .gpu/poll28.sh 540
