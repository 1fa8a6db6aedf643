"""`pubmote pipeline`: the bridge's journal into Spark tables (batch or --follow) and an
HTML report. Spark starts only inside `run`, so `pubmote --help` stays fast."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg

EPILOG = """\
tables (Parquet, in --out):
  windows   per topic and origin board, per window: messages, readings, min/avg/max
            reading, p50/p99 latency to subscribers (ms), delivered, dropped, lost, drop_rate
  health    per node (board, sp:CLIENT, NDN app), per window: published, delivered_to,
            dropped_to, lost, ups, reconnects, downs

examples:
  pubmote pipeline journal/ --out tables/                    batch, local[*]
  pubmote pipeline journal/ --out tables/ --report report/   batch, then report/index.html
  pubmote pipeline journal/ --out live/ --follow             streaming, exactly-once
  pubmote pipeline journal/ --out hdfs:///pubmote/tables --master spark://head:7077 \\
      --conf spark.executor.memory=4g                        the same job on a cluster

A reading is the CBOR number a board published, or the "value"/"reading"/"celsius"/
"temperature" entry of a CBOR map (--reading-key picks another). Each finished journal
file is compacted once into typed columns (Parquet, readings decoded) in JOURNAL_DIR/.columns,
which Spark reads: the pipeline needs write access to the journal folder. Needs Java 17+.

The first batch run saves the classes Spark's JVM loads into an archive (HotSpot's class
data sharing, some 180 MB, in the virtualenv's share/pubmote/ or ~/.cache/pubmote/) that
later runs map: Spark starts in about half the time. PUBMOTE_SPARK_ARCHIVE=PATH keeps it
elsewhere, PUBMOTE_SPARK_ARCHIVE=off does without; `make setup` makes it ahead.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "pipeline", help="analyse the bridge's journal on Spark: tables and a report",
        description="Read a `pubmote bridge --journal DIR` folder with PySpark and compute "
                    "per-topic and per-node windows into Parquet tables: once over the "
                    "whole journal (batch), or continuously (--follow, Structured "
                    "Streaming with a watermark and a checkpoint: exactly-once across "
                    "crashes and restarts). --report writes an HTML page with plots.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("journal", metavar="JOURNAL_DIR", type=arg(file_kinds.journal_in),
                   help="the bridge's --journal folder")
    p.add_argument("--out", default="pubmote-tables", metavar="DIR",
                   type=arg(file_kinds.folder_out),
                   help="where the Parquet tables go (default: %(default)s); any path "
                        "Spark can write, e.g. hdfs:// or s3a:// on a cluster")
    p.add_argument("--follow", action="store_true",
                   help="keep running: process journal files as the bridge finishes them")
    p.add_argument("--checkpoint", metavar="DIR", type=arg(file_kinds.folder_out),
                   help="--follow's checkpoint (default: OUT/_checkpoint); keep it with "
                        "OUT: together they make a restart go on exactly where it stopped")
    p.add_argument("--report", metavar="OUT_DIR", type=arg(file_kinds.folder_out),
                   help="after the batch run, write OUT_DIR/index.html with plots: message "
                        "rate per topic, latency distribution, per-node health, last readings")
    p.add_argument("--master", default="local[*]",
                   help="Spark master, passed through unchanged (default: %(default)s)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   type=arg(kinds.key_value),
                   help="a Spark setting, repeatable (e.g. spark.executor.memory=4g)")
    p.add_argument("--window", default="1 minute", type=arg(kinds.duration),
                   help="window length (default: %(default)s)")
    p.add_argument("--watermark", default="1 minute", type=arg(kinds.duration),
                   help="how late a record may arrive in --follow, in event time (default: "
                        "%(default)s; a journal file closes at the latest "
                        "--journal-max-age after its first record)")
    p.add_argument("--trigger-seconds", type=arg(kinds.seconds()), default=5.0, metavar="S",
                   help="--follow: how often to look for new journal files (default: 5)")
    p.add_argument("--max-files-per-trigger", type=arg(kinds.whole(1)), metavar="N",
                   help="--follow: at most N new files per batch (default: all)")
    p.add_argument("--reading-key", metavar="KEY",
                   help="the CBOR map entry holding the reading (default: see below)")
    p.add_argument("-v", "--verbose", action="store_true", help="Spark's own log messages")
    p.set_defaults(run=run)


def _log(line: str) -> None:
    print("pipeline: " + line, file=sys.stderr, flush=True)


def usage_error(args: argparse.Namespace) -> str | None:
    """The first mistake the options make together, as one line, before Spark starts
    (each option's value was checked by its kind when the command line was parsed)."""
    if args.follow and args.report:
        return "--report runs on the batch tables; run it without --follow"
    if "://" in args.journal:
        return ("JOURNAL_DIR %s: give a folder of this host (on a cluster, a mount every node "
                "sees, e.g. NFS): the pipeline compacts the journal into typed columns "
                "beside it before Spark reads them" % args.journal)
    if not os.path.exists(args.journal):
        if not args.follow:  # --follow makes it and waits: the bridge may start later
            return ("JOURNAL_DIR %s: no such folder (pubmote bridge --journal %s "
                    "writes it)" % (args.journal, args.journal))
    elif not os.path.isdir(args.journal):
        return ("JOURNAL_DIR %s is a file, not a folder: give the folder the bridge's "
                "--journal writes (its files are journal-*.jsonl)" % args.journal)
    return None


def run(args: argparse.Namespace) -> int:
    from pubmote.pipeline.errors import PipelineError
    from pubmote.pipeline.session import spark_session

    error = usage_error(args)
    if error:
        print("pubmote pipeline: %s" % error, file=sys.stderr)
        return 2
    backlog = None
    if not args.follow:  # the journal's compaction runs while the JVM starts
        from pubmote.pipeline.backlog import prepare_soon

        backlog = prepare_soon(args.journal, args.reading_key)
    try:
        conf = dict(args.conf)  # (key, value) pairs: kinds.key_value
        # a batch run saves Spark's class archive when there is none (jvm_archive.py)
        spark = spark_session(args.master, conf, verbose=args.verbose,
                              save_classes=not args.follow)
    except PipelineError as e:
        print("pubmote pipeline: %s" % e, file=sys.stderr)
        return 1
    try:
        opts: dict[str, Any] = {"window": args.window, "watermark": args.watermark,
                                "reading_key": args.reading_key, "log": _log}
        if args.follow:
            from pubmote.pipeline.stream import follow

            return follow(spark, args.journal, args.out,
                          args.checkpoint or args.out.rstrip("/") + "/_checkpoint",
                          trigger_s=args.trigger_seconds, max_files=args.max_files_per_trigger,
                          **opts)
        from pubmote.pipeline.batch import run_batch

        stats = run_batch(spark, args.journal, args.out, report=args.report,
                          backlog=backlog, **opts)
        if args.report:
            _log("report: %s" % stats["report"])
        return 0
    except PipelineError as e:
        print("pubmote pipeline: %s" % e, file=sys.stderr)
        return 1
    finally:
        from pubmote.pipeline import jvm_archive

        spark.stop()
        jvm_archive.finish(_log)
