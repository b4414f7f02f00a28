# Aligns one step of a single-GPU trace with one step of a DDP rank's (mgpu --profile-steps, Chrome traces) by
# kernel name, and prints where the DDP step falls behind: the lag at each aligned kernel where it moves by more
# than 25 us, and the kernels only one side runs. Usage: ddp_step_align.py ONE.json TWO.json [STEP_INDEX]
import difflib, json, sys

def step_kernels(path, which):
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    k = sorted([e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")],
               key=lambda e: float(e["ts"]))
    starts = [i for i, e in enumerate(k) if "GatherNormal" in e["name"]]  # a step's first kernel
    a, b = starts[which], starts[which + 1]
    t0 = float(k[a]["ts"])
    return [(e["name"][:60], float(e["ts"]) - t0, float(e.get("dur", 0))) for e in k[a:b]], float(k[b]["ts"]) - t0

which = int(sys.argv[3]) if len(sys.argv) > 3 else 3
one, one_len = step_kernels(sys.argv[1], which)
two, two_len = step_kernels(sys.argv[2], which)
print(f"step: one GPU {one_len:.0f} us, {len(one)} kernels; DDP {two_len:.0f} us, {len(two)} kernels")
matcher = difflib.SequenceMatcher(a=[x[0] for x in one], b=[x[0] for x in two], autojunk=False)
shown = None
for tag, i1, i2, j1, j2 in matcher.get_opcodes():
    if tag != "equal":
        print(f" {tag}: one[{i1}:{i2}] {[x[0][:30] for x in one[i1:i2]][:3]} "
              f"two[{j1}:{j2}] {[(x[0][:30], round(x[2])) for x in two[j1:j2]][:4]}")
        continue
    for i, j in zip(range(i1, i2), range(j1, j2)):
        lag = two[j][1] - one[i][1]
        if shown is None or abs(lag - shown) > 25:
            print(f"  kernel {i:4d} at {one[i][1]:7.0f} us: lag {lag:6.0f} "
                  f"(dur {one[i][2]:.0f} vs {two[j][2]:.0f}) {one[i][0]}")
            shown = lag
