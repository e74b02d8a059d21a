"""Chrome-trace JSON timelines: the shared reader (chrome_trace: the event array found, cut and parsed in
parallel, event_array), the PyTorch profiler's Kineto traces (kineto, kineto_memory) and Triton's Proton traces
(proton), with their tables.
"""
