"""Planning a job in sections, spread over the control workers.

The input (inline documents, one object or every object under a prefix) is cut into *sections*:
one per object, and line-aligned byte ranges of large JSONL objects or runs of whole row groups
of large Parquet objects (``jsonl_sections.py``, ``parquet_sections.py``). Planning then runs in stages,
each written to the ledger before the next starts, so a crash redoes one section's stage:

1. **sections** (the plan task): list the input once, write ``planning/sections.json``;
2. **scan** (one task per section): validate every line, spill each valid record's id and
   content hash to ``section-N.ids.tsv`` (``jobs/ledger/id_spill.py``);
3. **decide** (the plan task): read the spills in input order into id partitions and decide
   duplicate ids and carried documents (``id_partitions.py``), one partition in memory at a time;
4. **cut** (one task per section): read the section again and cut shards of byte (or row) ranges
   from the records kept, with the section's error lines in line order;
5. **commit** (the plan task): concatenate the error lines, write ``plan.json``.

Every stage is deterministic: a section scanned or cut twice writes the same objects.

Each stage is a plain function of the run (``planning_run.py``: the job, its sections, its
planning objects) and of the records it is handed; it writes its data objects and returns its
record. The planning tasks (``jobs/steps/planner.py``, ``plan_section.py``) alone read the records
(once, as the ledger's ``progress``, when the plan task builds its run) and write what each stage
returned, its commit point (``jobs/steps/planning_stages.py`` moves the stages on).
"""
