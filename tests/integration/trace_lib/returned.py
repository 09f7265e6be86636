"""Check a payload_read record's `returned` against what the reader got.
Usage: returned.py PAYLOAD_READ_JSON OBJECTS_JSON [events] -> "ok" or
why not ("events": the objects are event lines, whose seq is the event
stream's, not a record's: named as a field, not listed).
OBJECTS_JSON: a list of the objects (records, payload entries, an event,
a view, an approval) or one object. Every object's member paths (an
object's members are named too: "event.target", to depth 4) must be the
fields of exactly one entry of `returned`, which counts it and lists its
seq when it has one; no entry may count more than was returned."""
import json, sys


def paths(o, prefix="", depth=0, out=None):
    out = set() if out is None else out
    for k, v in o.items():
        p = prefix + "." + k if prefix else k
        out.add(p)
        if isinstance(v, dict) and depth < 4:
            paths(v, p, depth + 1, out)
    return out


pr = json.loads(sys.argv[1])
objs = json.loads(sys.argv[2])
objs = objs if isinstance(objs, list) else [objs]
ret = pr.get("returned")
if not isinstance(ret, list):
    sys.exit("no returned list in %s" % sys.argv[1][:300])
want = {}
for o in objs:
    k = tuple(sorted(paths(o)))
    g = want.setdefault(k, {"count": 0, "seqs": []})
    g["count"] += 1
    if isinstance(o.get("seq"), int) and sys.argv[3:] != ["events"]:
        g["seqs"].append(o["seq"])
got = {}
for g in ret:
    k = tuple(g["fields"])
    if k in got:
        sys.exit("two entries with fields %s" % (k,))
    got[k] = {"count": g["count"], "seqs": g["seqs"]}
if got != want:
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    sys.exit("returned differs: missing %s, extra %s, counts %s vs %s" % (
        missing[:2], extra[:2], [want[k]["count"] for k in want][:5], [got[k]["count"] for k in got][:5]))
print("ok")
