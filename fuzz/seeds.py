#!/usr/bin/env python3
"""Seeds the fuzz corpora (fuzz/corpus/<target>) from the conformance cases, in each target's
input format. Run once before the first `cargo fuzz run`; the checked-in corpus already holds
the minimized result of the runs recorded in FUZZING.md.

  fuzz/seeds.py [CASES_DIR]     (default: tests/conformance/cases)
"""
import glob
import hashlib
import json
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
cases_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../tests/conformance/cases")
ANNOTATION = "jobwarden.io/pod-failure-policy-rule-names"


def put(target, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def walk(value, found):
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("succeededIndexes", "completedIndexes", "failedIndexes") and isinstance(v, str):
                found.setdefault("indexes", []).append(v)
            if k == ANNOTATION and isinstance(v, str):
                found.setdefault("names", []).append(v)
            walk(v, found)
    elif isinstance(value, list):
        for v in value:
            walk(v, found)


found = {}
for path in sorted(glob.glob(os.path.join(cases_dir, "*.json"))):
    case = json.load(open(path))
    body = json.dumps(case["review"], separators=(",", ":")).encode()
    if len(body) <= 8192:
        first = 0 if case["webhook"] == "validate" else 1
        put("review", bytes([first]) + body)
        put("review", bytes([first | 2]) + body)
    walk(case["review"], found)

for text in set(found.get("indexes", [])) | {"0", "1,3-5,7", "0-9", "5-3", "1,1", "+1", "1-2-3", "a", ""}:
    if len(text) <= 4096:
        for completions in (10, 100000, 2**31 - 1):
            put("indexes", struct.pack("<i", completions) + text.encode())
put("indexes", struct.pack("<i", 10) + b"0-3,5|2-4,9")

names = set(found.get("names", [])) | {'["a","b"]', '[null,"x"]', '["1","0"]', '[""]', "[]", "{}", '["a","a"]'}
for text in names:
    for shape in (2, 3, 16 | 2, 8):
        put("rule_names", bytes([shape]) + text.encode())
for target in ("review", "indexes", "rule_names"):
    print(target, len(os.listdir(os.path.join(here, "corpus", target))))
