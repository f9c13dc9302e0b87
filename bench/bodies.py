#!/usr/bin/env python3
"""Writes the request bodies the benchmark sends, one compact AdmissionReview per line (the
format of oha's -Z option), from the conformance cases plus one synthesized large Job.

  bodies.py CASES_DIR OUT_DIR

OUT_DIR/mix.lines      every conformance case once (creates, updates, status updates, valid
                       and denied, the two 64 KiB succeededIndexes cases) + the large Job
OUT_DIR/typical.lines  the same without the bodies over 16 KiB
OUT_DIR/worst.lines    case 031 alone: a 64 KiB succeededIndexes of single indexes
"""
import copy
import glob
import json
import os
import sys

cases_dir, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)


def compact(value):
    return json.dumps(value, separators=(",", ":"))


reviews = []
for path in sorted(glob.glob(os.path.join(cases_dir, "*.json"))):
    with open(path) as f:
        case = json.load(f)
    reviews.append((os.path.basename(path), case["review"]))
if not reviews:
    sys.exit(f"no conformance cases in {cases_dir}")

# A large but ordinary Job: 8 containers with 40 environment variables and 4 volume mounts
# each, built on the first create case (a real CREATE review).
base = next(r for name, r in reviews if r["request"]["operation"] == "CREATE")
large = copy.deepcopy(base)
large["request"]["uid"] = "bench-large-job"
spec = large["request"]["object"]["spec"]["template"]["spec"]
image = spec["containers"][0].get("image", "busybox:1.36")
spec["containers"] = [
    {
        "name": f"worker-{c}",
        "image": image,
        "command": ["/bin/sh", "-c", "exec /app/run --shard=$(JOB_COMPLETION_INDEX)"],
        "env": [{"name": f"SETTING_{c}_{i}", "value": f"value-{i}-" + "x" * 24} for i in range(40)],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "volumeMounts": [{"name": f"data-{v}", "mountPath": f"/data/{v}"} for v in range(4)],
    }
    for c in range(8)
]
spec["volumes"] = [{"name": f"data-{v}", "emptyDir": {}} for v in range(4)]
reviews.append(("synthesized-large-job", large))

lines = [(name, compact(r)) for name, r in reviews]
typical = [(n, l) for n, l in lines if len(l) <= 16 * 1024]
worst = [(n, l) for n, l in lines if n.startswith("031-")]
for file, chosen in (("mix", lines), ("typical", typical), ("worst", worst)):
    with open(os.path.join(out_dir, f"{file}.lines"), "w") as f:
        for _, line in chosen:
            f.write(line + "\n")
    sizes = sorted(len(l) for _, l in chosen)
    print(
        f"{file}.lines: {len(chosen)} bodies, {sizes[0]}..{sizes[-1]} bytes, "
        f"median {sizes[len(sizes) // 2]}"
    )
