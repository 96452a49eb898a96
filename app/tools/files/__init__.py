"""What the file tools share: paths and where they may reach, diffs, exact-text replacements,
images."""
