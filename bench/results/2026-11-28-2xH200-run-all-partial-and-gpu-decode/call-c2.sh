#!/bin/bash
# Session 26, call 2 (call 1's machine, warm): Fashion-MNIST (too large to travel with call 1's packages), then
# bench/run_all.sh build-gpu /tmp/ra detached (every default step, one invocation, as make bench-gpu runs it
# after its build), polled here and in the calls after (s26poll.sh).
for f in .mnist/*.deb; do dpkg -x $f /opt/deps; done
ls -la /opt/deps/usr/share/datasets/fashion-mnist > $OUT/call2.txt
source /tmp/env.sh
cat > /tmp/ra.sh <<'SH'
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
while [ -f /tmp/mk.txt ] && ! grep -q MK_RC /tmp/mk.txt; do sleep 2; done
echo "jpegs: $(find $E2E/train -name '*.jpg' | wc -l) at $(date -u +%T)"
start=$(date +%s)
bash bench/run_all.sh build-gpu /tmp/ra
echo "RUN_ALL_RC=$? after $(( $(date +%s) - start )) s at $(date -u +%T)"
SH
setsid nohup bash /tmp/ra.sh > /tmp/ra.log 2>&1 < /dev/null &
bash .gpu/s26poll.sh 540
