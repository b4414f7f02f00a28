import json, collections, sys, statistics
def load(name):
    t=json.load(open(name)); return [e for e in t["traceEvents"] if e.get("ph")=="X"]
for name in sys.argv[1:]:
    ev=load(name)
    steps=[e for e in ev if e["name"].startswith("mgpu step") and e.get("cat")=="user_annotation"]
    steps=[s for s in steps if int(s["name"].split()[-1])>=505]
    main=steps[0]["tid"]
    print("=====",name,"steps",len(steps),"median step us",statistics.median(s["dur"] for s in steps))
    runtime=collections.defaultdict(lambda: collections.Counter())
    rtdur=collections.defaultdict(lambda: collections.Counter())
    ops=collections.Counter(); opsdur=collections.Counter()
    for s in steps:
        a,b=s["ts"],s["ts"]+s["dur"]
        inside=[e for e in ev if a<=e["ts"]<b and e.get("cat") in ("cuda_runtime","cuda_driver","cpu_op")]
        for e in inside:
            if e["cat"]!="cpu_op":
                runtime[e["tid"]][e["name"]]+=1; rtdur[e["tid"]][e["name"]]+=e["dur"]
    n=len(steps)
    for tid in runtime:
        tot=sum(rtdur[tid].values())/n
        print(" tid",tid,"main" if tid==main else "", "runtime calls/step",round(sum(runtime[tid].values())/n,1),"us/step",round(tot))
        for k,v in runtime[tid].most_common(12):
            print("    %-45s %6.1f  %7.1f us"%(k[:45],v/n,rtdur[tid][k]/n))
    # top-level cpu ops per thread
    for tid in set(e["tid"] for e in ev if e.get("cat")=="cpu_op"):
        tops=collections.Counter(); topd=collections.Counter()
        for s in steps:
            a,b=s["ts"],s["ts"]+s["dur"]
            cs=sorted([e for e in ev if e.get("cat")=="cpu_op" and e["tid"]==tid and a<=e["ts"]<b],key=lambda e:(e["ts"],-e["dur"]))
            end=-1
            for e in cs:
                if e["ts"]>=end:
                    tops[e["name"]]+=1; topd[e["name"]]+=e["dur"]; end=e["ts"]+e["dur"]
        if not tops: continue
        print(" cpu tid",tid,"top-level ops/step",round(sum(tops.values())/n,1),"us/step",round(sum(topd.values())/n))
        for k,v in topd.most_common(25):
            print("    %-45s %5.1f  %7.1f us"%(k[:45],tops[k]/n,v/n))
