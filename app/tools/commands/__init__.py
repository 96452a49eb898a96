"""What running commands needs (bash, watch): scripts on disk, a scrubbed environment, and the
watchdog that stops a dead worker's commands."""
