"""The trace viewer, one module a part: what each key does (keys), the terminal it runs in (terminal),
recording and loading traces (traces), writing a screen as SVG or HTML (export), and timing it (timing).

The panels it shows are pure renderers in `sim.viz`.
"""
