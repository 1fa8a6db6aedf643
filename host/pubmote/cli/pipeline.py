"""`pubmote pipeline`: the bridge's journal into Spark tables (batch or --follow) and an
HTML report, on a Spark of its own or a resident one (`--remote`, which `pubmote pipeline
serve` runs). Spark starts only inside `run`, so `pubmote --help` stays fast."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg

EPILOG = """\
tables (Parquet, in --out):
  windows   per topic and origin board, per event-time window: messages, readings,
            min/avg/max reading, p50/p99 latency to subscribers (ms), delivered, dropped,
            lost, drop_rate, late, too_late, event_time (taken|arrival|mixed)
  health    per node (board, sp:CLIENT, NDN app), per window: published, delivered_to,
            dropped_to, lost, ups, reconnects, downs

examples:
  pubmote pipeline journal/ --out tables/                    batch, local[*]
  pubmote pipeline journal/ --out tables/ --report report/   batch, then report/index.html
  pubmote pipeline journal/ --out live/ --follow             streaming, exactly-once
  pubmote pipeline journal/ --out hdfs:///pubmote/tables --master spark://head:7077 \\
      --conf spark.executor.memory=4g                        the same job on a cluster
  pubmote pipeline serve                                     a resident Spark (Spark Connect)
  pubmote pipeline journal/ --out tables/ --remote sc://127.0.0.1:15002
                                                             the job on it: no JVM started

--remote sends the job to a `pubmote pipeline serve` (or any Spark Connect server): no
JVM starts in this process, and a run costs the job's own work, not Spark's start (some
5 s). The server reads the journal's columns and writes the tables on its machine's file
system: the paths are sent absolute, so run the client on the server's machine (or give
paths every node sees). --master and --conf are the server's then (refused here: give
them to `pubmote pipeline serve`), as is Spark's log (`pubmote pipeline serve -v`).

Event time: a reading is windowed by when its board took it (the journal's t_taken), or
by its arrival at the bridge (t_bridge) when the board had no synced clock; event_time
says which a window's records used. A reading that arrived more than --late-ms after it
was taken counts in its window and in `late`; one that arrived --watermark or more after
is counted in `too_late` of the window it arrived in, and nowhere else in the table. The
rule is the record's own, so batch and --follow write the same windows. The health table
is by arrival time (docs/pipeline.md).

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
                   help="how late a reading may arrive (its arrival minus its taken-time) "
                        "and still count in its window; one later is counted in too_late "
                        "of the window it arrived in, in batch and --follow alike (default: "
                        "%(default)s). --follow writes a window once the watermark passes "
                        "its end")
    p.add_argument("--late-ms", type=arg(kinds.whole(0)), default=2000, metavar="MS",
                   help="a reading older than this on arrival, but within the watermark, "
                        "counts in its window and in its `late` column (default: "
                        "%(default)s, as `pubmote sub`)")
    p.add_argument("--trigger-seconds", type=arg(kinds.seconds()), default=5.0, metavar="S",
                   help="--follow: how often to look for new journal files (default: 5)")
    p.add_argument("--max-files-per-trigger", type=arg(kinds.whole(1)), metavar="N",
                   help="--follow: at most N new files per batch (default: all)")
    p.add_argument("--reading-key", metavar="KEY",
                   help="the CBOR map entry holding the reading (default: see below)")
    p.add_argument("--remote", metavar="sc://HOST:PORT", type=arg(kinds.connect_url),
                   help="run the job on a resident Spark Connect server (`pubmote pipeline "
                        "serve`) instead of starting Spark here; see below")
    p.add_argument("-v", "--verbose", action="store_true", help="Spark's own log messages")
    p.set_defaults(run=run)
    _add_serve(p)


SERVE_EPILOG = """\
The server is the pipeline's own Spark (the same JVM settings, class archive, --master and
--conf as a batch run) with Spark's Connect plugin: `pubmote pipeline JOURNAL_DIR --remote
sc://HOST:PORT` runs its jobs there, without starting a JVM of its own. It prints one line
(`... listening on sc://HOST:PORT`) once clients can connect, and runs in the foreground
until Ctrl-C (exit status 130) or SIGTERM (0), ending the Spark jobs of its clients.

Spark Connect has no authentication here: whoever reaches the port runs Spark jobs as the
user running the server, reading and writing any file that user may. It therefore listens
on loopback only, unless --host names another address and --allow-remote-clients says you
mean it (then keep the port behind a firewall or an SSH tunnel).

examples:
  pubmote pipeline serve                                   local[*] on 127.0.0.1:15002
  pubmote pipeline serve --port 15003 --conf spark.driver.memory=2g
  pubmote pipeline serve --master spark://head:7077        in front of a standalone cluster
"""


def _add_serve(p: argparse.ArgumentParser) -> None:
    """`pubmote pipeline serve`: its own parser, reached when the first word after
    `pipeline` is `serve` (the pipeline's first positional is the journal folder, so
    argparse's subcommands cannot hold both; a journal folder named serve is ./serve)."""
    s = type(p)(prog=p.prog + " serve", epilog=SERVE_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Run a resident Spark (a Spark Connect server) that `pubmote "
                            "pipeline JOURNAL_DIR --remote sc://HOST:PORT` runs its jobs on.")
    s.add_argument("--port", type=arg(kinds.whole(1, 65535)), default=15002,
                   help="the port to listen on (default: %(default)s, Spark Connect's)")
    s.add_argument("--host", type=arg(kinds.host), default="127.0.0.1",
                   help="the address to listen on (default: %(default)s); another than "
                        "loopback needs --allow-remote-clients")
    s.add_argument("--allow-remote-clients", action="store_true",
                   help="let --host be an address other hosts reach (clients are not "
                        "authenticated: see below)")
    s.add_argument("--master", default="local[*]",
                   help="Spark master, passed through unchanged (default: %(default)s)")
    s.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   type=arg(kinds.key_value),
                   help="a Spark setting, repeatable (e.g. spark.driver.memory=2g)")
    s.add_argument("-v", "--verbose", action="store_true", help="Spark's own log messages")
    s.set_defaults(run=run_serve)
    parser_class = type(p)

    class WithServe(parser_class):  # type: ignore[valid-type,misc]
        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            if args and args[0] == "serve":
                return s.parse_known_args(args[1:], namespace)
            return super().parse_known_args(args, namespace)

    p.__class__ = WithServe
    p.usage = "%(prog)s [options] JOURNAL_DIR\n       %(prog)s serve [options]"
    p.subcommands = {"serve": s}  # type: ignore[attr-defined]  # for the CLI's contract test


def _log(line: str) -> None:
    print("pipeline: " + line, file=sys.stderr, flush=True)


def usage_error(args: argparse.Namespace) -> str | None:
    """The first mistake the options make together, as one line, before Spark starts
    (each option's value was checked by its kind when the command line was parsed)."""
    if args.follow and args.report:
        return "--report runs on the batch tables; run it without --follow"
    if args.remote and (args.conf or args.master != "local[*]"):
        return ("--master and --conf set up a Spark, and --remote uses the server's: give "
                "them to `pubmote pipeline serve`")
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


def run_serve(args: argparse.Namespace) -> int:
    from pubmote.pipeline.connect import is_loopback, serve
    from pubmote.pipeline.errors import PipelineError

    if not is_loopback(args.host) and not args.allow_remote_clients:
        print("pubmote pipeline serve: --host %s is not loopback: Spark Connect clients are "
              "not authenticated (anyone reaching the port runs jobs as you); add "
              "--allow-remote-clients if you mean it" % args.host, file=sys.stderr)
        return 2
    try:
        return serve(args.master, dict(args.conf), host=args.host, port=args.port,
                     verbose=args.verbose, log=_log)
    except PipelineError as e:
        print("pubmote pipeline serve: %s" % e, file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    from pubmote.pipeline.errors import PipelineError
    from pubmote.pipeline.session import spark_session

    error = usage_error(args)
    if error:
        print("pubmote pipeline: %s" % error, file=sys.stderr)
        return 2
    journal, out, report, checkpoint = args.journal, args.out, args.report, args.checkpoint
    if args.remote:  # the server resolves paths from its own working folder, not ours
        from pubmote.pipeline.connect import remote_paths

        journal, out, report, checkpoint = remote_paths(journal, out, report, checkpoint)
    backlog, short = None, False
    if not args.follow:  # the journal's compaction runs while the JVM starts
        from pubmote.pipeline.backlog import prepare_soon, short_run

        backlog, short = prepare_soon(journal, args.reading_key), short_run(journal)
    try:
        if args.remote:
            from pubmote.pipeline.connect import remote_session

            spark = remote_session(args.remote)
        else:
            # a batch run saves Spark's class archive when there is none (jvm_archive.py)
            spark = spark_session(args.master, dict(args.conf), verbose=args.verbose,
                                  save_classes=not args.follow, short=short,
                                  resident=args.follow)
    except PipelineError as e:
        print("pubmote pipeline: %s" % e, file=sys.stderr)
        return 1
    try:
        opts: dict[str, Any] = {"window": args.window, "watermark": args.watermark,
                                "late_ms": args.late_ms, "reading_key": args.reading_key,
                                "log": _log}
        if args.follow:
            from pubmote.pipeline.stream import follow

            return follow(spark, journal, out, checkpoint or out.rstrip("/") + "/_checkpoint",
                          trigger_s=args.trigger_seconds, max_files=args.max_files_per_trigger,
                          **opts)
        from pubmote.pipeline.batch import run_batch

        stats = run_batch(spark, journal, out, report=report, backlog=backlog, **opts)
        if report:
            _log("report: %s" % stats["report"])
        return 0
    except PipelineError as e:
        print("pubmote pipeline: %s" % e, file=sys.stderr)
        return 1
    finally:
        from pubmote.pipeline import jvm_archive

        spark.stop()  # a remote session: only ours ends, not the server
        if not args.remote:
            jvm_archive.finish(_log)
