"""Watches: commands a workstream polls on a schedule (the `watch` tool), claimed by beat's pass,
polled on the tool queue, and reported to the model as a message when they fire."""
