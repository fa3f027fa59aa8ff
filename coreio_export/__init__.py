"""coreio-export: the exporter of an EventExport (events.core.io/v1alpha1, issue 25).

It reads the export's spec, watches the Events it selects from the position its status holds,
sends them to the sink in batches and advances the position only once the sink acknowledged a
batch: delivery at least once, in revision order, and nothing lost across a restart.
"""
