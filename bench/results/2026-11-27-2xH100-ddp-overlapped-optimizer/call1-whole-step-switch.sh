#!/bin/bash
# Uncommitted A/B switch for branch ddp-overlapped-optimizer: MGPU_AB_WHOLE_STEP=1 steps the optimizer once, after
# every bucket (main's path). Apply in the working tree before the device call; revert with git checkout.
set -e
f=worker/graphed_step.cpp
sed -i 's|  if (ddp_ == nullptr \|\| scaler_.enabled()) {|  if (ddp_ == nullptr \|\| scaler_.enabled() \|\| std::getenv("MGPU_AB_WHOLE_STEP")) {|' $f
grep -q "<cstdlib>" $f || sed -i 's|#include <algorithm>|#include <algorithm>\n#include <cstdlib>|' $f
grep -n "MGPU_AB_WHOLE_STEP" $f
