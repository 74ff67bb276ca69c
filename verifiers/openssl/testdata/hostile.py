#!/usr/bin/env python3
"""Hostile requests for pkie-verify-openssl, and a checker of its answers.

  hostile.py gen SEED COUNT REQUESTS.jsonl > in     COUNT request lines made
      by mutating the committed requests: certificate DER with bytes flipped,
      cut, inserted or truncated (base64 kept valid, so the parsers and the
      path builder see it); JSON bytes flipped (often not UTF-8); fields given
      values of the wrong type or range; and lines that are not requests at
      all (deep nesting, NULs, empty). Deterministic for a SEED.
  hostile.py check in out                           exit 1 unless `out` is a
      hello and then exactly one JSON answer per line of `in`, each under
      64 KiB, each either an error or a verdict with a known code, and each
      echoing its request's id (or 0 when the request had none to read).
"""
import base64
import json
import random
import sys

CODES = {"ok", "expired", "not_yet_valid", "unknown_issuer", "bad_signature",
         "name_mismatch", "name_constraints", "path_length", "not_ca",
         "bad_usage", "malformed", "unsupported", "limits", "other"}

ODD = [None, True, -1, 2**63 - 1, 1e300, "", "\u00e9\u4e2d", [], {}, [[]],
       ["===="], ["AAAA"] * 3, "x" * 5000, "..", "*.", "1.2.3.4.5",
       "[::ffff:1.2.3.4]", "\ud800"]

NOT_REQUESTS = [b"[" * 5000, b"{" * 100000, b"\xff\xfe\x00", b"", b" ", b"{}",
                b"null", b'{"id":1}' * 3, b"\x00" * 10, b'"\\ud800"']


def gen(seed, count, path):
    rnd = random.Random(seed)
    reqs = [l for l in open(path).read().splitlines() if l]
    out = sys.stdout.buffer
    for i in range(count):
        r = json.loads(rnd.choice(reqs))
        r["id"] = i
        kind = rnd.randrange(6)
        if kind <= 2:
            field = rnd.choice(["roots", "chain"])
            j = rnd.randrange(len(r[field]))
            der = bytearray(base64.b64decode(r[field][j]))
            for _ in range(rnd.randint(1, 8)):
                if not der:
                    break
                k = rnd.randrange(len(der))
                op = rnd.randrange(4)
                if op == 0:
                    der[k] = rnd.randrange(256)
                elif op == 1:
                    del der[k:k + rnd.randint(1, 40)]
                elif op == 2:
                    der[k:k] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40)))
                else:
                    der = der[:k]
            r[field][j] = base64.b64encode(bytes(der)).decode()
            line = json.dumps(r).encode()
        elif kind == 3:
            line = bytearray(json.dumps(r).encode())
            for _ in range(rnd.randint(1, 5)):
                line[rnd.randrange(len(line))] = rnd.randrange(256)
            line = bytes(line)
        elif kind == 4:
            r[rnd.choice(["id", "roots", "chain", "host", "time", "purpose"])] = rnd.choice(ODD)
            line = json.dumps(r).encode()
        else:
            line = rnd.choice(NOT_REQUESTS)
        out.write(line.replace(b"\n", b" ") + b"\n")


def expected_id(line):
    """The id the helper must echo: the request's, if it has one to read."""
    try:
        r = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None  # unparseable: 0 expected
    if isinstance(r, dict) and type(r.get("id")) is int and r["id"] >= 0:
        return r["id"]
    return 0


def check(inp, outp):
    ins = open(inp, "rb").read().split(b"\n")
    if ins and ins[-1] == b"":
        ins.pop()
    outs = open(outp, "rb").read().split(b"\n")
    if outs and outs[-1] == b"":
        outs.pop()
    bad = []
    hello = json.loads(outs[0]) if outs else {}
    if hello.get("protocol") != "pkie-verify/1":
        bad.append("no hello")
    outs = outs[1:]
    if len(outs) != len(ins):
        bad.append(f"{len(ins)} requests, {len(outs)} answers")
    for n, (q, a) in enumerate(zip(ins, outs)):
        if len(a) >= 64 * 1024:
            bad.append(f"answer {n}: {len(a)} bytes")
            continue
        o = json.loads(a.decode("utf-8"))
        want = expected_id(q)
        # jansson refuses some JSON Python takes (e.g. a lone surrogate
        # escape), answering for id 0: accept 0 wherever an id was read.
        if o.get("id") not in (want, 0) or (want is None and o.get("id") != 0):
            bad.append(f"answer {n}: id {o.get('id')}, want {want}")
        if "error" in o:
            if set(o) != {"id", "error"} or not isinstance(o["error"], str):
                bad.append(f"answer {n}: malformed error {a[:200]!r}")
        elif o.get("code") not in CODES or type(o.get("valid")) is not bool or \
                (o["valid"] != (o["code"] == "ok")) or "phases" not in o:
            bad.append(f"answer {n}: malformed verdict {a[:200]!r}")
    for b in bad[:20]:
        print("FAIL hostile:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
