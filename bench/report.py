#!/usr/bin/env python3
"""Reads oha's JSON reports in bench/out and prints the results table, checking as it goes.

  report.py --one FILE.json   one line, for the log while run.sh runs
  report.py --all OUT_DIR     the whole table (Markdown); exits 1 when a check failed
"""
import glob
import json
import os
import sys

# oha's own word for a request it dropped when its time was up (with -w there are none).
DEADLINE = "aborted due to deadline"


def ms(seconds):
    return f"{seconds * 1000:.3f}" if seconds is not None else "-"


def load(path):
    with open(path) as f:
        return json.load(f)


def errors(report):
    found = report.get("errorDistribution") or {}
    return {k: v for k, v in found.items() if k != DEADLINE}


def statuses(report):
    return report.get("statusCodeDistribution") or {}


def line(name, report):
    s = report["summary"]
    p = report.get("latencyPercentiles") or {}
    ok = statuses(report).get("200", 0)
    total = sum(statuses(report).values()) + sum(errors(report).values())
    return (
        f"{name}: {s['requestsPerSec']:.0f} req/s, p50 {ms(p.get('p50'))} ms, "
        f"p99 {ms(p.get('p99'))} ms, p99.9 {ms(p.get('p99.9'))} ms, "
        f"{ok}/{total} answered 200, errors {errors(report) or 'none'}"
    )


def one(path):
    print(line(os.path.basename(path)[:-5], load(path)))


def rps(out, name):
    path = os.path.join(out, name + ".json")
    return load(path)["summary"]["requestsPerSec"] if os.path.exists(path) else None


def print_floor_ratios(out):
    """Saturation throughput as a share of the transport floor of the same protocol, measured
    in the same run: the floor is the mean of the runs before and after the saturation runs."""
    lines = []
    for proto in ("h1", "h2"):
        floors = [f for f in (rps(out, f"floor-{proto}"), rps(out, f"floor-{proto}-after")) if f]
        if not floors:
            continue
        floor = sum(floors) / len(floors)
        for endpoint in ("validate", "mutate"):
            review = rps(out, f"max-{proto}-{endpoint}")
            if review:
                lines.append(
                    f"| {proto} /{endpoint} | {review:.0f} | {floor:.0f} "
                    f"({' / '.join(f'{f:.0f}' for f in floors)}) | {100 * review / floor:.0f} % |"
                )
    if lines:
        print("\nReview throughput against the transport floor (the same POST as text/plain, no body: 415), "
              "same run, typical bodies, saturation:\n")
        print("| protocol, route | reviews/s | floor req/s (before / after) | share of floor |")
        print("|---|---:|---:|---:|")
        for l in lines:
            print(l)


def all_(out):
    failures = []
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        name = os.path.basename(path)[:-5]
        report = load(path)
        s = report["summary"]
        p = report.get("latencyPercentiles") or {}
        mem_path = os.path.join(out, name + ".mem")
        mem = open(mem_path).read().strip() if os.path.exists(mem_path) else ""
        mem = f"{int(mem) / 1024:.1f}" if mem else "-"
        # The floor runs are answered 415 (text/plain), every other run 200.
        expected = "415" if name.startswith("floor-") else "200"
        unexpected = {k: v for k, v in statuses(report).items() if k != expected}
        errs = errors(report)
        if unexpected:
            failures.append(f"{name}: answers other than {expected}: {unexpected}")
        if name.startswith("sigterm-"):
            # Every review the server answered (one log line each) must have reached oha whole;
            # the other errors are requests the draining server never took up.
            log_path = os.path.join(out, name + ".log")
            answered = sum('"message":"review"' in l for l in open(log_path)) if os.path.exists(log_path) else -1
            received = statuses(report).get("200", 0)
            if answered != received:
                failures.append(f"{name}: the server answered {answered} reviews, the client received {received}")
            with open(os.path.join(out, name + ".answered"), "w") as f:
                f.write(f"{answered} reviews answered by the server, {received} received by the client")
            exit_path = os.path.join(out, name + ".exit")
            code = open(exit_path).read().strip() if os.path.exists(exit_path) else "?"
            if code != "0":
                failures.append(f"{name}: the server exited with {code}")
        elif errs:
            failures.append(f"{name}: errors {errs}")
        rows.append(
            f"| {name} | {s['requestsPerSec']:.0f} | {ms(p.get('p50'))} | {ms(p.get('p99'))} "
            f"| {ms(p.get('p99.9'))} | {ms(s.get('slowest'))} | {sum(statuses(report).values())} "
            f"| {sum(errs.values())} | {mem} |"
        )
    print("| run | req/s | p50 ms | p99 ms | p99.9 ms | max ms | 200s | errors | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    print_floor_ratios(out)
    for extra in ("load.txt", "idle.txt", "rotation.txt"):
        path = os.path.join(out, extra)
        if os.path.exists(path):
            print(f"\n{open(path).read().strip()}")
    rotation = os.path.join(out, "rotation.txt")
    if os.path.exists(rotation):
        reloads = int(open(rotation).read().split(":")[-1])
        if reloads < 3:
            failures.append(f"rotation: only {reloads} certificate reloads seen")
    for name in ("sigterm-h1", "sigterm-h2"):
        path = os.path.join(out, name + ".json")
        if os.path.exists(path):
            answered = os.path.join(out, name + ".answered")
            print(f"\n{name}: server exit code "
                  f"{open(os.path.join(out, name + '.exit')).read().strip()}; "
                  f"{open(answered).read().strip() if os.path.exists(answered) else ''}; "
                  f"requests never taken up: {errors(load(path)) or 'none'}")
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
        sys.exit(1)
    print("\nall checks passed")


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one(sys.argv[2])
    else:
        all_(sys.argv[2])
