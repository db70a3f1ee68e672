# SPDX-License-Identifier: Apache-2.0
"""csyms: the product's C files, which functions each defines, declares and
calls. Shared by scripts/check-calls and scripts/check-unused.

Who defines a function and who calls one across files is read from the
objects a build made (`nm` on BUILD/**/*.o), not from the sources: a call
written through a macro and a function whose address is taken (a callback,
a table of handlers) count, a name in a comment or a string does not, as
for the linker. What a file declares, and whether a file calls its own
function (a call the compiler inlined leaves no trace in the object), is
read from the source, comments and strings left out.

The product's files: decoder/ (its unit folders, less protoc-c's proto/),
fs/, mount/, cuda/ (with cuda/batchfs/) and python/*.c. An object is
matched to its source by folder and name: BUILD/D/X.o, or BUILD/D/T-X.o
(automake prefixes the target when it has flags of its own:
build/decoder/cloud/libbfsdecoder_a-s3.o), is TOP/D/X.c. A source built
for several targets (cuda/cudart.c; mount/options.c for a test program too)
has the union of its objects' symbols; those it has as a test program's
(BUILD/mount/tests_unit_check_options-options.o: a target under tests/)
are not the product's and left out. An object older than its source is
left out; a source whose every object is older is stale, an error (build
again: scripts/build build). A source with no object is not built in this
configuration (fetch_nouring.c where liburing is there): its calls are
read from its source, and it is named in the scripts' last line.
"""
import importlib.machinery
import importlib.util
import os
import re
import subprocess

LAYERS = ("decoder", "fs", "mount", "cuda", "python")
# nm's letters: a global function defined here (text, weak, indirect); a
# symbol used here and defined elsewhere (undefined, weak undefined)
DEFINED = set("TWi")
UNDEFINED = set("Uwv")


def rel_sources(top):
    """The product's .c and .h files, as paths relative to top."""
    out = []
    for layer in LAYERS:
        for r, dirs, files in os.walk(os.path.join(top, layer)):
            rel_r = os.path.relpath(r, top)
            if layer == "python":
                dirs[:] = []  # python/*.c only: the package below is pure Python
            dirs[:] = sorted(d for d in dirs if os.path.join(rel_r, d) != "decoder/proto")
            out += [os.path.join(rel_r, f) for f in sorted(files) if f.endswith((".c", ".h"))]
    return out


def unit_of(rel):
    """decoder/X/ for a file of decoder/X/; fs/, mount/, cuda/, python/ otherwise."""
    parts = rel.split(os.sep)
    if parts[0] == "decoder" and len(parts) > 2:
        return "decoder/" + parts[1] + "/"
    return parts[0] + "/"


def check_includes():
    """scripts/check-includes as a module: its modules() and cycles() are the
    one definition of a module and of a cycle."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-includes")
    loader = importlib.machinery.SourceFileLoader("check_includes", path)
    spec = importlib.util.spec_from_loader("check_includes", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def modules(top, rels):
    """{rel: (unit, module)}: check-includes' modules, unit by unit (a
    module is x.h with x.c and the files that share x_impl.h)."""
    ci = check_includes()
    by_unit = {}
    for rel in rels:
        by_unit.setdefault(unit_of(rel), []).append(rel)
    out = {}
    for unit, paths in by_unit.items():
        _, mod = ci.modules([os.path.join(top, p) for p in paths])
        for p in paths:
            out[p] = (unit, mod[os.path.basename(p)])
    return out


def source_of(top, build, obj):
    """TOP/D/X.c for BUILD/D/X.o or BUILD/D/T-X.o, or None (also for an
    object of a test program's: T is tests_...)."""
    d = os.path.relpath(os.path.dirname(obj), build)
    stem = os.path.basename(obj)[:-2]
    if stem.startswith("tests_") and "-" in stem:
        return None
    for n in [stem] + ([stem.split("-", 1)[1]] if "-" in stem else []):
        rel = os.path.normpath(os.path.join(d, n + ".c"))
        if os.path.isfile(os.path.join(top, rel)):
            return rel
    return None


def nm(paths):
    """{object: [(symbol, letter)]}, by one nm per 200 objects."""
    out = {p: [] for p in paths}
    for i in range(0, len(paths), 200):
        chunk = paths[i:i + 200]
        r = subprocess.run(["nm", "-A", "-P", *chunk], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("nm failed: " + r.stderr.strip())
        for line in r.stdout.splitlines():
            obj, _, rest = line.partition(": ")  # "path: symbol letter [value size]"
            f = rest.split()
            if len(f) >= 2 and obj in out:
                out[obj].append((f[0], f[1]))
    return out


class Symbols:
    """The product's functions across files, read from a build.

    defines[src]: the global functions src's objects define; calls[src]:
    those its objects use and do not define (any symbol: the callers keep
    the ones some file defines); definers[name]: the sources defining name.
    unbuilt: .c files with no object (their calls come from the source);
    stale: .c files newer than every object of theirs."""

    def __init__(self, top, build):
        self.top, self.build = top, build
        objs = {s: [] for s in rel_sources(top) if s.endswith(".c")}
        for layer in LAYERS:
            for r, dirs, files in os.walk(os.path.join(build, layer)):
                dirs.sort()
                for f in sorted(files):
                    src = source_of(top, build, os.path.join(r, f)) if f.endswith(".o") else None
                    if src in objs:
                        objs[src].append(os.path.join(r, f))
        fresh, self.stale, self.unbuilt = {}, [], []
        for s, ps in sorted(objs.items()):
            t = os.path.getmtime(os.path.join(top, s))
            ok = [p for p in ps if os.path.getmtime(p) >= t]
            if ok:
                fresh[s] = ok
            elif ps:
                self.stale.append(s)
            else:
                self.unbuilt.append(s)
        syms = nm(sorted(p for ps in fresh.values() for p in ps))
        self.defines, self.calls, self.definers = {}, {}, {}
        for s, ps in fresh.items():
            d, u = set(), set()
            for p in ps:
                for name, letter in syms[p]:
                    if letter in DEFINED:
                        d.add(name)
                    elif letter in UNDEFINED:
                        u.add(name)
            self.defines[s], self.calls[s] = d, u - d
            for name in d:
                self.definers.setdefault(name, []).append(s)
        for s in self.unbuilt:
            self.calls[s] = uses(os.path.join(top, s))

    def problems(self):
        """Why the build cannot be read: no object at all, or stale ones."""
        if not self.defines and not self.stale:
            return ["no object of the product's files under %s: build first "
                    "(scripts/build %s)" % (self.build, self.build)]
        return ["%s is newer than its objects under %s: build again (scripts/build %s)"
                % (s, self.build, self.build) for s in self.stale]

    def note(self):
        """The end of a last line: the sources not built here, if any."""
        if not self.unbuilt:
            return ""
        return " (not built here, calls read from the source: %s)" % ", ".join(self.unbuilt)


# ---- declarations and uses, read from the sources ----

C_WORDS = {
    "if", "for", "while", "switch", "return", "sizeof", "typeof", "__typeof__", "_Alignof",
    "alignof", "_Alignas", "alignas", "_Static_assert", "static_assert", "__attribute__",
    "__attribute", "__declspec", "__asm__", "asm", "_Generic", "__extension__",
}
TOKEN = re.compile(r"[A-Za-z_]\w*|\S")
WORD = re.compile(r"[A-Za-z_]")
EXTERN_C = re.compile(r'extern\s*""\s*\{')


def blank(text):
    """text with comments, string and character literals and preprocessor
    directives turned into spaces (newlines kept, so that lines still
    count), and extern "C" { (a header for C++ too) dropped: its closing
    brace is ignored by the readers below, at file scope."""
    out, i, n, line_start = [], 0, len(text), True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, and its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 1
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            line_start = False
            continue
        out.append(c)
        i += 1
        if c == "\n":
            line_start = True
        elif c not in " \t":
            line_start = False
    return EXTERN_C.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), "".join(out))


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return blank(f.read())


def _called_names(toks):
    """The identifiers followed by '(' outside any parentheses in a run of
    (token, line): in a declaration, the functions it declares."""
    out, paren, prev = [], 0, None
    for tok, line in toks:
        if tok == "(":
            if paren == 0 and prev and WORD.match(prev[0]) and prev[0] not in C_WORDS:
                out.append(prev)
            paren += 1
        elif tok == ")":
            paren -= 1
        prev = (tok, line) if paren == 0 else None
    return out


def _defined_name(head):
    """The function a definition's head (the tokens before its '{') defines,
    or None when it is no function's (a struct, an initializer)."""
    toks = [t for t, _ in head]
    if not toks or toks[-1] != ")" or "=" in toks:
        return None
    names = _called_names(head)
    return names[0][0] if names else None


def _walk(text):
    """(token, line, depth, head, current) for each token: depth the brace
    depth before it; head the tokens of the statement at file scope so far;
    current the function whose body the token is in (None outside one)."""
    head, depth, current, line, at = [], 0, None, 1, 0
    for m in TOKEN.finditer(text):
        tok = m.group()
        line += text.count("\n", at, m.start())
        at = m.start()
        yield tok, line, depth, head, current
        if tok == "{":
            if depth == 0:
                current = _defined_name(head)
                head.append(("{", line))
            depth += 1
        elif tok == "}":
            if depth == 0:
                continue  # extern "C"'s
            depth -= 1
            if depth == 0 and current:
                head, current = [], None
        elif depth == 0:
            if tok == ";":
                head = []
            else:
                head.append((tok, line))


def declarations(path):
    """[(name, line)] of the functions path declares without defining them
    (in a statement at file scope that ends in ';', is no typedef and has no
    braces). Macro calls at file scope come along too: the callers keep only
    the names that some file defines."""
    found, text = [], _read(path)
    for tok, _, depth, head, _ in _walk(text):
        if tok == ";" and depth == 0 and head and head[0][0] != "typedef" and all(
                t != "{" for t, _ in head):
            found += _called_names(head)
    return found


def uses(path):
    """The identifiers path uses: those in a function's body (a function's
    own name in its own body left out: one that only calls itself is not
    used) and those after '=' in a statement at file scope (an initializer:
    a table of handlers)."""
    used = set()
    for tok, _, depth, head, current in _walk(_read(path)):
        if not WORD.match(tok):
            continue
        if depth > 0 and tok != current:
            used.add(tok)
        elif depth == 0 and any(t == "=" for t, _ in head):
            used.add(tok)
    return used


def definitions(path):
    """{name: line} of the functions path defines (static ones too)."""
    out = {}
    for tok, _, depth, head, _ in _walk(_read(path)):
        if tok == "{" and depth == 0:
            names = _called_names(head) if _defined_name(head) else []
            if names:
                out.setdefault(names[0][0], names[0][1])
    return out


def test_uses(top):
    """{identifier: [test files using it]} over tests/**/*.c and *.h."""
    out = {}
    for r, dirs, files in os.walk(os.path.join(top, "tests")):
        dirs[:] = sorted(d for d in dirs if d not in ("node_modules", "__pycache__"))
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                p = os.path.join(r, f)
                for name in uses(p):
                    out.setdefault(name, []).append(os.path.relpath(p, top))
    return out
