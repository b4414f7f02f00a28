#!/bin/bash
# Waits up to $1 s for run_all (/tmp/ra.sh, started detached by an earlier call) and the A/B after it to end, then
# returns the log and the small files of the results. Stops at once where the run's log is missing: the machine
# is a fresh one (the last went back with the run), and waiting would only spend device time. Copies the results
# every minute and as soon as run_all ends, so a call cut short by the device budget still returns them.
if [ ! -f /tmp/ra.log ]; then echo "NO RUN HERE: /tmp/ra.log is missing (a fresh machine: $(nvidia-smi -L | head -1))"; exit 3; fi
t0=$(date +%s)
pack() {
  cp /tmp/ra.log $OUT/run_all.log
  (cd /tmp && find ra -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.csv' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \) -size -3M -print0 \
    | tar czf $OUT/ra.tgz --null -T - 2>/dev/null)
}
last=0
while ! grep -q EXTRA_RC /tmp/ra.log && [ $(( $(date +%s) - t0 )) -lt $1 ]; do
  if [ $(( $(date +%s) - last )) -ge 60 ] || grep -q RUN_ALL_RC /tmp/ra.log; then pack; last=$(date +%s); fi
  sleep 5
done
pack
grep -E "^== |RUN_ALL_RC|EXTRA_RC|jpegs:" /tmp/ra.log
tail -3 /tmp/ra.log
