#!/usr/bin/env python3
"""swa-harness report: accuracy and performance reports from HDF5 results files.

  swa_report.py RESULTS.h5 [MORE.h5 ...] -o DIR [--bisect BISECT_DIR ...]   (bisect*/ beside the files: read too)
                                                     -> DIR/report.html (self-contained), DIR/summary.md
  swa_report.py --compare BASE.h5 CAND.h5 -o DIR [--pair OLD=NEW ...]
                                                     -> DIR/compare.md, DIR/compare.html; exit 1 on regressions,
                                                        2 when no rows pair (by scenario ID and DUT label)

Run with /usr/bin/python3 (Debian's python3-h5py, python3-numpy, python3-matplotlib).
"""
import argparse
import base64
import html
import io
import json
import os
import re
import shlex
import sys
from collections import Counter, defaultdict

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swa_results  # noqa: E402  (beside this file, installed with it)
import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _tex_safe(text):
    """Text from a results file (a DUT's name, a ceiling's words) as matplotlib must get it: a `$` is a
    dollar sign, not the start of TeX to parse. (Turning the parser off instead breaks the log axes'
    tick labels, which matplotlib writes as TeX.)"""
    return str(text).replace("$", r"\$")

STATUSES = ("pass", "warn", "fail", "error", "skip")
COLORS = {"pass": "#d9f2d9", "warn": "#fff1a8", "fail": "#f8c9c9", "error": "#f3ddb0", "skip": "#e4e4e4"}
# numerics.md: relative L2 levels for N(0,1) inputs (fp32: far below 1e-5).
REL_L2_LEVEL = {"fp32": 1e-5, "fp16": 2e-4, "bf16": 2e-3}


_str = swa_results.text


def load(path):
    try:
        return swa_results.load(path)
    except swa_results.ResultsFileError as e:
        raise OSError(str(e)) from e


def combine(files):
    scenarios, results, perf = {}, [], []
    for d in files:
        for s in d["scenarios"]:
            scenarios.setdefault(s["id"], s)
        results += d["results"]
        perf += d["perf"]
    return scenarios, results, perf


def plot_against_context(ax, series, ylabel):
    """One line per label over a log2 context axis, from zero up; several points at one context (the same
    case in two sweeps) as their median."""
    for label, pts in sorted(series.items()):
        by_x = defaultdict(list)
        for x, y in pts:
            by_x[x].append(y)
        xs = sorted(by_x)
        ax.plot(xs, [float(np.median(by_x[x])) for x in xs], marker="o", label=_tex_safe(label))
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel(ylabel)
    legend(ax, len(series))


def figure_tag(fig, alt):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def ratio(r):
    """max abs error over the threshold applied: the verdict line is 1."""
    if r["status"] in ("skip", "error") or r["threshold"] <= 0:
        return None
    if r["nan_count"] + r["inf_count"] > 0:
        return np.inf
    return r["max_abs"] / r["threshold"]


def verdict_counts(results):
    counts = defaultdict(Counter)
    for r in results:
        counts[(r["dut"], r["dtype"], r["mode"])][r["status"]] += 1
    return counts


def score_features(s):
    """The score semantics and KV storage a scenario uses (golden/README.md): sinks, soft-cap, two-sided
    window, FP8 KV (e4m3/e5m2), a paged KV cache; 'plain' when none. Files written before these columns
    existed have none of them."""
    features = []
    if _str(s.get("sinks", "none")) not in ("none", ""):
        features.append("sinks")
    if _str(s.get("softcap", "0")) not in ("0", "", "none"):
        features.append("soft-cap")
    if int(s.get("window_right", 0) or 0) > 0:
        features.append("two-sided window")
    kv = _str(s.get("kv_dtype", "dtype"))
    if kv.startswith("fp8"):
        features.append("KV " + kv)
    if _str(s.get("cache", "")) == "paged":
        features.append("KV paged")
    return features or ["plain"]


def feature_counts(results, scenarios):
    """(dut, feature) -> (verdict counts, worst error over threshold); a scenario counts under each feature."""
    counts, worst = defaultdict(Counter), defaultdict(float)
    for r in results:
        for feature in score_features(scenarios.get(r["scenario_id"], {})):
            counts[(r["dut"], feature)][r["status"]] += 1
            q = ratio(r)
            if q is not None:
                worst[(r["dut"], feature)] = max(worst[(r["dut"], feature)], q)
    return counts, worst


def feature_html(counts, worst):
    out = ["<table><tr><th>DUT</th><th>score feature</th>" + "".join(f"<th>{s}</th>" for s in STATUSES)
           + "<th>worst error / threshold</th></tr>"]
    for (dut, feature), c in sorted(counts.items()):
        cells = "".join(f'<td style="background:{COLORS[s] if c[s] else "white"}">{c[s]}</td>' for s in STATUSES)
        out.append(f"<tr><td>{html.escape(dut)}</td><td>{html.escape(str(feature))}</td>{cells}<td>{worst.get((dut, feature), 0):.3g}</td></tr>")
    return "\n".join(out + ["</table>"])


# ---- figures ---------------------------------------------------------------------------------
# Each figure function returns [(figure, caption)]; figure_tags() embeds them. Tests read the figure
# objects (reports/tests/test_report.py): no panel is drawn for a DUT, dtype or mode the data lacks.
MAX_TICK_LABELS = 16  # per axis: a sweep with ~40 windows (full.yaml) labels every 3rd
MAX_CELL_TEXT = (12, 10)  # a heatmap writes its values in the cells up to this many rows x columns
DTYPE_ORDER = ("fp32", "fp16", "bf16")
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8-e4m3": 1, "fp8-e5m2": 1}


def figure_tags(figures):
    return [figure_tag(fig, alt) for fig, alt in figures]


def thin_ticks(ax, axis, values, fontsize=7):
    """Ticks at every k-th of `values` (one per category position), at most MAX_TICK_LABELS labelled."""
    step = max(1, -(-len(values) // MAX_TICK_LABELS))
    positions = list(range(0, len(values), step))
    labels = [str(values[i]) for i in positions]
    if axis == "x":
        ax.set_xticks(positions, labels, fontsize=fontsize, rotation=45 if len(values) > 8 else 0)
    else:
        ax.set_yticks(positions, labels, fontsize=fontsize)
    return step


def legend(ax, count, fontsize=7):
    """A legend that stays readable with many series: beside the plot in columns past 10 entries."""
    if count > 10:
        ax.legend(fontsize=6, ncol=-(-count // 16), loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=fontsize)


def heatmap_figures(results, scenarios):
    """Per DUT, the worst error over threshold by window x head size, one panel per dtype that DUT has."""
    figures = []
    for dut in sorted({r["dut"] for r in results}):
        panels = []
        for dtype in DTYPE_ORDER:
            cells = defaultdict(float)
            for r in results:
                q = ratio(r)
                if r["dut"] != dut or r["dtype"] != dtype or q is None or r["scenario_id"] not in scenarios:
                    continue
                s = scenarios[r["scenario_id"]]
                key = (s["window"], s["head_size"])
                cells[key] = max(cells[key], min(q, 1e6))
            if cells:
                panels.append((dtype, cells))
        if not panels:  # nothing judged in a dtype this report draws (a newer dtype, or a crafted file)
            continue
        rows = max(len({k[0] for k in c}) for _, c in panels)
        height = min(3.6 + 0.12 * max(0, rows - 12), 9.0)
        fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), height), squeeze=False, layout="constrained")
        for ax, (dtype, cells) in zip(axes[0], panels):
            windows = sorted({k[0] for k in cells})
            heads = sorted({k[1] for k in cells})
            grid = np.full((len(windows), len(heads)), np.nan)
            for (w, h), v in cells.items():
                grid[windows.index(w), heads.index(h)] = np.log10(max(v, 1e-6))
            im = ax.imshow(grid, cmap="RdYlGn_r", vmin=-3, vmax=1, aspect="auto", interpolation="nearest")
            thin_ticks(ax, "x", heads)
            step = thin_ticks(ax, "y", windows)
            ax.set_xlabel("head size")
            ax.set_ylabel("window" + (f" ({len(windows)}, one in {step} labelled)" if step > 1 else ""))
            ax.set_title(_tex_safe(f"{dut} {dtype}"), fontsize=9)
            if len(windows) <= MAX_CELL_TEXT[0] and len(heads) <= MAX_CELL_TEXT[1]:
                for i in range(len(windows)):
                    for j in range(len(heads)):
                        if not np.isnan(grid[i, j]):
                            ax.text(j, i, f"{10 ** grid[i, j]:.2g}", ha="center", va="center", fontsize=6)
            fig.colorbar(im, ax=ax, label="log10 err / threshold")
        figures.append((fig, f"Worst error over threshold by window and head size: {dut} (above 1 fails)"))
    return figures


def heatmaps(results, scenarios):
    return figure_tags(heatmap_figures(results, scenarios))


def distribution_figures(results):
    judged = [r for r in results if ratio(r) is not None]
    dtypes = [d for d in DTYPE_ORDER if any(r["dtype"] == d for r in judged)]
    if not dtypes:
        return []
    fig, axes = plt.subplots(2, len(dtypes), figsize=(4.8 * len(dtypes), 6.8), squeeze=False, layout="constrained")
    for j, dtype in enumerate(dtypes):
        rows = [r for r in judged if r["dtype"] == dtype]
        duts = sorted({r["dut"] for r in rows})
        ax = axes[0][j]
        for dut in duts:
            q = np.array([min(ratio(r), 1e6) for r in rows if r["dut"] == dut])
            ax.hist(np.log10(np.maximum(q, 1e-6)), bins=30, alpha=0.5, label=_tex_safe(dut))
        ax.axvline(0, color="red", lw=1.5, label="tolerance (fail above)")
        ax.set_xlabel("log10 max|err| / threshold")
        ax.set_title(f"{dtype}: error vs tolerance", fontsize=9)
        ax.legend(fontsize=6)
        ax = axes[1][j]
        for dut in duts:
            rel = np.array([r["rel_l2"] for r in rows if r["dut"] == dut])
            ax.hist(np.log10(np.maximum(rel, 1e-12)), bins=30, alpha=0.5, label=_tex_safe(f"{dut} rel L2"))
        base = np.array([r["baseline_rel_l2"] for r in rows])
        if base.size:
            ax.axvline(np.log10(max(np.median(base), 1e-12)), color="black", ls="--", lw=1, label="baseline median")
        ax.axvline(np.log10(REL_L2_LEVEL[dtype]), color="red", lw=1, label="numerics.md level")
        ax.set_xlabel("log10 relative L2 error")
        mean_ulp = np.array([r["mean_ulp"] for r in rows])
        ax.set_title(f"{dtype}: relative L2 (mean ULP median {np.median(mean_ulp) if mean_ulp.size else 0:.2g})", fontsize=9)
        ax.legend(fontsize=6)
    return [(fig, "Distributions of the error against the tolerance line and of the relative L2 error")]


def distributions(results):
    return figure_tags(distribution_figures(results))


def window_edge_figures(results):
    rows = [r for r in results if ratio(r) is not None]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    duts = sorted({r["dut"] for r in rows})
    for dut in duts:
        pts = [(r["worst_window_edge"], min(ratio(r), 1e6)) for r in rows if r["dut"] == dut]
        x, y = zip(*pts)
        ax.scatter(x, np.maximum(y, 1e-6), s=10, alpha=0.6, label=_tex_safe(dut))
    ax.axhline(1, color="red", lw=1)
    ax.set_xscale("symlog", linthresh=4)
    ax.set_yscale("log")
    ax.set_xlabel("worst row's position - (W-1)  (>= 1: the row has lost keys to the window)")
    ax.set_ylabel("max|err| / threshold")
    legend(ax, len(duts))
    return [(fig, "Error by distance to the window edge: mask-edge bugs cluster at small positive distances")]


def window_edge(results):
    return figure_tags(window_edge_figures(results))


def minimum_bytes(p, scenario):
    """The bytes a timed case must move at least, each tensor once: Q read and O written at the dtype's
    width, K and V read at the KV dtype's (FP8 KV: 1 byte). Prefill and chunked prefill: every token's
    Q, K, V and O. Decode, per step (as time_ms): the K/V rows of the keys the step attends (`pairs`,
    per KV head) and each sequence's one Q and O row. No re-reads, page tables or LSE counted."""
    b = ELEMENT_BYTES.get(p["dtype"], 0)
    kv = _str(scenario.get("kv_dtype", "dtype")) if scenario else "dtype"
    kvb = ELEMENT_BYTES.get(kv, b) if kv not in ("dtype", "", "none") else b
    d, hq, hkv = p["head_size"], p["heads"], p["kv_heads"]
    if p["mode"] == "decode":
        return p["pairs"] * 2 * hkv * d * kvb + 2 * p["batch"] * hq * d * b
    return p["tokens"] * (2 * hq * d * b + 2 * hkv * d * kvb)


ROOFLINE_BYTES = ("arithmetic intensity = FLOPs (4 D pairs Hq, as the perf rows count them) over the bytes the case "
                  "must move at least: Q read and O written once at the dtype's width, K and V read once at the KV "
                  "dtype's; prefill every token's, decode per step the attended keys' K/V rows (per KV head); no "
                  "re-reads, page tables or LSE")


def roofline_figures(perf, scenarios):
    """The roofline of the perf rows against the compute roof (SGEMM) and the bandwidth roof (STREAM
    triad) of the same run, as each row carries them. Returns (figures, note): no figure, and a note
    saying why, without perf rows or without both roofs; the note says what was left out otherwise."""
    if not perf:
        return [], "No roofline: the file has no /perf rows."
    def positive(x):
        return np.isfinite(x) and x > 0

    roofed = [p for p in perf if positive(p.get("ceiling_gflops", 0)) and positive(p.get("triad_gbs", 0))]
    if not roofed:
        return [], ("No roofline: the /perf rows carry no same-run STREAM triad (triad_gbs; files written before "
                    "it have none) or no SGEMM ceiling. Rerun the perf sweep with this version to get one.")
    # The roofs are the host CPU's: a CUDA DUT's rows are not drawn against them.
    gpu = [p for p in roofed if p["dut"].split(":", 1)[0] == "cuda"]
    drawn = [p for p in roofed if p not in gpu and positive(p["gflops"]) and positive(p["pairs"] * p["heads"] * p["head_size"])
             and positive(minimum_bytes(p, scenarios.get(p["scenario_id"])))]
    if not drawn:
        return [], f"No roofline: none of the {len(roofed)} roofed /perf rows is a CPU-side DUT's with a time and a byte count."
    runs = sorted({(p["ceiling_gflops"], p["triad_gbs"], p["ceiling"]) for p in drawn})
    fig, ax = plt.subplots(figsize=(8.5, 5.0), layout="constrained")
    points = defaultdict(list)
    for p in drawn:
        ai = 4.0 * p["head_size"] * p["pairs"] * p["heads"] / minimum_bytes(p, scenarios.get(p["scenario_id"]))
        run = runs.index((p["ceiling_gflops"], p["triad_gbs"], p["ceiling"]))
        points[(p["mode"], p["dtype"], run)].append((ai, p["gflops"]))
    xs = [x for pts in points.values() for x, _ in pts]
    lo = min(xs + [min(c / t for c, t, _ in runs)]) / 4
    hi = max(xs + [max(c / t for c, t, _ in runs)]) * 4
    x = np.geomspace(lo, hi, 256)
    for i, (compute, triad, what) in enumerate(runs):
        tag = f"run {i + 1}: " if len(runs) > 1 else ""
        ls = ("-", "--", ":", "-.")[i % 4]
        ridge = compute / triad
        ax.plot(x, np.minimum(compute, triad * x), color="black", ls=ls, lw=1.2)
        # The compute label just right of the ridge under the flat roof, the bandwidth label over the
        # slope's foot, each on a white box over the lines and under the points (none hides a point).
        box = {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85}
        ax.annotate(_tex_safe(f"{tag}compute roof {compute:.1f} GFLOP/s ({what})"), (ridge * 1.15, compute), xytext=(0, -5 - 12 * i),
                    textcoords="offset points", ha="left", va="top", fontsize=8, bbox=box, zorder=2.5)
        ax.annotate(f"{tag}bandwidth roof {triad:.1f} GB/s (STREAM triad, same run)", (lo * 1.3, triad * lo * 1.3),
                    xytext=(4, 6 + 12 * i), textcoords="offset points", ha="left", va="bottom", fontsize=8, bbox=box, zorder=2.5)
        ax.axvline(ridge, color="grey", lw=0.6, ls=":")
    markers = {"prefill": "o", "chunked_prefill": "s", "decode": "^"}
    colors = {"fp32": "tab:blue", "fp16": "tab:orange", "bf16": "tab:green"}
    for (mode, dtype, run), pts in sorted(points.items()):
        label = f"{mode} {dtype}" + (f" (run {run + 1})" if len(runs) > 1 else "")
        ax.scatter(*zip(*pts), marker=markers.get(mode, "D"), color=colors.get(dtype, "tab:purple"), s=28,
                   alpha=0.8, label=_tex_safe(label), edgecolors="black", linewidths=0.4, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [y for pts in points.values() for _, y in pts]
    ax.set_ylim(min(ys + [triad * lo for _, triad, _ in runs]) / 2, max(c for c, _, _ in runs) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved at least)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    if len(points) > 10:
        legend(ax, len(points))
    else:  # high intensity at a low rate is the empty corner
        ax.legend(fontsize=7, loc="lower right")
    note = ROOFLINE_BYTES + "."
    if gpu:
        note += f" {len(gpu)} cuda row(s) not drawn: both roofs are the host CPU's."
    duts = ", ".join(sorted({p["dut"] for p in drawn}))
    return [(fig, f"Roofline: each perf row's achieved rate against the same run's compute and bandwidth roofs ({duts})")], note


def kv_label(p, scenarios):
    """' KV fp8-e4m3' for a row whose scenario stores the KV cache in FP8, else ''."""
    kv = _str((scenarios or {}).get(p["scenario_id"], {}).get("kv_dtype", "dtype"))
    return f" KV {kv}" if kv.startswith("fp8") else ""


def perf_figure_list(perf, scenarios=None):
    figures = []
    if not perf:
        return figures
    prefill = [p for p in perf if p["mode"] == "prefill"]
    if prefill:
        fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
        series = defaultdict(list)
        for p in prefill:
            label = f"{p['dut']} {p['dtype']} " + ("causal" if p["window"] == 0 else f"SWA W={p['window']}")
            series[label].append((p["tokens"] / max(p["batch"], 1), p["gflops"]))
        for label, pts in sorted(series.items()):
            by_len = defaultdict(list)
            for x, y in pts:
                by_len[x].append(y)
            xs = sorted(by_len)
            ax.plot(xs, [float(np.median(by_len[x])) for x in xs], marker="o", label=_tex_safe(label))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("GFLOP/s (4 D pairs Hq / time)")
        legend(ax, len(series))
        figures.append((fig, "Prefill GFLOP/s against sequence length, SWA vs causal"))
    decode = [p for p in perf if p["mode"] == "decode"]
    if decode:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
        times, mem = defaultdict(list), defaultdict(list)
        for p in decode:
            ctx = p["tokens"] / max(p["batch"], 1)
            kv = kv_label(p, scenarios)
            times[f"{p['dut']} {p['dtype']}{kv} {p['cache']} W={p['window']}"].append((ctx, p["time_ms"]))
            mem[f"{p['cache']} {p['dtype']}{kv}"].append((ctx, p["kv_bytes"] / 2**20))
        plot_against_context(a1, {label: sorted(pts) for label, pts in times.items()}, "decode step time (ms, median)")
        plot_against_context(a2, {label: sorted(set(pts)) for label, pts in mem.items()}, "KV cache MiB")
        figures.append((fig, "Decode step time and KV cache memory against context, per KV cache (ring, linear, paged)"))
    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    by_dut = defaultdict(list)
    for p in perf:
        by_dut[p["dut"]].append(p["ceiling_fraction"])
    ax.boxplot(list(by_dut.values()), labels=[_tex_safe(d) for d in by_dut])
    if len(by_dut) > 3 or max(len(d) for d in by_dut) > 24:
        ax.tick_params(axis="x", labelrotation=20, labelsize=7)
    ax.axhline(1, color="red", lw=1)
    ax.set_ylabel("fraction of the ceiling")
    ceilings = sorted({(p["ceiling"], round(p["ceiling_gflops"], 1)) for p in perf})
    ax.set_title(_tex_safe("each DUT against its ceiling: " + "; ".join(f"{c} = {g} GFLOP/s" for c, g in ceilings)), fontsize=8)
    figures.append((fig, "Each DUT's GFLOP/s as a fraction of the same-run ceiling"))
    return figures


def perf_figures(perf, scenarios=None):
    return figure_tags(perf_figure_list(perf, scenarios))


# ---- html and markdown -------------------------------------------------------------------------
def dut_from_anywhere(dut, path):
    """The DUT's name with its file absolute (the dut_path column) where the name gives it relative:
    plugin:lib.so -> plugin:/abs/lib.so, python:k.py:f -> python:/abs/k.py:f (judge/results.hpp's rule)."""
    if not path:
        return dut
    label, sep, name = dut.partition("=") if re.match(r"^[A-Za-z0-9_.-]{1,32}=", dut) else ("", "", dut)
    for kind in ("plugin:", "python:"):
        if name.startswith(kind):
            target = name[len(kind):]
            if kind == "plugin:":
                return label + sep + kind + path
            stem = target.rsplit(".py:", 1)
            if len(stem) == 2:
                return label + sep + kind + path + ":" + stem[1]
    return dut


def rerun_command(meta_by_row, r):
    """The command that reruns the row: `run` on its file's sweep file; where the file names none (a
    pytest session's --swa-out whose rows came from several sweep files, or from no swa_sweep mark),
    the command that wrote the row and the test's ID, since no `run` command can be made up for it."""
    meta = meta_by_row.get((r["scenario_id"], r["dut"]), {})
    sweep = meta.get("sweep_file", "")
    scenario = "'" + r["scenario_id"].replace("'", "'\\''") + "'"  # always quoted, as the console's line
    if sweep:
        # As the console's lines: the program as `swa-harness report` was started (SWA_HARNESS_COMMAND:
        # its absolute path, or its name when it is the one on PATH), the files absolutely (a file
        # written before run recorded the sweep absolutely names it as it was typed), the output beside
        # the results, never over them.
        program = os.environ.get("SWA_HARNESS_COMMAND") or "swa-harness"
        results = meta.get("results_path", "")
        out = os.path.join(os.path.dirname(os.path.abspath(results)), "rerun.h5") if results else "rerun.h5"
        return (f"{shlex.quote(program)} run {shlex.quote(sweep)} --filter {scenario} --dut "
                f"{shlex.quote(dut_from_anywhere(r['dut'], r.get('dut_path', '')))} --out {shlex.quote(out)}")
    command = meta.get("command", "")
    # The pytest plugin names a scenario's test by its ID with `=` written `:` (pytest_plugin.test_id).
    test = re.sub(r"[^\w:+\-./\[\]\\]", "_", r["scenario_id"].replace("=", ":"))
    return (f"no sweep file recorded for this row: rerun {command or 'the command that wrote it'} "
            f"(the test named [{test}], DUT {r['dut']})")


FAILURES_SHOWN = 3  # per group of DUT, mode and dtype; the rest folded under <details>
BISECT_FIELDS = ("dut", "scenario", "reproduces", "class", "source", "evidence", "pattern")


def load_bisect(directory):
    """A bisect output folder's summary.json (harness/README.md, Bisect); ValueError naming what is wrong."""
    path = os.path.join(directory, "summary.json")
    if not os.path.isfile(path):
        raise ValueError(f"--bisect {directory}: no summary.json there (the folder bisect --out wrote)")
    with open(path, encoding="utf-8") as f:
        try:
            summary = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{path}: not a bisect summary (not an object; fields: {', '.join(BISECT_FIELDS)})")
    missing = [k for k in BISECT_FIELDS if k not in summary]
    if missing:
        raise ValueError(f"{path}: not a bisect summary (missing {', '.join(missing)}; fields: {', '.join(BISECT_FIELDS)})")
    for k in ("dut", "scenario", "class", "source"):
        if not isinstance(summary[k], str):
            raise ValueError(f"{path}: not a bisect summary (field {k} is not a string)")
    for k in ("evidence", "pattern"):
        if not isinstance(summary[k], list) or not all(isinstance(x, str) for x in summary[k]):
            raise ValueError(f"{path}: not a bisect summary (field {k} is not a list of strings)")
    summary["folder"] = directory
    return summary


def _natural(name):
    """bisect-2 before bisect-10."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


def sibling_bisects(paths, given, rows):
    """The bisect folders beside the results files: the console's `diagnose:` lines write each group's
    to RESULTS_DIR/bisect-N, so every subfolder of a results file's folder whose name starts with
    `bisect` and that holds a summary.json is read, without --bisect. Kept: the findings for a
    (scenario, DUT) these files hold (a folder beside them may belong to another results file).
    Returns (findings, notes); a summary that does not read is left out with a note, not an error,
    since no one named it. `given`: the --bisect findings, not read twice."""
    seen = {os.path.realpath(b["folder"]) for b in given}
    found, notes, other = [], [], []
    folders = {}
    for p in paths:
        folders.setdefault(os.path.realpath(os.path.dirname(os.path.abspath(p))), os.path.dirname(p))
    for real, shown in sorted(folders.items()):
        try:
            names = sorted(os.listdir(real), key=_natural)
        except OSError:
            continue
        for name in names:
            d = os.path.join(real, name)
            if not name.startswith("bisect") or not os.path.isdir(d) or not os.path.isfile(os.path.join(d, "summary.json")):
                continue
            if os.path.realpath(d) in seen:
                continue
            seen.add(os.path.realpath(d))
            try:
                b = load_bisect(os.path.join(shown, name))
            except (ValueError, OSError) as e:
                notes.append(f"{e}: left out")
                continue
            (found if (b["scenario"], b["dut"]) in rows else other).append(b)
    if other:
        notes.append(f"{len(other)} bisect folder(s) beside the results diagnose a scenario and DUT that no row of these "
                     f"files holds (another results file's): left out ({', '.join(b['folder'] for b in other)})")
    return found, notes


def finding_text(b):
    confidence = f", confidence {b['confidence']}" if b.get("confidence") else ""
    return f"{b['class']} ({b['source']}{confidence})" + (f": {b['evidence'][0]}" if b["evidence"] else "")


def ablation_html(b):
    """The ablation table of a bisect summary (summaries before it have none): feature, change, outcome."""
    rows = b.get("ablation") or []
    if not isinstance(rows, list) or not rows:
        return ""
    cells = []
    for a in rows:
        if not isinstance(a, dict):
            continue
        redrawn = " (inputs redrawn)" if a.get("inputs_redrawn") else ""
        cells.append(f"<tr><td>{html.escape(str(a.get('feature', '')))}</td><td>{html.escape(str(a.get('change', '')))}</td>"
                     f"<td>{html.escape(str(a.get('outcome', '')) + redrawn)}</td></tr>")
    return "<table class='ablation'><tr><th>feature off</th><th>change</th><th>outcome</th></tr>" + "".join(cells) + "</table>"


def verdict_html(counts):
    out = ["<table><tr><th>DUT</th><th>dtype</th><th>mode</th>" + "".join(f"<th>{s}</th>" for s in STATUSES) + "</tr>"]
    for (dut, dtype, mode), c in sorted(counts.items()):
        cells = "".join(f'<td style="background:{COLORS[s] if c[s] else "white"}">{c[s]}</td>' for s in STATUSES)
        out.append(f"<tr><td>{html.escape(dut)}</td><td>{html.escape(str(dtype))}</td><td>{html.escape(str(mode))}</td>{cells}</tr>")
    return "\n".join(out + ["</table>"])


def write_report(paths, out_dir, bisects=(), siblings=True):
    """report.html and summary.md of the results files; `bisects`: --bisect's findings, joined by the
    bisect folders beside the results files unless `siblings` is False (sibling_bisects)."""
    files = [load(p) for p in paths]
    scenarios, results, perf = combine(files)
    bisect_notes = []
    if siblings:
        beside, bisect_notes = sibling_bisects(paths, bisects, {(r["scenario_id"], r["dut"]) for r in results})
        bisects = list(bisects) + beside
    for note in bisect_notes:
        print(f"swa-harness report: {note}", file=sys.stderr)
    finding = {(b["scenario"], b["dut"]): b for b in bisects}
    counts = verdict_counts(results)
    by_feature, worst_by_feature = feature_counts(results, scenarios)
    totals = Counter(r["status"] for r in results)
    sweep_of = {}  # (scenario, DUT) -> the meta of the file that holds the row, and that file's path
    for d in files:
        for r in d["results"]:
            sweep_of[(r["scenario_id"], r["dut"])] = dict(d["meta"], results_path=d["path"])
    failing = [r for r in results if r["status"] in ("fail", "error")]
    warned = [r for r in results if r["status"] == "warn"]

    prov = ["<table><tr><th>file</th><th>commit</th><th>version</th><th>host</th><th>CPU</th><th>GPU</th><th>compiler</th><th>start</th><th>sweep</th></tr>"]
    for d in files:
        m = d["meta"]
        prov.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            os.path.basename(d["path"]), m.get("git_commit"), m.get("tool_version"), m.get("host"), m.get("cpu"),
            m.get("gpu"), m.get("compiler"), m.get("start_time"), m.get("sweep_file"))) + "</tr>")
    prov.append("</table>")

    # Grouped as the console groups them (DUT, mode, dtype), each group's first FAILURES_SHOWN rows in
    # view and the rest folded: 776 failures of one bug read as a few groups, not a page of 24,000 pixels.
    head = "<table class='rows'><tr><th>status</th><th>DUT</th><th>scenario</th><th>why</th><th>bisect finding</th><th>rerun</th></tr>"
    groups = defaultdict(list)
    for r in failing:
        groups[(r["dut"], r["mode"], r["dtype"])].append(r)
    fail_rows = []
    if len(groups) > 1:
        fail_rows.append("<p>" + ", ".join(f"<a href='#failures-{i + 1}'>{html.escape(f'{d}, {m}, {t}')}</a>: {len(g)}"
                                          for i, ((d, m, t), g) in enumerate(groups.items())) + "</p>")
    for i, ((dut, mode, dtype), group) in enumerate(groups.items()):
        found = [finding[k] for k in dict.fromkeys((r["scenario_id"], r["dut"]) for r in group) if k in finding]
        statuses = Counter(r["status"] for r in group)
        fail_rows.append(f"<h3 id='failures-{i + 1}'>{html.escape(dut)}, {html.escape(str(mode))}, {html.escape(str(dtype))}: "
                         + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + "</h3>")
        if found:
            fail_rows.append("<p class='finding'>bisect: " + "; ".join(
                f"{html.escape(finding_text(b))} (<code>{html.escape(b['folder'])}</code>)" for b in found) + "</p>")
        cells = []
        for r in group:
            b = finding.get((r["scenario_id"], r["dut"]))
            cells.append(f"<tr><td>{html.escape(str(r['status']))}</td><td>{html.escape(r['dut'])}</td><td><code>{html.escape(r['scenario_id'])}</code></td>"
                         f"<td class='why'>{html.escape(r['reason'])}</td><td class='why'>{html.escape(finding_text(b)) if b else ''}</td>"
                         f"<td><code>{html.escape(rerun_command(sweep_of, r))}</code></td></tr>")
        fail_rows.append(head + "".join(cells[:FAILURES_SHOWN]) + "</table>")
        if len(cells) > FAILURES_SHOWN:
            fail_rows.append(f"<details><summary>the other {len(cells) - FAILURES_SHOWN} of this group</summary>"
                             + head + "".join(cells[FAILURES_SHOWN:]) + "</table></details>")
    bisect_rows = ["<table><tr><th>DUT</th><th>scenario</th><th>finding</th><th>confidence</th><th>evidence</th><th>ablation</th>"
                   "<th>rows</th><th>minimal case</th><th>folder</th></tr>"]
    for b in bisects:
        why = f" ({b['why']})" if b.get("why") else ""
        bisect_rows.append(f"<tr><td>{html.escape(b['dut'])}</td><td><code>{html.escape(b['scenario'])}</code></td>"
                           f"<td class='finding'>{html.escape(b['class'])} ({html.escape(b['source'])})</td>"
                           f"<td>{html.escape(str(b.get('confidence', '')) + why)}</td>"
                           f"<td class='why'>{'<br>'.join(html.escape(e) for e in b['evidence'])}</td>"
                           f"<td>{ablation_html(b)}</td>"
                           f"<td>{html.escape('; '.join(b['pattern']))}</td><td><code>{html.escape(b.get('minimal_case', ''))}</code></td>"
                           f"<td><code>{html.escape(b['folder'])}</code></td></tr>")
    bisect_rows.append("</table>")
    warn_rows = ["<table><tr><th>DUT</th><th>scenario</th><th>why</th><th>rerun</th></tr>"]
    for r in warned:
        warn_rows.append(f"<tr><td>{html.escape(r['dut'])}</td><td><code>{html.escape(r['scenario_id'])}</code></td>"
                         f"<td class='why'>{html.escape(r['reason'])}</td><td><code>{html.escape(rerun_command(sweep_of, r))}</code></td></tr>")
    warn_rows.append("</table>")

    perf_rows = ["<table><tr><th>DUT</th><th>scenario</th><th>median ms</th><th>min..max ms</th><th>GFLOP/s</th><th>of ceiling</th><th>KV bytes</th><th>timer</th></tr>"]
    for p in perf:
        perf_rows.append(f"<tr><td>{html.escape(p['dut'])}</td><td><code>{html.escape(p['scenario_id'])}</code></td>"
                         f"<td>{p['time_ms']:.3f}</td><td>{p['min_ms']:.3f}..{p['max_ms']:.3f}</td><td>{p['gflops']:.1f}</td>"
                         f"<td>{p['ceiling_fraction']:.3f}</td><td>{p['kv_bytes']}</td><td>{html.escape(p.get('timer', ''))}</td></tr>")
    perf_rows.append("</table>")
    roofs, roof_note = roofline_figures(perf, scenarios)

    body = [
        "<h1>SWA verification report</h1>",
        f'<p class="totals">{len(scenarios)} scenarios, {len(results)} (scenario, DUT) results: '
        + ", ".join(f'<span id="total-{s}">{totals[s]} {s}</span>' for s in STATUSES) + "</p>",
        "<h2>Verdicts per DUT, dtype and mode</h2>", verdict_html(counts),
        "<h2>Verdicts per score feature</h2>",
        "<p>Sinks, soft-capping and two-sided windows (golden/README.md); a scenario with several counts under each.</p>",
        feature_html(by_feature, worst_by_feature),
        "<h2>Where the errors grow</h2>", *heatmaps(results, scenarios),
        "<h2>Error distributions</h2>", *distributions(results),
        "<h2>Error by distance to the window edge</h2>", *window_edge(results),
        f"<h2>Failing scenarios ({len(failing)})</h2>", "\n".join(fail_rows) if failing else "<p>None.</p>",
        *([f"<h2>Bisect findings ({len(bisects)})</h2>", "\n".join(bisect_rows)] if bisects else []),
        *[f"<p class='note'>{html.escape(n)}</p>" for n in bisect_notes],
        f"<h2>Precision warnings ({len(warned)})</h2>",
        ("<p>Passed, with a relative L2 error well above the same-precision baseline's in some phase "
         "(harness/README.md, tolerance profiles):</p>" + "\n".join(warn_rows)) if warned else "<p>None.</p>",
        "<h2>Roofline</h2>", *(figure_tags(roofs) + [f"<p class='note' id='roofline-note'>{html.escape(roof_note)}</p>"]),
        "<h2>Performance</h2>", *(perf_figures(perf, scenarios) + ["\n".join(perf_rows)] if perf else ["<p>No /perf rows: run with <code>--perf</code> or a sweep with <code>perf:</code>.</p>"]),
        "<h2>Provenance</h2>", "\n".join(prov),
    ]
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;margin:1em 0;font-size:12px}"
             "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left} figure{margin:1em 0} img{max-width:100%}"
             "figcaption{font-size:12px;color:#555} code{font-size:11px} td.why{min-width:260px;max-width:480px}"
             " p.note{font-size:12px;color:#555} td{vertical-align:top} td code{word-break:break-all}"
             " table.rows td code{display:block;max-width:330px} h3{font-size:15px;margin:1.2em 0 0.2em}"
             " details summary{cursor:pointer;font-size:12px;color:#333} p.finding{font-size:13px;margin:0.2em 0}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>SWA report</title><style>{style}</style></head><body>"
                + "\n".join(body) + "</body></html>\n")

    md = ["# SWA verification summary", "",
          f"**{totals['pass']} passed, {totals['warn']} warnings, {totals['fail']} failed, {totals['error']} errors, {totals['skip']} skipped** "
          f"over {len(scenarios)} scenarios (commit {files[0]['meta'].get('git_commit')}, {files[0]['meta'].get('host')}).", "",
          "| DUT | dtype | mode | pass | warn | fail | error | skip |", "|---|---|---|---|---|---|---|---|"]
    for (dut, dtype, mode), c in sorted(counts.items()):
        md.append(f"| {dut} | {dtype} | {mode} | {c['pass']} | {c['warn']} | {c['fail']} | {c['error']} | {c['skip']} |")
    md += ["", "## Per score feature", "", "| DUT | feature | pass | warn | fail | error | skip | worst error / threshold |",
           "|---|---|---|---|---|---|---|---|"]
    for (dut, feature), c in sorted(by_feature.items()):
        md.append(f"| {dut} | {feature} | {c['pass']} | {c['warn']} | {c['fail']} | {c['error']} | {c['skip']} | "
                  f"{worst_by_feature.get((dut, feature), 0):.3g} |")
    for title, listed in (("Failing", failing), ("Precision warnings", warned)):
        if not listed:
            continue
        md += ["", f"## {title} ({len(listed)})", ""]
        md += [f"- `{r['dut']}` `{r['scenario_id']}`: {r['reason']}"
               + (f" (bisect: {finding[(r['scenario_id'], r['dut'])]['class']})" if (r["scenario_id"], r["dut"]) in finding else "")
               for r in listed[:20]]
        if len(listed) > 20:
            md.append(f"- ... and {len(listed) - 20} more (see report.html)")
    if bisects:
        md += ["", f"## Bisect findings ({len(bisects)})", "", "| DUT | scenario | finding | first evidence | minimal case |", "|---|---|---|---|---|"]
        for b in bisects:
            first = b["evidence"][0].replace("|", "\\|") if b["evidence"] else ""
            md.append(f"| {b['dut']} | `{b['scenario']}` | {b['class']} ({b['source']}) | {first} | `{b.get('minimal_case', '')}` |")
    if perf:
        md += ["", "## Performance", "", "| DUT | timed scenarios | median fraction of ceiling | best GFLOP/s |", "|---|---|---|---|"]
        by_dut = defaultdict(list)
        for p in perf:
            by_dut[p["dut"]].append(p)
        for dut, ps in sorted(by_dut.items()):
            md.append(f"| {dut} | {len(ps)} | {np.median([p['ceiling_fraction'] for p in ps]):.3f} | {max(p['gflops'] for p in ps):.1f} |")
        roofs = sorted({(p["ceiling_gflops"], p.get("triad_gbs", 0)) for p in perf if p.get("triad_gbs", 0) > 0})
        md += ["", ("Roofline roofs (same run): " + "; ".join(f"compute {c:.1f} GFLOP/s (SGEMM), bandwidth {g:.1f} GB/s "
                                                         "(STREAM triad)" for c, g in roofs)) if roofs else roof_note]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return totals


# ---- compare: rows paired by (scenario ID, DUT label) -----------------------------------------
class CompareError(Exception):
    """A comparison that cannot be made honestly: exit 2 with this message."""


_SHORT_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,32}")


def _file_name(path):
    stripped = path.rstrip("/") or path[:1]
    return stripped if stripped == "/" else stripped.rsplit("/", 1)[-1]


def _function_and_items(rest):
    parts = rest.split(":")
    return bool(re.fullmatch(r"[^\W\d]\w*", parts[0])) and all("=" in p for p in parts[1:])


def _shell_words(command):
    """The words of an exec: command as /bin/sh splits them (quotes removed, nothing expanded)."""
    words, word, i = [], None, 0
    while i < len(command):
        c = command[i]
        if c in " \t\n":
            if word is not None:
                words.append(word)
            word = None
        else:
            word = word or ""
            if c == "\\" and i + 1 < len(command):
                i += 1
                word += command[i]
            elif c == "'":
                end = command.find("'", i + 1)
                end = len(command) if end < 0 else end
                word += command[i + 1:end]
                i = end
            elif c == '"':
                i += 1
                while i < len(command) and command[i] != '"':
                    if command[i] == "\\" and i + 1 < len(command) and command[i + 1] in '"\\$`':
                        i += 1
                    word += command[i]
                    i += 1
            else:
                word += c
        i += 1
    if word is not None:
        words.append(word)
    return words


def dut_label(dut):
    """The DUT label of a --dut name, for files written before the dut_label column: the rule of
    harness/src/judge/results.cpp (harness/FORMATS.md)."""
    head, eq, tail = dut.partition("=")
    name = tail if eq and _SHORT_NAME.fullmatch(head) else dut
    if name.startswith("plugin:"):
        return "plugin:" + _file_name(name[7:])
    if name.startswith("python:"):
        spec = name[7:]
        ends = [m.start() for m in re.finditer(r"\.py:", spec)]
        split = next(((spec[:e + 3], spec[e + 4:]) for e in reversed(ends) if _function_and_items(spec[e + 4:])), None)
        if split:
            target, rest = split
        else:
            target, _, rest = spec.partition(":")
        if "/" in target or target.endswith(".py"):
            target = _file_name(target)
        return "python:" + target + (":" + rest if rest else "")
    if name.startswith("exec:"):
        words = []
        for w in _shell_words(name[5:]):
            slash = w.find("/")
            if slash >= 0:
                eq_at = w.find("=")
                start = eq_at + 1 if 0 <= eq_at < slash else 0
                w = w[:start] + _file_name(w[start:])
            words.append(w)
        return "exec:" + " ".join(words)
    return name


def _labelled(rows):
    """Each row's label: its dut_label column, else derived from dut (a file written before it)."""
    for r in rows:
        if not r.get("dut_label"):
            r["dut_label"] = dut_label(r["dut"])
    return rows


def _labels_text(counts):
    return ", ".join(f"{label} ({n} rows)" for label, n in sorted(counts.items())) or "no rows"


def parse_pairs(texts, base_path, base_labels, cand_path, cand_labels):
    """--pair OLD=NEW texts as {new label: old label}. A label may hold '=' (python: key=value items,
    exec: options): the split is the one '=' whose two sides are labels of their files."""
    pairs = {}
    for text in texts:
        cuts = [i for i, c in enumerate(text) if c == "="]
        if not cuts:
            raise CompareError(f"--pair {text!r} is not OLD=NEW (a DUT label of {base_path}, '=', one of {cand_path})")
        splits = [(text[:i], text[i + 1:]) for i in cuts if text[:i] and text[i + 1:]]
        if not splits:
            raise CompareError(f"--pair {text!r} has an empty side: give OLD=NEW, both DUT labels")
        found = [(o, n) for o, n in splits if o in base_labels and n in cand_labels]
        if len(found) > 1:
            raise CompareError(f"--pair {text!r} can be read {len(found)} ways: "
                               + "; ".join(f"{o!r}={n!r}" for o, n in found))
        if not found:
            old, new = splits[0] if len(splits) == 1 else next(
                ((o, n) for o, n in splits if o in base_labels or n in cand_labels), splits[0])
            if old not in base_labels:
                raise CompareError(f"--pair {text!r}: {base_path} holds no DUT label {old!r}; "
                                   f"its labels: {', '.join(sorted(base_labels)) or 'none'}")
            raise CompareError(f"--pair {text!r}: {cand_path} holds no DUT label {new!r}; "
                               f"its labels: {', '.join(sorted(cand_labels)) or 'none'}")
        old, new = found[0]
        if new in pairs and pairs[new] != old:
            raise CompareError(f"--pair: {new!r} of {cand_path} is paired twice ({pairs[new]!r} and {old!r})")
        pairs[new] = old
    return pairs


def pair_rows(base, cand, base_path, cand_path, pair_texts=()):
    """Pairs the candidate's /results and /perf rows with the baseline's by (scenario ID, DUT label),
    --pair's labels as it says. Returns (results pairs, perf pairs, a summary line, notes); raises
    CompareError when nothing pairs or a --pair cannot be honoured."""
    for d in (base, cand):
        _labelled(d["results"])
        _labelled(d["perf"])
    b_counts = Counter(r["dut_label"] for r in base["results"])
    c_counts = Counter(r["dut_label"] for r in cand["results"])
    b_all = set(b_counts) | {p["dut_label"] for p in base["perf"]}
    c_all = set(c_counts) | {p["dut_label"] for p in cand["perf"]}
    explicit = parse_pairs(pair_texts, base_path, b_all, cand_path, c_all)
    # A label that stands for two DUTs of one file (two files of one name) pairs by the full name too.
    duts = defaultdict(set)
    for side, d in (("base", base), ("cand", cand)):
        for r in d["results"] + d["perf"]:
            duts[(side, r["dut_label"])].add(r["dut"])
    shared = {label for (_, label), names in duts.items() if len(names) > 1}
    notes = [f"note: the label {label} stands for several DUTs ({', '.join(sorted(duts[('base', label)] | duts[('cand', label)]))}): "
             f"their rows pair only with the same full DUT name" for label in sorted(shared)]
    for new, old in explicit.items():
        if new in shared or old in shared:
            label = new if new in shared else old
            raise CompareError(f"--pair {old}={new}: the label {label} stands for several DUTs "
                               f"({', '.join(sorted(duts[('base', label)] | duts[('cand', label)]))}); it cannot be paired by label")
    named_old = set(explicit.values())

    def base_key(r):
        return r["scenario_id"], r["dut_label"], r["dut"] if r["dut_label"] in shared else None

    def cand_key(r):
        label = r["dut_label"]
        if label in explicit:
            return r["scenario_id"], explicit[label], None
        if label in named_old:  # its namesake is paired with another label
            return None
        return r["scenario_id"], label, r["dut"] if label in shared else None

    def join(b_rows, c_rows):
        index = {base_key(r): r for r in b_rows}
        out = []
        for r in c_rows:
            b = index.get(cand_key(r))
            if b is not None:
                out.append((b, r))
        return out

    res_pairs, perf_pairs = join(base["results"], cand["results"]), join(base["perf"], cand["perf"])
    if not res_pairs and not perf_pairs:
        common = sorted(set(b_counts) & set(c_counts))
        several = [label for label in common if label in shared]
        why = ("no scenario ID is in both for the labels --pair names" if explicit
               else f"{', '.join(several)} stands for several DUTs, whose rows pair only by the full DUT name, "
                    "and no full name is in both" if several
               else f"the labels {', '.join(common)} are in both, but no scenario ID is" if common
               else "no DUT label is in both")
        raise CompareError(f"no rows pair ({why}): {base_path} holds {_labels_text(b_counts)}; "
                           f"{cand_path} holds {_labels_text(c_counts)}. "
                           "To compare two different DUTs, give --pair OLD_LABEL=NEW_LABEL")
    b_paired = Counter(b["dut_label"] for b, _ in res_pairs)
    c_paired = Counter(c["dut_label"] for _, c in res_pairs)
    b_left, c_left = b_counts - b_paired, c_counts - c_paired
    line = (f"Paired {len(res_pairs)} /results rows by (scenario ID, DUT label) ({base_path} has "
            f"{len(base['results'])}, {cand_path} {len(cand['results'])})"
            + (f" and {len(perf_pairs)} /perf rows" if base["perf"] or cand["perf"] else "") + ".")
    if b_left:
        line += f" Not paired in {base_path}: {_labels_text(b_left)}."
    if c_left:
        line += f" Not paired in {cand_path}: {_labels_text(c_left)}."
    return res_pairs, perf_pairs, line, notes


def compare(base_path, cand_path, out_dir, error_factor, time_pct, pair_texts=()):
    base, cand = load(base_path), load(cand_path)
    res_pairs, perf_pairs, paired_line, notes = pair_rows(base, cand, base_path, cand_path, pair_texts)
    worse = []
    for b, r in res_pairs:
        if b["status"] in ("pass", "warn") and r["status"] in ("warn", "fail", "error") and b["status"] != r["status"]:
            worse.append((b, r, "verdict", f"{b['status']} -> {r['status']}: {r['reason']}"))
        elif (r["nan_count"] + r["inf_count"] == 0 and r["max_abs"] > error_factor * b["max_abs"]
              and r["max_abs"] > r["atol_floor"]):
            worse.append((b, r, "error", f"max abs error {b['max_abs']:.3g} -> {r['max_abs']:.3g} "
                                         f"(x{r['max_abs'] / max(b['max_abs'], 1e-300):.1f} > x{error_factor})"))
    for b, p in perf_pairs:
        if p["time_ms"] > b["time_ms"] * (1 + time_pct / 100):
            worse.append((b, p, "time", f"median {b['time_ms']:.3f} -> {p['time_ms']:.3f} ms "
                                        f"(+{100 * (p['time_ms'] / b['time_ms'] - 1):.1f}% > {time_pct}%)"))

    def who(b, r):
        return r["dut_label"] if b["dut_label"] == r["dut_label"] else f"{b['dut_label']} -> {r['dut_label']}"

    os.makedirs(out_dir, exist_ok=True)
    md = [f"# Regressions: {os.path.basename(cand_path)} against {os.path.basename(base_path)}", "",
          f"Baseline commit {base['meta'].get('git_commit')}, candidate commit {cand['meta'].get('git_commit')}; "
          f"error factor {error_factor}, time threshold {time_pct}%.", "", paired_line, "", *notes, *([""] if notes else []),
          f"**{len(worse)} got worse.**", ""]
    if worse:
        md += ["| kind | DUT | scenario | what |", "|---|---|---|---|"]
        md += [f"| {k} | {who(b, r)} | `{r['scenario_id']}` | {w} |" for b, r, k, w in worse]
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(who(b, r))}</td><td><code>{html.escape(r['scenario_id'])}</code></td>"
                   f"<td>{html.escape(w)}</td></tr>" for b, r, k, w in worse)
    with open(os.path.join(out_dir, "compare.html"), "w") as f:
        f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>SWA comparison</title></head><body>"
                f"<h1>{len(worse)} regressions</h1><p>{html.escape(paired_line)}</p>"
                + "".join(f"<p>{html.escape(n)}</p>" for n in notes)
                + f"<table border=1><tr><th>kind</th><th>DUT</th><th>scenario</th><th>what</th></tr>"
                f"{rows}</table></body></html>\n")
    print("\n".join(md))
    return len(worse)


def main():
    ap = argparse.ArgumentParser(prog="swa-harness report", description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="*", help="results files")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    ap.add_argument("--bisect", action="append", default=[], metavar="DIR",
                    help="a folder `swa-harness bisect --out` wrote: its finding joins the failing scenario (repeat it); "
                         "the bisect* folders beside the results files are read without it")
    ap.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"), help="list what got worse")
    ap.add_argument("--error-factor", type=float, default=2.0, help="compare: max abs error up by more than this")
    ap.add_argument("--time-pct", type=float, default=10.0, help="compare: median time up by more than this %%")
    ap.add_argument("--pair", action="append", default=[], metavar="OLD=NEW",
                    help="compare: pair the baseline's rows of DUT label OLD with the candidate's of label NEW "
                         "(two different kernels: --pair python:mine.py:attention=python:mine_v2.py:attention); "
                         "repeat it for more. Rows pair by (scenario ID, DUT label) otherwise")
    args = ap.parse_args()
    if args.pair and not args.compare:
        ap.error("--pair is for --compare BASELINE CANDIDATE")
    paths = args.compare if args.compare else args.inputs
    if not paths:
        ap.error("give one or more results files, or --compare BASELINE CANDIDATE")
    for p in paths:
        if not os.path.exists(p):
            ap.error(f"{p} does not exist")
    try:
        if args.compare:
            return 1 if compare(*args.compare, args.out, args.error_factor, args.time_pct, args.pair) else 0
        bisects = [load_bisect(d) for d in args.bisect]
        totals = write_report(paths, args.out, bisects)
    except OSError as e:
        # A failure to write the report is not a failure to read the results: say which.
        target = str(getattr(e, "filename", None) or "")
        writing = bool(target) and os.path.abspath(target).startswith(os.path.abspath(args.out))
        what = f"cannot write the report into {args.out}" if writing else "cannot read results"
        print(f"swa-harness report: error: {what}: {e}", file=sys.stderr)
        return 2
    except CompareError as e:
        print(f"swa-harness report: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        print(f"swa-harness report: error: cannot read results: {e}", file=sys.stderr)
        return 2
    print(f"report: {os.path.join(args.out, 'report.html')}  summary: {os.path.join(args.out, 'summary.md')}  "
          f"({totals['pass']} passed, {totals['fail']} failed, {totals['error']} errors, {totals['skip']} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
