"""Write the figures table of `docs/reliability.md` from a reliability run.

    .venv/bin/python tools/reliability_report.py soak-figures.jsonl soak-results.xml \\
        docs/reliability.md

`make soak` runs it after the long tests. The first file holds one JSON line per
`figure(...)` call of the tests (see `tests/reliability.py`), the second is pytest's
JUnit XML for the same run (each test's outcome). Only the part of the document
between the `figures:begin` and `figures:end` markers is replaced; the rest is
written by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path

BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"


def outcomes(junit: Path) -> dict[str, str]:
    """pytest node id -> "passed", "FAILED: first line of the message", "known bug
    (xfail): its reason" or "skipped"."""
    out: dict[str, str] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        node = f"{path}.py::{case.get('name', '')}"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            first = (failure.get("message") or "").strip().splitlines()
            out[node] = "FAILED: " + (first[0][:160] if first else "")
        elif (skipped := case.find("skipped")) is not None:
            if skipped.get("type") == "pytest.xfail":  # a strict xfail: a known bug
                out[node] = "known bug (xfail): " + (skipped.get("message") or "")[:160]
            else:
                out[node] = "skipped"
        else:
            out[node] = "passed"
    return out


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(figures: list[dict[str, object]], results: dict[str, str]) -> str:
    rows = [
        "| test | result | figures | reproduce |",
        "| --- | --- | --- | --- |",
    ]
    seen: set[str] = set()
    for line in figures:
        node = str(line["node"])
        seen.add(node)
        values = line["figures"]
        assert isinstance(values, dict)
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        seed = f"TS_SEED={values['seed']} " if "seed" in values else ""
        soak = "TS_SOAK=1 " if line.get("soak") else ""
        command = f"`{soak}{seed}.venv/bin/pytest -q -s '{node}'`"
        result = results.get(node, "not recorded")
        rows.append(f"| {line['test']} | {cell(result)} | {cell(shown)} | {command} |")
    others = {node: r for node, r in results.items() if node not in seen}
    files = sorted({node.split("::")[0] for node in others})
    failed = [f"`{node}` ({r})" for node, r in sorted(others.items()) if r != "passed"]
    rows.append("")
    rows.append(
        f"Also run, without figures: {len(others)} tests in "
        + ", ".join(f"`{f}`" for f in files)
        + (": all passed." if not failed else "; not passed: " + "; ".join(failed) + ".")
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("figures", type=Path)
    ap.add_argument("junit", type=Path)
    ap.add_argument("doc", type=Path)
    ns = ap.parse_args(argv)
    figures = [json.loads(x) for x in ns.figures.read_text().splitlines() if x.strip()]
    results = outcomes(ns.junit)
    passed = sum(r == "passed" for r in results.values())
    known = sum(r.startswith("known bug") for r in results.values())
    body = (
        f"{BEGIN}\n"
        f"Measured by `make soak` on {date.today().isoformat()}: "
        f"{passed} of {len(results)} tests passed"
        + (f", {known} failed as expected on a known bug (xfail)" if known else "")
        + ".\n\n"
        f"{table(figures, results)}\n"
        f"{END}"
    )
    doc = ns.doc.read_text()
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        print(f"{ns.doc}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    ns.doc.write_text(doc[:start] + body + doc[end + len(END) :])
    print(f"{ns.doc}: {len(figures)} figure lines, {len(results)} test results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
