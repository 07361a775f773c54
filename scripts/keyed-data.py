#!/usr/bin/env python3
"""Convert public real keyed streams into driftstream's keyed JSONL, in time order.

One line per event: {"key": ..., "id": ..., "ts": ..., "x": [...], "label": ±1}.
Every numeric column is min-max scaled to [0, 1] by the column's range over the
whole file (as MOA's normalised Electricity is); a missing value becomes 0 with
a 0/1 "missing" indicator beside it; compass directions become (sin, cos).
Sources, commits and sha256 sums are in docs/LEARNING.md.

  scripts/keyed-data.py weather  weatherAUS.csv            > weather.jsonl
  scripts/keyed-data.py airquality PRSA_Data_*_20130301-20170228.csv > airquality.jsonl
"""
import csv
import json
import math
import sys

COMPASS = {d: i for i, d in enumerate("N NNE NE ENE E ESE SE SSE S SSW SW WSW W WNW NW NNW".split())}


def num(v):
    if v is None or v.strip() in ("", "NA", "nan"):
        return None
    return float(v)


def angle(d):
    if d not in COMPASS:
        return (0.0, 0.0)
    a = 2 * math.pi * COMPASS[d] / 16
    return (math.sin(a), math.cos(a))


def scale(rows, names):
    """Min-max scale rows[i]["num"][name] in place; returns the feature order."""
    lo = {n: math.inf for n in names}
    hi = {n: -math.inf for n in names}
    for r in rows:
        for n in names:
            v = r["num"][n]
            if v is not None:
                lo[n], hi[n] = min(lo[n], v), max(hi[n], v)
    for r in rows:
        x = []
        for n in names:
            v = r["num"][n]
            span = hi[n] - lo[n]
            x.append(0.0 if v is None or span == 0 else (v - lo[n]) / span)
        r["x"] = x + r["extra"]


def weather(paths):
    numeric = ["MinTemp", "MaxTemp", "Rainfall", "Evaporation", "Sunshine", "WindGustSpeed", "WindSpeed9am",
               "WindSpeed3pm", "Humidity9am", "Humidity3pm", "Pressure9am", "Pressure3pm", "Cloud9am", "Cloud3pm",
               "Temp9am", "Temp3pm"]
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for rec in csv.DictReader(f):
                if rec["RainTomorrow"] not in ("Yes", "No"):
                    continue
                extra = []
                for c in ("WindGustDir", "WindDir9am", "WindDir3pm"):
                    extra += angle(rec[c])
                extra.append(1.0 if rec["RainToday"] == "Yes" else 0.0)
                extra += [1.0 if num(rec[c]) is None else 0.0 for c in numeric]
                rows.append({"key": rec["Location"], "ts": rec["Date"] + "T00:00:00Z",
                             "num": {c: num(rec[c]) for c in numeric}, "extra": extra,
                             "label": 1 if rec["RainTomorrow"] == "Yes" else -1})
    scale(rows, numeric)
    return rows


def airquality(paths, ahead=24, threshold=75.0):
    """Label: PM2.5 `ahead` hours later above `threshold` µg/m³ (China's grade II limit)."""
    numeric = ["PM2.5", "PM10", "SO2", "NO2", "CO", "O3", "TEMP", "PRES", "DEWP", "RAIN", "WSPM"]
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            recs = list(csv.DictReader(f))
        for i, rec in enumerate(recs[:-ahead]):
            future = num(recs[i + ahead]["PM2.5"])
            if future is None:
                continue
            h, m = int(rec["hour"]), int(rec["month"])
            extra = list(angle(rec["wd"]))
            extra += [math.sin(2 * math.pi * h / 24), math.cos(2 * math.pi * h / 24),
                      math.sin(2 * math.pi * m / 12), math.cos(2 * math.pi * m / 12)]
            extra.append(1.0 if any(num(rec[c]) is None for c in numeric) else 0.0)
            ts = "%04d-%02d-%02dT%02d:00:00Z" % (int(rec["year"]), m, int(rec["day"]), h)
            rows.append({"key": rec["station"], "ts": ts, "num": {c: num(rec[c]) for c in numeric},
                         "extra": extra, "label": 1 if future > threshold else -1})
    scale(rows, numeric)
    return rows


def main():
    kind, paths = sys.argv[1], sys.argv[2:]
    rows = {"weather": weather, "airquality": airquality}[kind](paths)
    rows.sort(key=lambda r: (r["ts"], r["key"]))  # time order; keys in a fixed order within a time
    out = sys.stdout
    keys = {r["key"] for r in rows}
    positive = sum(r["label"] == 1 for r in rows)
    print(f"{kind}: {len(rows)} events, {len(keys)} keys, dimension {len(rows[0]['x'])}, "
          f"{100 * positive / len(rows):.1f}% positive", file=sys.stderr)
    for i, r in enumerate(rows):
        out.write(json.dumps({"key": r["key"], "id": str(i), "ts": r["ts"],
                              "x": [round(v, 6) for v in r["x"]], "label": r["label"]},
                             separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
