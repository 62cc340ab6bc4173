#!/usr/bin/env python3
"""swa-harness report: accuracy and performance reports from HDF5 results files.

  swa_report.py RESULTS.h5 [MORE.h5 ...] -o DIR [--bisect BISECT_DIR ...]
                                                     -> DIR/report.html (self-contained), DIR/summary.md
  swa_report.py --compare BASE.h5 CAND.h5 -o DIR     -> DIR/compare.md, DIR/compare.html; exit 1 on regressions

Run with /usr/bin/python3 (Debian's python3-h5py, python3-numpy, python3-matplotlib).
"""
import argparse
import base64
import html
import io
import json
import os
import shlex
import sys
from collections import Counter, defaultdict

import h5py
import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STATUSES = ("pass", "warn", "fail", "error", "skip")
COLORS = {"pass": "#d9f2d9", "warn": "#fff1a8", "fail": "#f8c9c9", "error": "#f3ddb0", "skip": "#e4e4e4"}
# numerics.md: relative L2 levels for N(0,1) inputs (fp32: far below 1e-5).
REL_L2_LEVEL = {"fp32": 1e-5, "fp16": 2e-4, "bf16": 2e-3}


def _str(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def _table(dataset):
    """A compound HDF5 table as a list of dicts with str/int/float values."""
    rows = dataset[:]
    names = rows.dtype.names
    # Enum columns (status: pass|warn|fail|skip|error) by name; files written before the enum hold text.
    enums = {n: {v: k for k, v in h5py.check_enum_dtype(dataset.dtype[n]).items()}
             for n in names if h5py.check_enum_dtype(dataset.dtype[n])}
    out = []
    for r in rows:
        out.append({n: (enums[n][int(r[n])] if n in enums else _str(r[n]) if rows.dtype[n].kind in "OSU"
                        else r[n].item()) for n in names})
    return out


def load(path):
    with h5py.File(path, "r") as f:
        meta = {k: _str(v) for k, v in f["meta"].attrs.items()}
        data = {"path": path, "meta": meta, "scenarios": _table(f["scenarios"]), "results": _table(f["results"]),
                "perf": _table(f["perf"]) if "perf" in f else []}
    return data


def combine(files):
    scenarios, results, perf = {}, [], []
    for d in files:
        for s in d["scenarios"]:
            scenarios.setdefault(s["id"], s)
        results += d["results"]
        perf += d["perf"]
    return scenarios, results, perf


def plot_against_context(ax, series, ylabel):
    """One line per label over a log2 context axis, from zero up."""
    for label, pts in sorted(series.items()):
        ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


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
def heatmaps(results, scenarios):
    tags = []
    duts = sorted({r["dut"] for r in results})
    dtypes = [d for d in ("fp32", "fp16", "bf16") if any(r["dtype"] == d for r in results)]
    if not dtypes:  # none this report draws (a newer dtype, or a crafted file)
        return tags
    for dut in duts:
        fig, axes = plt.subplots(1, len(dtypes), figsize=(4.8 * len(dtypes), 3.6), squeeze=False, layout="constrained")
        drawn = False
        for ax, dtype in zip(axes[0], dtypes):
            cells = defaultdict(float)
            for r in results:
                q = ratio(r)
                if r["dut"] != dut or r["dtype"] != dtype or q is None:
                    continue
                s = scenarios[r["scenario_id"]]
                key = (s["window"], s["head_size"])
                cells[key] = max(cells[key], min(q, 1e6))
            if not cells:
                ax.set_visible(False)
                continue
            drawn = True
            windows = sorted({k[0] for k in cells})
            heads = sorted({k[1] for k in cells})
            grid = np.full((len(windows), len(heads)), np.nan)
            for (w, h), v in cells.items():
                grid[windows.index(w), heads.index(h)] = np.log10(max(v, 1e-6))
            im = ax.imshow(grid, cmap="RdYlGn_r", vmin=-3, vmax=1, aspect="auto")
            ax.set_xticks(range(len(heads)), heads, fontsize=7)
            ax.set_yticks(range(len(windows)), windows, fontsize=7)
            ax.set_xlabel("head size")
            ax.set_ylabel("window")
            ax.set_title(f"{dut} {dtype}", fontsize=9)
            for i in range(len(windows)):
                for j in range(len(heads)):
                    if not np.isnan(grid[i, j]):
                        ax.text(j, i, f"{10 ** grid[i, j]:.2g}", ha="center", va="center", fontsize=6)
            fig.colorbar(im, ax=ax, label="log10 err / threshold")
        if drawn:
            tags.append(figure_tag(fig, f"Worst error over threshold by window and head size: {dut} (above 1 fails)"))
        else:
            plt.close(fig)
    return tags


def distributions(results):
    tags = []
    dtypes = [d for d in ("fp32", "fp16", "bf16") if any(r["dtype"] == d for r in results)]
    if not dtypes:
        return tags
    fig, axes = plt.subplots(2, len(dtypes), figsize=(4.8 * len(dtypes), 6.8), squeeze=False, layout="constrained")
    for j, dtype in enumerate(dtypes):
        rows = [r for r in results if r["dtype"] == dtype and ratio(r) is not None]
        ax = axes[0][j]
        for dut in sorted({r["dut"] for r in rows}):
            q = np.array([min(ratio(r), 1e6) for r in rows if r["dut"] == dut])
            ax.hist(np.log10(np.maximum(q, 1e-6)), bins=30, alpha=0.5, label=dut)
        ax.axvline(0, color="red", lw=1.5, label="tolerance (fail above)")
        ax.set_xlabel("log10 max|err| / threshold")
        ax.set_title(f"{dtype}: error vs tolerance", fontsize=9)
        ax.legend(fontsize=6)
        ax = axes[1][j]
        for dut in sorted({r["dut"] for r in rows}):
            rel = np.array([r["rel_l2"] for r in rows if r["dut"] == dut])
            ax.hist(np.log10(np.maximum(rel, 1e-12)), bins=30, alpha=0.5, label=f"{dut} rel L2")
        base = np.array([r["baseline_rel_l2"] for r in rows])
        if base.size:
            ax.axvline(np.log10(max(np.median(base), 1e-12)), color="black", ls="--", lw=1, label="baseline median")
        ax.axvline(np.log10(REL_L2_LEVEL[dtype]), color="red", lw=1, label="numerics.md level")
        ax.set_xlabel("log10 relative L2 error")
        mean_ulp = np.array([r["mean_ulp"] for r in rows])
        ax.set_title(f"{dtype}: relative L2 (mean ULP median {np.median(mean_ulp) if mean_ulp.size else 0:.2g})", fontsize=9)
        ax.legend(fontsize=6)
    tags.append(figure_tag(fig, "Distributions of the error against the tolerance line and of the relative L2 error"))
    return tags


def window_edge(results):
    rows = [r for r in results if ratio(r) is not None]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    for dut in sorted({r["dut"] for r in rows}):
        pts = [(r["worst_window_edge"], min(ratio(r), 1e6)) for r in rows if r["dut"] == dut]
        x, y = zip(*pts)
        ax.scatter(x, np.maximum(y, 1e-6), s=10, alpha=0.6, label=dut)
    ax.axhline(1, color="red", lw=1)
    ax.set_xscale("symlog", linthresh=4)
    ax.set_yscale("log")
    ax.set_xlabel("worst row's position - (W-1)  (>= 1: the row has lost keys to the window)")
    ax.set_ylabel("max|err| / threshold")
    ax.legend(fontsize=7)
    return [figure_tag(fig, "Error by distance to the window edge: mask-edge bugs cluster at small positive distances")]


def perf_figures(perf):
    tags = []
    if not perf:
        return tags
    prefill = [p for p in perf if p["mode"] == "prefill"]
    if prefill:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        series = defaultdict(list)
        for p in prefill:
            label = f"{p['dut']} {p['dtype']} " + ("causal" if p["window"] == 0 else f"SWA W={p['window']}")
            series[label].append((p["tokens"] / max(p["batch"], 1), p["gflops"]))
        for label, pts in sorted(series.items()):
            by_len = defaultdict(list)
            for x, y in pts:
                by_len[x].append(y)
            xs = sorted(by_len)
            ax.plot(xs, [float(np.median(by_len[x])) for x in xs], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("GFLOP/s (4 D pairs Hq / time)")
        ax.legend(fontsize=7)
        tags.append(figure_tag(fig, "Prefill GFLOP/s against sequence length, SWA vs causal"))
    decode = [p for p in perf if p["mode"] == "decode"]
    if decode:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
        times, mem = defaultdict(list), defaultdict(list)
        for p in decode:
            ctx = p["tokens"] / max(p["batch"], 1)
            times[f"{p['dut']} {p['cache']} W={p['window']}"].append((ctx, p["time_ms"]))
            mem[p["cache"]].append((ctx, p["kv_bytes"] / 2**20))
        plot_against_context(a1, {label: sorted(pts) for label, pts in times.items()}, "decode step time (ms, median)")
        plot_against_context(a2, {label: sorted(set(pts)) for label, pts in mem.items()}, "KV cache MiB")
        tags.append(figure_tag(fig, "Decode step time and KV cache memory against context, per KV cache (ring, linear, paged)"))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    by_dut = defaultdict(list)
    for p in perf:
        by_dut[p["dut"]].append(p["ceiling_fraction"])
    ax.boxplot(list(by_dut.values()), labels=list(by_dut.keys()))
    ax.axhline(1, color="red", lw=1)
    ax.set_ylabel("fraction of the ceiling")
    ceilings = sorted({(p["ceiling"], round(p["ceiling_gflops"], 1)) for p in perf})
    ax.set_title("each DUT against its ceiling: " + "; ".join(f"{c} = {g} GFLOP/s" for c, g in ceilings), fontsize=8)
    tags.append(figure_tag(fig, "Each DUT's GFLOP/s as a fraction of the same-run ceiling"))
    return tags


# ---- html and markdown -------------------------------------------------------------------------
def rerun_command(meta_by_row, r):
    """The command that reruns the row: `run` on its file's sweep file; where the file names none (a
    pytest session's --swa-out whose rows came from several sweep files, or from no swa_sweep mark),
    the command that wrote the row and the test's ID, since no `run` command can be made up for it."""
    meta = meta_by_row.get((r["scenario_id"], r["dut"]), {})
    sweep = meta.get("sweep_file", "")
    scenario = "'" + r["scenario_id"].replace("'", "'\\''") + "'"  # always quoted, as the console's line
    if sweep:
        return f"swa-harness run {shlex.quote(sweep)} --filter {scenario} --dut {shlex.quote(r['dut'])}"
    command = meta.get("command", "")
    return (f"no sweep file recorded for this row: rerun {command or 'the command that wrote it'} "
            f"(the test named [{r['scenario_id']}], DUT {r['dut']})")


BISECT_FIELDS = ("dut", "scenario", "reproduces", "class", "source", "evidence", "pattern")


def load_bisect(directory):
    """A bisect output folder's summary.json (harness/README.md, Bisect); ValueError naming what is wrong."""
    path = os.path.join(directory, "summary.json")
    if not os.path.isfile(path):
        raise ValueError(f"--bisect {directory}: no summary.json there (the folder bisect --out wrote)")
    with open(path) as f:
        try:
            summary = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
    missing = [k for k in BISECT_FIELDS if k not in summary]
    if not isinstance(summary, dict) or missing:
        raise ValueError(f"{path}: not a bisect summary (missing {', '.join(missing) or 'an object'}; fields: {', '.join(BISECT_FIELDS)})")
    summary["folder"] = directory
    return summary


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


def write_report(paths, out_dir, bisects=()):
    files = [load(p) for p in paths]
    finding = {(b["scenario"], b["dut"]): b for b in bisects}
    scenarios, results, perf = combine(files)
    counts = verdict_counts(results)
    by_feature, worst_by_feature = feature_counts(results, scenarios)
    totals = Counter(r["status"] for r in results)
    sweep_of = {}  # (scenario, DUT) -> the meta of the file that holds the row
    for d in files:
        for r in d["results"]:
            sweep_of[(r["scenario_id"], r["dut"])] = d["meta"]
    failing = [r for r in results if r["status"] in ("fail", "error")]
    warned = [r for r in results if r["status"] == "warn"]

    prov = ["<table><tr><th>file</th><th>commit</th><th>version</th><th>host</th><th>CPU</th><th>GPU</th><th>compiler</th><th>start</th><th>sweep</th></tr>"]
    for d in files:
        m = d["meta"]
        prov.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            os.path.basename(d["path"]), m.get("git_commit"), m.get("tool_version"), m.get("host"), m.get("cpu"),
            m.get("gpu"), m.get("compiler"), m.get("start_time"), m.get("sweep_file"))) + "</tr>")
    prov.append("</table>")

    fail_rows = ["<table><tr><th>status</th><th>DUT</th><th>scenario</th><th>why</th><th>bisect finding</th><th>rerun</th></tr>"]
    for r in failing:
        b = finding.get((r["scenario_id"], r["dut"]))
        fail_rows.append(f"<tr><td>{html.escape(str(r['status']))}</td><td>{html.escape(r['dut'])}</td><td><code>{html.escape(r['scenario_id'])}</code></td>"
                         f"<td class='why'>{html.escape(r['reason'])}</td><td class='why'>{html.escape(finding_text(b)) if b else ''}</td>"
                         f"<td><code>{html.escape(rerun_command(sweep_of, r))}</code></td></tr>")
    fail_rows.append("</table>")
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
        f"<h2>Precision warnings ({len(warned)})</h2>",
        ("<p>Passed, with a relative L2 error well above the same-precision baseline's in some phase "
         "(harness/README.md, tolerance profiles):</p>" + "\n".join(warn_rows)) if warned else "<p>None.</p>",
        "<h2>Performance</h2>", *(perf_figures(perf) + ["\n".join(perf_rows)] if perf else ["<p>No /perf rows: run with <code>--perf</code> or a sweep with <code>perf:</code>.</p>"]),
        "<h2>Provenance</h2>", "\n".join(prov),
    ]
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;margin:1em 0;font-size:12px}"
             "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left} figure{margin:1em 0} img{max-width:100%}"
             "figcaption{font-size:12px;color:#555} code{font-size:11px} td.why{min-width:320px}")
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
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return totals


def compare(base_path, cand_path, out_dir, error_factor, time_pct):
    base, cand = load(base_path), load(cand_path)
    b_res = {(r["scenario_id"], r["dut"]): r for r in base["results"]}
    b_perf = {(p["scenario_id"], p["dut"]): p for p in base["perf"]}
    worse = []
    for r in cand["results"]:
        b = b_res.get((r["scenario_id"], r["dut"]))
        if b is None:
            continue
        if b["status"] in ("pass", "warn") and r["status"] in ("warn", "fail", "error") and b["status"] != r["status"]:
            worse.append((r, "verdict", f"{b['status']} -> {r['status']}: {r['reason']}"))
        elif (r["nan_count"] + r["inf_count"] == 0 and r["max_abs"] > error_factor * b["max_abs"]
              and r["max_abs"] > r["atol_floor"]):
            worse.append((r, "error", f"max abs error {b['max_abs']:.3g} -> {r['max_abs']:.3g} "
                                      f"(x{r['max_abs'] / max(b['max_abs'], 1e-300):.1f} > x{error_factor})"))
    for p in cand["perf"]:
        b = b_perf.get((p["scenario_id"], p["dut"]))
        if b and p["time_ms"] > b["time_ms"] * (1 + time_pct / 100):
            worse.append((p, "time", f"median {b['time_ms']:.3f} -> {p['time_ms']:.3f} ms "
                                     f"(+{100 * (p['time_ms'] / b['time_ms'] - 1):.1f}% > {time_pct}%)"))
    os.makedirs(out_dir, exist_ok=True)
    md = [f"# Regressions: {os.path.basename(cand_path)} against {os.path.basename(base_path)}", "",
          f"Baseline commit {base['meta'].get('git_commit')}, candidate commit {cand['meta'].get('git_commit')}; "
          f"error factor {error_factor}, time threshold {time_pct}%.", "",
          f"**{len(worse)} got worse.**", ""]
    if worse:
        md += ["| kind | DUT | scenario | what |", "|---|---|---|---|"]
        md += [f"| {k} | {r['dut']} | `{r['scenario_id']}` | {w} |" for r, k, w in worse]
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(r['dut'])}</td><td><code>{html.escape(r['scenario_id'])}</code></td>"
                   f"<td>{html.escape(w)}</td></tr>" for r, k, w in worse)
    with open(os.path.join(out_dir, "compare.html"), "w") as f:
        f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>SWA comparison</title></head><body>"
                f"<h1>{len(worse)} regressions</h1><table border=1><tr><th>kind</th><th>DUT</th><th>scenario</th><th>what</th></tr>"
                f"{rows}</table></body></html>\n")
    print("\n".join(md))
    return len(worse)


def main():
    ap = argparse.ArgumentParser(prog="swa-harness report", description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="*", help="results files")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    ap.add_argument("--bisect", action="append", default=[], metavar="DIR",
                    help="a folder `swa-harness bisect --out` wrote: its finding joins the failing scenario (repeat it)")
    ap.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"), help="list what got worse")
    ap.add_argument("--error-factor", type=float, default=2.0, help="compare: max abs error up by more than this")
    ap.add_argument("--time-pct", type=float, default=10.0, help="compare: median time up by more than this %%")
    args = ap.parse_args()
    paths = args.compare if args.compare else args.inputs
    if not paths:
        ap.error("give one or more results files, or --compare BASELINE CANDIDATE")
    for p in paths:
        if not os.path.exists(p):
            ap.error(f"{p} does not exist")
    try:
        if args.compare:
            return 1 if compare(*args.compare, args.out, args.error_factor, args.time_pct) else 0
        bisects = [load_bisect(d) for d in args.bisect]
        totals = write_report(paths, args.out, bisects)
    except OSError as e:
        # A failure to write the report is not a failure to read the results: say which.
        target = str(getattr(e, "filename", None) or "")
        writing = bool(target) and os.path.abspath(target).startswith(os.path.abspath(args.out))
        what = f"cannot write the report into {args.out}" if writing else "cannot read results"
        print(f"swa-harness report: error: {what}: {e}", file=sys.stderr)
        return 2
    except (KeyError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        print(f"swa-harness report: error: cannot read results: {e}", file=sys.stderr)
        return 2
    print(f"report: {os.path.join(args.out, 'report.html')}  summary: {os.path.join(args.out, 'summary.md')}  "
          f"({totals['pass']} passed, {totals['fail']} failed, {totals['error']} errors, {totals['skip']} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
