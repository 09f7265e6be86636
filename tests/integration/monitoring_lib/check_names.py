#!/usr/bin/env python3
"""check_names.py SCRAPE FILE...: every metric name (warden_...) a Grafana
dashboard (JSON: its queries) or a rules file references must be a family
in SCRAPE, a /metrics text of wardend (histograms: NAME_bucket/_sum/_count).
Prints one PASS/FAIL line per FILE; exit 1 on any FAIL."""
import json
import re
import sys

NAME = re.compile(r"\bwarden_[a-z0-9_]*[a-z0-9]\b")


def families(path):
    fam = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            fam[m.group(1)] = m.group(2)
    return fam


def exported(name, fam):
    if name in fam:
        return True
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and fam.get(name[: -len(suf)]) == "histogram":
            return True
    return False


def queries(obj):
    """Every string under a key that holds a query in a dashboard."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                yield v
            else:
                yield from queries(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from queries(v)


def main():
    fam = families(sys.argv[1])
    bad = 0
    for f in sys.argv[2:]:
        text = open(f, encoding="utf-8").read()
        tag = f.rsplit("/", 1)[-1]
        if f.endswith(".json"):
            try:
                doc = json.loads(text)
            except ValueError as e:
                print(f"FAIL names-{tag}: not valid JSON: {e}")
                bad += 1
                continue
            text = "\n".join(queries(doc))
        names = sorted(set(NAME.findall(text)))
        missing = [n for n in names if not exported(n, fam)]
        if not names:
            print(f"FAIL names-{tag}: references no warden_ metric")
            bad += 1
        elif missing:
            print(f"FAIL names-{tag}: not exported by wardend: {' '.join(missing)}")
            bad += 1
        else:
            print(f"PASS names-{tag} ({len(names)} metrics, all exported)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
