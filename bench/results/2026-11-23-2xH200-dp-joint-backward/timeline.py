import json, sys, statistics, collections
ev=[e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph")=="X"]
steps=sorted([e for e in ev if e["name"].startswith("mgpu step") and e.get("cat")=="user_annotation"],key=lambda e:e["ts"])
main=steps[0]["tid"]
pick=[s for s in steps if int(s["name"].split()[-1]) in map(int,sys.argv[2].split(","))]
for s in pick:
    a,b=s["ts"],s["ts"]+s["dur"]
    print("=====",s["name"],"dur",s["dur"])
    inside=sorted([e for e in ev if a<=e["ts"]<b and e.get("cat") in ("cuda_runtime","cuda_driver","cpu_op","user_annotation") and e is not s],key=lambda e:e["ts"])
    # per thread: first,last
    by=collections.defaultdict(list)
    for e in inside: by[e["tid"]].append(e)
    for tid,es in by.items():
        print(" tid",tid,"first %.0f last-end %.0f n %d"%(es[0]["ts"]-a,max(e["ts"]+e["dur"] for e in es)-a,len(es)))
    end=-1
    for e in inside:
        if e["tid"]!=main: continue
        if e["ts"]>=end or e["cat"]!="cpu_op":
            print("   %7.0f %6.0f %-10s %s"%(e["ts"]-a,e["dur"],e["cat"][:10],e["name"][:70]))
            if e["cat"]=="cpu_op": end=e["ts"]+e["dur"]
