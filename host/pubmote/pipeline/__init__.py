"""The data pipeline (`pubmote pipeline`): the bridge's journal into Spark tables and a report.

Layering: readings (payload -> number, no Spark), schema and transform (the one
transformation batch and streaming share), session (Java check, SparkSession), batch,
stream and report (the three modes), synth (journals for tests and benchmarks).
Importing this package does not import pyspark.
"""
