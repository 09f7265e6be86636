"""Checks over a DOM dumped by headless Chromium (--dump-dom) of a page
from `warden trace html`. Usage: dom.py DOMFILE CHECK ARGS...; prints
what it found, exit 1 when the check fails."""
import html.parser, sys


class Tree(html.parser.HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "line", "polyline", "rect", "path"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        # seq: the element's text and child elements in document order
        self.root = {"tag": "#root", "attrs": {}, "kids": [], "text": [], "seq": []}
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        n = {"tag": tag, "attrs": dict(attrs), "kids": [], "text": [], "seq": [], "parent": self.stack[-1]}
        self.stack[-1]["kids"].append(n)
        self.stack[-1]["seq"].append(n)
        if tag not in self.VOID:
            self.stack.append(n)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                return

    def handle_data(self, d):
        self.stack[-1]["text"].append(d)
        self.stack[-1]["seq"].append(d)


def walk(n):
    yield n
    for k in n["kids"]:
        yield from walk(k)


def text(n):
    return "".join(x if isinstance(x, str) else text(x) for x in n["seq"])


def classes(n):
    return n["attrs"].get("class", "").split()


def main():
    t = Tree()
    t.feed(open(sys.argv[1], encoding="utf-8").read())
    check, args = sys.argv[2], sys.argv[3:]
    nodes = list(walk(t.root))
    if check == "steps":  # RUN N: the run's timeline has steps 0..N
        tl = [n for n in nodes if "timeline" in classes(n) and n["attrs"].get("data-run") == args[0]]
        steps = sorted(int(k["attrs"]["data-step"]) for k in tl[0]["kids"] if "step" in classes(k)) if tl else []
        print("steps", steps)
        sys.exit(0 if steps == list(range(int(args[1]) + 1)) else 1)
    if check == "denial-at":  # STEP: every kernel denial sits in that step
        at = []
        for n in nodes:
            if "ev" in classes(n) and "denial" in classes(n):
                p = n["parent"]
                while p and "step" not in classes(p):
                    p = p.get("parent")
                at.append(p["attrs"].get("data-step") if p else None)
        print("denials at steps", at)
        sys.exit(0 if at == [args[0]] else 1)
    if check == "denial-in":  # ID STEP: element ID is step STEP's section and holds every denial
        d = [n for n in nodes if n["attrs"].get("id") == args[0]]
        if not d:
            print("no element", args[0]); sys.exit(1)
        d = d[0]
        inside = [n for n in walk(d) if "ev" in classes(n) and "denial" in classes(n)]
        every = [n for n in nodes if "ev" in classes(n) and "denial" in classes(n)]
        print("#%s: step %s (%s), %d of %d denials inside" % (
            args[0], d["attrs"].get("data-step"), d["attrs"].get("class"), len(inside), len(every)))
        sys.exit(0 if "step" in classes(d) and d["attrs"].get("data-step") == args[1]
                 and inside and len(inside) == len(every) else 1)
    if check == "replayed-by":  # RUN: a link to RUN's page, said to be its replay
        a = [n for n in nodes if n["tag"] == "a" and n["attrs"].get("href") == args[0] + ".html"]
        said = [text(n["parent"]) for n in a if "replayed-by" in classes(n["parent"])
                and text(n["parent"]).startswith("replayed by ") and text(n) == args[0]]
        print("links to %s.html: %d; in a 'replayed by': %s" % (args[0], len(a), said[:1]))
        sys.exit(0 if said else 1)
    if check == "cut":  # STATE RUN MAX: every payload of RUN in STATE's store over MAX bytes
        # shows its first MAX bytes, then its whole size and hash (the hash
        # of the stored payload); a smaller one is whole and not cut
        import glob, hashlib, json, os, re, zlib
        want, n_cut = {}, 0
        for seg in sorted(glob.glob(os.path.join(args[0], "trace/segments/*.jsonl"))):
            for line in open(seg, encoding="utf-8"):
                r = json.loads(line)
                if r.get("run_id") != args[1]:
                    continue
                for f in ("prompt_ref", "response_ref", "args_ref", "result_ref"):
                    if r.get(f):
                        want["p-%d-%s" % (r["seq"], f)] = (r[f], r["step"])
        cap, bad = int(args[2]), []
        for pid, (ref, step) in sorted(want.items()):
            h = ref.split(":", 1)[1]
            data = zlib.decompress(open(os.path.join(args[0], "trace/blobs", h[:2], h[2:]), "rb").read())
            if "sha256:" + hashlib.sha256(data).hexdigest() != ref:
                bad.append("%s: the store's blob is not %s" % (pid, ref)); continue
            d = [n for n in nodes if n["attrs"].get("id") == pid]
            if not d:
                bad.append("no element " + pid); continue
            pre = [k for k in walk(d[0]) if k["tag"] == "pre"]
            cut = [text(k) for k in walk(d[0]) if "truncated" in classes(k)]
            shown = text(pre[0]) if pre else None
            size = [text(k) for k in walk(d[0]) if "size" in classes(k)]
            if size != ["%d bytes" % len(data)]:
                bad.append("%s: size %s, stored %d bytes" % (pid, size, len(data)))
            if len(data) > cap:
                n_cut += 1
                line = ("truncated: %d of %d bytes shown; the whole payload is %s "
                        "(warden trace payload %s %d)" % (cap, len(data), ref, args[1], step))
                if shown != data[:cap].decode():
                    bad.append("%s: shows %s bytes, not the first %d" % (pid, shown and len(shown), cap))
                if cut != [line]:
                    bad.append("%s: cut line %r, want %r" % (pid, cut[:1], line))
            elif shown != data.decode() or cut:
                bad.append("%s: %d bytes not shown whole (%s)" % (pid, len(data), cut[:1]))
        print("%d payloads, %d cut at %d bytes; %s" % (len(want), n_cut, cap, bad[:3] or "all as stored"))
        sys.exit(0 if want and not bad else 1)
    if check == "open-payload":  # ID FILE: <details id=ID open> shows FILE's text
        want = open(args[1], encoding="utf-8").read()
        d = [n for n in nodes if n["attrs"].get("id") == args[0]]
        if not d:
            print("no element", args[0]); sys.exit(1)
        d = d[0]
        pre = [k for k in walk(d) if k["tag"] == "pre"]
        got = text(pre[0]) if pre else ""
        print("open" if "open" in d["attrs"] else "closed", "text equal:", got == want)
        sys.exit(0 if "open" in d["attrs"] and got == want else 1)
    if check == "scripts":  # the page's script elements (only the head's one)
        n = len([k for k in nodes if k["tag"] == "script"])
        print("scripts", n)
        sys.exit(0 if n == 1 else 1)
    sys.exit("unknown check " + check)


main()
