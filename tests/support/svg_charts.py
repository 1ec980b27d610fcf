"""Reading the dashboard's pictures (inline SVG drawn by api/server/ui/charts.js) back out of a real
browser: their text alternatives and what they draw, so a test can hold one against the other and
against the job's data; and every address the page loaded, to see none is on another host."""
from __future__ import annotations

import re

from selenium import webdriver

from poolq.jobs.report.histogram import Histogram

_SPARKLINE = """
const svg = document.querySelector(arguments[0]);
const line = svg && svg.querySelector("polyline.spark-line");
if (!line) return null;
const ys = [...Array(line.points.numberOfItems).keys()].map((i) => line.points.getItem(i).y);
const area = svg.querySelector("polygon.spark-area").points;
const baseline = area.getItem(0).y;  // the area closes on the value 0
return {points: ys.length, role: svg.getAttribute("role"), label: svg.getAttribute("aria-label"),
        title: svg.querySelector(":scope > title").textContent,
        now: (baseline - ys.at(-1)) / (baseline - Math.min(...ys))};  // the last value, as a share of the highest
"""

_BARS = """
const figure = document.querySelector(arguments[0]);
const svg = figure && figure.querySelector("svg");
if (!svg) return null;
return {role: svg.getAttribute("role"), label: svg.getAttribute("aria-label"),
        bars: [...svg.querySelectorAll("g.bar")].map((bar) => ({
          title: bar.querySelector("title").textContent, width: Number(bar.querySelector("rect").getAttribute("width"))})),
        table: [...figure.querySelectorAll(".visually-hidden tr")].map((row) => row.innerText.replace(/\\s+/g, " ").trim()),
        hidden: figure.querySelector(".visually-hidden").getBoundingClientRect().width <= 1};
"""

_OTHER_HOSTS = """
return performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
  .map((entry) => entry.name).filter((name) => new URL(name).origin !== location.origin);
"""


def sparkline(driver: webdriver.Chrome, selector: str) -> dict | None:
    """The sparkline at ``selector`` (an <svg>): its points, role, aria-label and <title>, and ``now``:
    its last point's height as a share of its highest point's (what its label's "now" over "highest" says)."""
    return driver.execute_script(_SPARKLINE, selector)


def bars(driver: webdriver.Chrome, selector: str) -> dict | None:
    """The bar chart in the <figure> at ``selector``: its role and aria-label, each bar's <title> and
    drawn width, the rows of its screen-reader table, and whether that table takes no room on screen."""
    return driver.execute_script(_BARS, selector)


def other_hosts(driver: webdriver.Chrome) -> list[str]:
    """Every address this page loaded (the page, its assets, its API calls) that is not on its own origin."""
    return driver.execute_script(_OTHER_HOSTS)


def label_numbers(label: str) -> dict[str, float]:
    """A sparkline's label's "lowest X, highest Y, now Z" as numbers (X, Y and Z written like 3,100 or 12.5)."""
    found = re.search(r"lowest ([\d,.]+), highest ([\d,.]+), now ([\d,.]+)$", label)
    if found is None:
        raise ValueError(f"a sparkline's label without lowest, highest and now: {label!r}")
    return dict(zip(("lowest", "highest", "now"), (float(value.replace(",", "")) for value in found.groups())))


def check_tokens_line(line: dict) -> None:
    """A tokens/s line drawn from a job that moved, saying in words what it draws."""
    assert line["role"] == "img" and line["title"] == line["label"], line
    assert re.match(r"tokens per second over the last \d+ (s|min)", line["label"]), line
    said = label_numbers(line["label"])
    assert said["highest"] > 0 and said["lowest"] <= said["now"] <= said["highest"], line  # its tokens moved
    assert abs(line["now"] - said["now"] / said["highest"]) < 0.02, line  # the line ends where its label says


def histogram_bars(report: dict, field: str, unit: str) -> list[str]:
    """Each bar's title for a data report's histogram: its buckets from the first non-empty to the
    last, labelled as ``poolq results JOB --report`` prints them."""
    histogram = Histogram(**report[field])
    filled = [index for index, count in enumerate(histogram.counts) if count]
    return [f"{histogram.labels()[i]}: {histogram.counts[i]:,}{unit}" for i in range(filled[0], filled[-1] + 1)]


def _count(title: str) -> int:
    found = re.search(r": ([\d,]+)", title)  # "256-511: 1,234 documents"
    if found is None:
        raise ValueError(f"a bar's title without its count: {title!r}")
    return int(found.group(1).replace(",", ""))


def check_bars(chart: dict, titles: list[str], summary: str) -> None:
    """A bar chart drawing exactly ``titles`` (one bar each, in order), the longest bar for the largest
    count and no bar for 0, summed up in its label, every number in its screen-reader table."""
    assert chart["role"] == "img" and chart["label"].startswith(f"{summary}: {len(titles)} bars"), chart
    assert [bar["title"] for bar in chart["bars"]] == titles, chart
    assert all((bar["width"] > 0) == (_count(bar["title"]) > 0) for bar in chart["bars"]), chart
    assert _count(max(chart["bars"], key=lambda bar: bar["width"])["title"]) == max(map(_count, titles)), chart
    assert chart["table"] == [title.replace(":", "") for title in titles] and chart["hidden"], chart
