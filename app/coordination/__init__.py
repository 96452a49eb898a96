"""Coordinator workstreams: the child workstreams a coordinator manages (`children`), its waits on
them (`waits`), its task list (`tasklist`), and what its tools are given to reach them (`reach`)."""
