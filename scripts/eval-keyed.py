#!/usr/bin/env python3
"""Compare driftstream's keyed configurations with River on a keyed JSONL stream.

Prequential, labels inline, in file order: every event is predicted, scored,
then learned. River (a reference nobody here wrote) runs a logistic regression
per key, one for all keys, and one with shared + per-key weights (feature
augmentation: every feature twice, once shared and once scoped to the key), and
a per-key majority vote of past labels. driftstream runs through
`consumer backtest -keyed` (the service's own pipeline). Accuracy is reported
overall and by the key's number of events (1-10, 11-100, 101-1000, >1000).

  scripts/eval-keyed.py DATA.jsonl [--river] [--configs NAME,...] [--consumer BIN]

Needs: pip install river==0.26.0; a built consumer (go build -o /tmp/consumer ./cmd/consumer).
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile

BUCKETS = [(1, 10), (11, 100), (101, 1000), (1001, None)]

# driftstream configurations: backtest flags beyond the data's.
CONFIGS = {
    "lasec-ss": ["-learners", "lasec-ss", "-learn-from", "queried"],
    "lasec-ss+all": ["-learners", "lasec-ss"],
    "perceptron": ["-learners", "perceptron"],
    "perceptron+mixture": ["-learners", "perceptron", "-population", "mixture"],
    "perceptron+additive": ["-learners", "perceptron", "-population", "additive", "-bias"],
    "lasec+additive": ["-learners", "lasec", "-population", "additive", "-bias"],
    "logreg": ["-learners", "logreg", "-bias"],
    "logreg-nobias": ["-learners", "logreg"],
    "logreg+additive": ["-learners", "logreg", "-population", "additive", "-bias"],
    "logreg+additive-nobias": ["-learners", "logreg", "-population", "additive"],
    "logreg+additive+std": ["-learners", "logreg", "-population", "additive", "-bias", "-standardize"],
    "logreg+additive eta=0.05": ["-learners", "logreg", "-params", '{"logreg":{"eta":0.05}}', "-population", "additive", "-bias"],
    "logreg+additive eta=0.3": ["-learners", "logreg", "-params", '{"logreg":{"eta":0.3}}', "-population", "additive", "-bias"],
    "service defaults": [],
}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def bucket_of(n):
    for i, (lo, hi) in enumerate(BUCKETS):
        if hi is None or n <= hi:
            return i
    return len(BUCKETS) - 1


def summarize(name, right_by_key, events_by_key):
    tot = [0, 0]
    by = [[0, 0] for _ in BUCKETS]
    for k, (r, n) in right_by_key.items():
        b = bucket_of(events_by_key[k])
        by[b][0] += r
        by[b][1] += n
        tot[0] += r
        tot[1] += n
    return {"name": name, "accuracy": tot[0] / tot[1],
            "buckets": [(b[0] / b[1]) if b[1] else None for b in by]}


def river_model(optimizer):
    """River's LogisticRegression: its defaults (SGD 0.01, intercept by SGD
    0.01), or with optimizer "rmsprop" the optimizer of driftstream's logreg
    defaults: RMSProp with lr = eta*sqrt(1-decay) = 0.25*0.1 and rho = 0.99
    (driftstream's accumulator omits RMSProp's (1-rho) factor), the intercept a
    constant feature under the same optimizer, as driftstream's -bias is."""
    from river import linear_model, optim
    if optimizer == "rmsprop":
        return linear_model.LogisticRegression(optimizer=optim.RMSProp(lr=0.025, rho=0.99), intercept_lr=0)
    return linear_model.LogisticRegression()


def river_runs(events, optimizer):
    tag = "" if optimizer == "default" else " (" + optimizer + ")"
    models = {
        "River LR per key" + tag: collections.defaultdict(lambda: river_model(optimizer)),
        "River LR global" + tag: river_model(optimizer),
        "River LR shared+per-key" + tag: river_model(optimizer),
    }
    right = {n: collections.defaultdict(lambda: [0, 0]) for n in list(models) + ["per-key majority"]}
    votes = collections.defaultdict(int)
    for i, ev in enumerate(events):
        k, y = ev["key"], ev["label"] == 1
        x = {str(j): v for j, v in enumerate(ev["x"])}
        if optimizer == "rmsprop":
            x["bias"] = 1.0
        xa = dict(x)
        xa.update({k + ":" + str(j): v for j, v in enumerate(ev["x"])})
        for name, m in models.items():
            model = m[k] if "per key" in name and "shared" not in name else m
            inp = xa if "shared" in name else x
            p = model.predict_proba_one(inp).get(True, 0.0) >= 0.5
            right[name][k][0] += p == y
            right[name][k][1] += 1
            model.learn_one(inp, y)
        p = votes[k] > 0
        right["per-key majority"][k][0] += p == y
        right["per-key majority"][k][1] += 1
        votes[k] += 1 if y else -1
        if i % 50000 == 0:
            print(f"river: {i}/{len(events)}", file=sys.stderr)
    return right


def driftstream(consumer, path, dim, name, flags, env):
    out = tempfile.mkdtemp(prefix="eval-keyed-")
    cmd = [consumer, "backtest", "-keyed", "-data", path, "-format", "jsonl", "-key", "key", "-dim", str(dim),
           "-detectors", "[]", "-q", "-out", out] + flags
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    reps = summary["reports"] if isinstance(summary, dict) and "reports" in summary else summary
    r = reps[0]
    t = r["totals"]
    acc = 1 - t["Mistakes"] / t["Labeled"]
    return {"name": "driftstream " + name, "accuracy": acc, "buckets": [b.get("accuracy") for b in r["by_key_size"]],
            "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--river", action="store_true")
    ap.add_argument("--river-optimizer", default="default", choices=["default", "rmsprop"],
                    help="River's own defaults, or the optimizer of driftstream's logreg defaults")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--consumer", default="/tmp/consumer")
    ap.add_argument("--global-too", action="store_true", help="also run driftstream logreg with every event on one key")
    a = ap.parse_args()
    events = load(a.data)
    dim = len(events[0]["x"])
    events_by_key = collections.Counter(ev["key"] for ev in events)
    rows = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTSTREAM_")}
    for name in a.configs.split(","):
        if name:
            rows.append(driftstream(a.consumer, a.data, dim, name, CONFIGS[name], env))
            print(rows[-1], file=sys.stderr)
    if a.global_too:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for ev in events:
                f.write(json.dumps(dict(ev, key="all")) + "\n")
        g = driftstream(a.consumer, f.name, dim, "logreg global", ["-learners", "logreg", "-bias"], env)
        # score by the original keys' buckets: rerun is per event, so report overall only
        g["buckets"] = [None] * len(BUCKETS)
        rows.append(g)
    if a.river:
        right = river_runs(events, a.river_optimizer)
        for name, by in right.items():
            rows.append(summarize(name, by, events_by_key))
    print(f"{a.data}: {len(events)} events, {len(events_by_key)} keys, dimension {dim}")
    keys_in = [sum(1 for k in events_by_key.values() if bucket_of(k) == i) for i in range(len(BUCKETS))]
    head = ["1-10", "11-100", "101-1000", ">1000"]
    print("| configuration | accuracy | " + " | ".join(f"{h} ({n} keys)" for h, n in zip(head, keys_in)) + " |")
    print("|---|---|" + "---|" * len(BUCKETS))
    for r in rows:
        cells = ["–" if b is None else f"{b:.4f}" for b in r["buckets"]]
        print(f"| {r['name']} | {r['accuracy']:.4f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
