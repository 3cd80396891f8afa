"""How right a comparison is about what computes what, measured against a judge of each
op (tests/helpers/recurrent_judges.py, or any ``name -> Judgement`` with ``.layer`` and
``.place``), for issue 32's bar. All shares weigh ops by their time on their own side, as
``Comparison.coverage`` does (totals over the compared steps).

- ``coverage_<side>``: ``result.coverage``.
- ``right_<side>`` / ``wrong_<side>``: the share of the side's matched op time in rows whose
  ops the judge places alike on both sides (the same set of (layer, direction), a layer-less
  op by its role: loss, clip, ...) / differently. The two add up to 1 (of matched time).
- ``unjudged_<side>``: the share of the side's op time the judge could not place.
- Where the comparison has a layer table (``result.layers``: items with ``control_names``,
  ``test_names``), ``in_layers_<side>``: the share of the side's op time its items hold, and
  ``same_layer_<side>``: of that, the share whose judged layer (or role) is among the judged
  layers of the item's ops on the other side.
- Where it attributes each op (``result.op_layers``: per side, op name -> (label, phase)),
  ``attributed_<side>``: the share of op time in a label, and ``label_agrees_<side>``: of
  that, the share whose judged layer is the one that holds most of its label's time on that
  side; ``labels_same``: whether each label present on both sides holds the same judged
  layer on both.
"""

from __future__ import annotations

from collections import defaultdict

SIDES = ("control", "test")


def op_times(result) -> dict[str, dict[str, float]]:
    """Per side, each op name's time over the compared steps, on the comparison's basis
    (host or device time, warm-up left out), as its coverage counts it."""
    try:
        from tracebridge.analysis.compare.sides import prepare_side
    except ImportError:  # the sides moved: fall back to splitting each row's total over its names
        return _row_split_times(result)
    out = {}
    for side in SIDES:
        prepared = prepare_side(getattr(result, side), [], getattr(result.warmup, side), result.time)
        out[side] = {name: float(total) for name, total in prepared.total.items()}
    return out


def _row_split_times(result) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {side: {} for side in SIDES}
    for row in result.rows:
        for side in SIDES:
            names = getattr(row.names, side)
            for name in names:
                out[side][name] = getattr(row.total_ns, side) / len(names)
    return out


def _places(names, judge) -> set:
    return {judge(n).place for n in names}


def quality(result, judges: dict) -> dict[str, float]:
    """The figures above; ``judges``: {"control": judge, "test": judge}, each ``name -> Judgement``."""
    times = op_times(result)
    figures: dict[str, float] = {}
    for side in SIDES:
        figures[f"coverage_{side}"] = getattr(result.coverage, side)
    right, wrong = defaultdict(float), defaultdict(float)
    for row in result.rows:
        if not (row.names.control and row.names.test):
            continue
        alike = _places(row.names.control, judges["control"]) == _places(row.names.test, judges["test"])
        for side in SIDES:
            time = sum(times[side].get(n, 0.0) for n in getattr(row.names, side))
            (right if alike else wrong)[side] += time
    for side in SIDES:
        matched = right[side] + wrong[side]
        figures[f"right_{side}"] = right[side] / matched if matched else 0.0
        figures[f"wrong_{side}"] = wrong[side] / matched if matched else 0.0
        total = sum(times[side].values()) or 1.0
        figures[f"unjudged_{side}"] = sum(t for n, t in times[side].items()
                                          if judges[side](n).role == "unknown") / total
    figures.update(_layer_table(result, judges, times))
    figures.update(_op_layers(result, judges, times))
    return figures


def _layer_table(result, judges, times) -> dict[str, float]:
    items = getattr(result, "layers", None)
    if not items:
        return {}
    out = {}
    inside, same = defaultdict(float), defaultdict(float)
    for item in items:
        names = {"control": tuple(getattr(item, "control_names", ())), "test": tuple(getattr(item, "test_names", ()))}
        for side, other in (("control", "test"), ("test", "control")):
            theirs = {judges[other](n).place[0] for n in names[other]}
            for name in names[side]:
                time = times[side].get(name, 0.0)
                inside[side] += time
                if judges[side](name).place[0] in theirs:
                    same[side] += time
    for side in SIDES:
        total = sum(times[side].values()) or 1.0
        out[f"in_layers_{side}"] = inside[side] / total
        out[f"same_layer_{side}"] = same[side] / inside[side] if inside[side] else 0.0
    return out


def _op_layers(result, judges, times) -> dict[str, float]:
    attributed = getattr(result, "op_layers", None)
    if not attributed:
        return {}
    out: dict[str, float] = {}
    holders = {}
    for side in SIDES:
        labels = getattr(attributed, side)
        by_label: dict = defaultdict(lambda: defaultdict(float))
        for name, time in times[side].items():
            if name in labels:
                label = labels[name][0] if isinstance(labels[name], (tuple, list)) else labels[name]
                by_label[label][judges[side](name).place[0]] += time
        holders[side] = {label: max(layers, key=layers.get) for label, layers in by_label.items()}
        labelled = sum(sum(layers.values()) for layers in by_label.values())
        agreeing = sum(layers[holders[side][label]] for label, layers in by_label.items())
        total = sum(times[side].values()) or 1.0
        out[f"attributed_{side}"] = labelled / total
        out[f"label_agrees_{side}"] = agreeing / labelled if labelled else 0.0
    shared = set(holders["control"]) & set(holders["test"])
    out["labels_same"] = float(all(holders["control"][label] == holders["test"][label] for label in shared))
    return out


def wrong_rows(result, judges: dict, top: int = 10) -> list[str]:
    """The matched rows the judge disagrees with, largest first: key, rule, and each side's places."""
    times = op_times(result)
    found = []
    for row in result.rows:
        if not (row.names.control and row.names.test):
            continue
        control, test = _places(row.names.control, judges["control"]), _places(row.names.test, judges["test"])
        if control != test:
            time = sum(times["control"].get(n, 0.0) for n in row.names.control)
            found.append((time, f"{row.key} [{row.rule} {row.confidence}]: {sorted(control)} vs {sorted(test)}"))
    return [text for _, text in sorted(found, key=lambda item: -item[0])[:top]]


def print_figures(label: str, figures: dict[str, float]) -> None:
    """One line for ``pytest -s``: percentages, control / test."""
    def pair(name):
        return f"{figures[f'{name}_control']:.0%} / {figures[f'{name}_test']:.0%}"
    parts = [f"coverage {pair('coverage')}", f"right {pair('right')}", f"wrong {pair('wrong')}"]
    if "in_layers_control" in figures:
        parts += [f"in layers {pair('in_layers')}", f"same layer {pair('same_layer')}"]
    if "attributed_control" in figures:
        parts += [f"attributed {pair('attributed')}", f"label agrees {pair('label_agrees')}"]
    print(f"{label}: " + ", ".join(parts))
