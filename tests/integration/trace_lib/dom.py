"""Checks over a DOM dumped by headless Chromium (--dump-dom) of a page
from `warden trace html`. Usage: dom.py DOMFILE CHECK ARGS...; prints
what it found, exit 1 when the check fails."""
import html.parser, sys


class Tree(html.parser.HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "line", "polyline", "rect", "path"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = {"tag": "#root", "attrs": {}, "kids": [], "text": []}
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        n = {"tag": tag, "attrs": dict(attrs), "kids": [], "text": [], "parent": self.stack[-1]}
        self.stack[-1]["kids"].append(n)
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


def walk(n):
    yield n
    for k in n["kids"]:
        yield from walk(k)


def text(n):
    return "".join(n["text"]) + "".join(text(k) for k in n["kids"])


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
