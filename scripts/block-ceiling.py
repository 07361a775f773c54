#!/usr/bin/env python3
"""The accuracy a linear classifier reaches when refitted on each block of rows
and scored on that same block: an optimistic ceiling for any online linear
learner on a drifting stream (it sees each block's labels before predicting).

  scripts/block-ceiling.py ../shared/data/souza/1CSurr.txt [--block 500]

Needs scikit-learn (pip install scikit-learn). Rows: x1,...,xd,label.
"""
import argparse
import csv
import gzip

from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for r in csv.reader(f):
            if r:
                yield [float(v) for v in r[:-1]], r[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--block", type=int, default=500)
    ap.add_argument("--model", choices=["svm", "logistic"], default="svm")
    a = ap.parse_args()
    data = list(rows(a.path))
    right = total = 0
    for start in range(0, len(data), a.block):
        block = data[start:start + a.block]
        xs, ys = [x for x, _ in block], [y for _, y in block]
        if len(set(ys)) == 1:
            right += len(ys)
        else:
            m = (LinearSVC(C=100.0, max_iter=100000) if a.model == "svm" else LogisticRegression(C=1e4, max_iter=10000)).fit(xs, ys)
            right += sum(int(p == y) for p, y in zip(m.predict(xs), ys))
        total += len(ys)
    print(f"{a.path}: {len(data)} rows, blocks of {a.block}, {a.model}: {100 * right / total:.2f}% of rows right in-sample")


if __name__ == "__main__":
    main()
