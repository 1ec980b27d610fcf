"""`poolq bench families`' report as text: a paragraph naming the machine, its CPU flags, the date and
the versions, then one row per (family, dtype), either aligned for a terminal or as a Markdown table
ready for docs/benchmarks.md."""
from __future__ import annotations

COLUMNS = ("model", "dtype", "tokens (ST's positions)", "poolq packed tok/s", "ST padded tok/s", "poolq / ST (median)",
           "per-round ratios", "min centred cos poolq–ST", "min cos to ST fp32, poolq / ST", "peak RSS growth poolq / ST (MB)")


def describe(report: dict) -> str:
    """Where, when and how the rows were measured, in one paragraph."""
    machine, versions = report["machine"], report["versions"]
    flags = ", ".join(machine["flags"]) or "none of the noted ones"
    return (f"Measured {report['date']} on {machine['cpu']} ({machine['logical_cores']} logical cores, "
            f"{machine['usable_cores']} usable, {machine['memory_gb']} GiB; flags: {flags}; `auto` = {report['auto_dtype']}), "
            f"{report['threads']} torch threads; torch {versions['torch']}, transformers {versions['transformers']}, "
            f"sentence-transformers {versions['sentence-transformers']}. Documents of "
            f"{', '.join(f'{n:,}' for n in report['lengths'])} tokens (vocabulary {report['vocab']:,}), "
            f"sentence-transformers batch size {report['batch_size']}; medians of {report['rounds']} interleaved "
            f"round(s); cosines centred on sentence-transformers' batch mean.")


def cells(row: dict) -> list[str]:
    """One row's values, in COLUMNS' order."""
    to_fp32 = " / ".join(f"{row[k]:.5f}" for k in ("poolq_min_cos_to_st_fp32", "st_min_cos_to_st_fp32") if k in row)
    return [f"{row['family']} (hidden {row['hidden']}, {row['layers']} layers)", row["dtype"],
            f"{row['tokens']:,} ({row['st_positions']:,})", f"{row['poolq_tok_s']:,.0f}", f"{row['st_tok_s']:,.0f}",
            f"{row['ratio']:.2f}×", ", ".join(f"{r:.2f}" for r in row["ratios"]), f"{row['min_centred_cosine']:.5f}",
            to_fp32 or "-", f"{row['poolq_peak_mb']:,.0f} / {row['st_peak_mb']:,.0f}"]


def markdown_table(report: dict) -> str:
    lines = [_markdown_line(COLUMNS), "|" + "---|" * len(COLUMNS)]
    for row in report["rows"]:
        values = cells(row)
        values[5] = f"**{values[5]}**"  # the figure a reader looks for
        lines.append(_markdown_line(values))
    return "\n".join(lines)


def _markdown_line(values) -> str:
    return "| " + " | ".join(values) + " |"


def text_table(report: dict) -> str:
    rows = [list(COLUMNS), *(cells(row) for row in report["rows"])]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows)


def render(report: dict, markdown: bool = False) -> str:
    """The paragraph, a blank line, then the table (Markdown or aligned)."""
    return describe(report) + "\n\n" + (markdown_table(report) if markdown else text_table(report))
