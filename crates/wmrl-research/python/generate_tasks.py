"""Writes AutoResearch task data from scikit-learn's bundled data sets.

Called by `wmrl research tasks build` (crates/wmrl-research/src/suite.rs) as
    python generate_tasks.py SPEC_JSON OUT_DIR
where SPEC_JSON is a list of {id, dataset, kind, test_fraction, seed, noise_features}.
Only bundled data sets are used (load_*), never fetch_*: no network.
For every task it writes OUT_DIR/<id>/public/{train,test,sample_submission}.csv and
OUT_DIR/<id>/hidden/answers.csv, deterministically for the seed, and prints one
JSON object {id: {"n_train", "n_test", "n_features", "classes"}} on stdout.
"""

import csv
import json
import os
import sys

import numpy as np
from sklearn import datasets

LOADERS = {
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
    "diabetes": datasets.load_diabetes,
}


def fmt(x):
    return repr(float(x)) if isinstance(x, (float, np.floating)) else str(x)


def write(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        for row in rows:
            out.writerow([fmt(v) for v in row])


def build(spec, out_dir):
    X, y = LOADERS[spec["dataset"]](return_X_y=True)
    rng = np.random.RandomState(spec["seed"])
    if spec.get("noise_features", 0):
        noise = rng.normal(size=(X.shape[0], spec["noise_features"])) * X.std()
        X = np.hstack([X, noise])
    order = rng.permutation(len(y))
    n_test = int(round(len(y) * spec["test_fraction"]))
    test, train = order[:n_test], order[n_test:]
    ids = rng.permutation(100000)[: len(y)] + 100000  # opaque, unique ids
    classification = spec["kind"] == "classification"
    target = [int(v) for v in y] if classification else [round(float(v), 6) for v in y]
    features = [f"f{j}" for j in range(X.shape[1])]
    task_dir = os.path.join(out_dir, spec["id"])
    write(os.path.join(task_dir, "public", "train.csv"), ["id"] + features + ["target"],
          [[ids[i]] + [round(float(v), 6) for v in X[i]] + [target[i]] for i in train])
    write(os.path.join(task_dir, "public", "test.csv"), ["id"] + features,
          [[ids[i]] + [round(float(v), 6) for v in X[i]] for i in test])
    if classification:
        classes = sorted(set(target))
        majority = max(classes, key=lambda c: sum(1 for i in train if target[i] == c))
        placeholder = majority if spec.get("metric") != "roc-auc" else 0.5
    else:
        classes = []
        placeholder = round(float(np.mean([target[i] for i in train])), 6)
    write(os.path.join(task_dir, "public", "sample_submission.csv"), ["id", "target"],
          [[ids[i], placeholder] for i in test])
    write(os.path.join(task_dir, "hidden", "answers.csv"), ["id", "target"],
          [[ids[i], target[i]] for i in test])
    return {"n_train": len(train), "n_test": len(test), "n_features": X.shape[1],
            "classes": [str(c) for c in classes]}


def main():
    specs = json.loads(sys.argv[1])
    out_dir = sys.argv[2]
    print(json.dumps({spec["id"]: build(spec, out_dir) for spec in specs}))


if __name__ == "__main__":
    main()
