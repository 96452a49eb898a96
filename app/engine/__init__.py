"""The agent engine: a message's turn, run as durable phases, with its events and sub-agents.

- `life/`: the turn's life as stored state: opened and queued (`turns`), its calls asked
  (`asked`, `calls`), decided (`approvals`), cancelled (`cancel`) and ended; each transition
  written once (`transition`).
- `running/`: running a phase as a task: the model step and the tool batch, their claim
  (`leases`, `heartbeats`), the chain that runs them back to back, the cancel check, and the
  recovery beat runs (`sweeper`, `recovery`).
- `publishing/`: events out after the commit and in commit order (`outbox`), and streaming.
- `conversation/`: what the model is sent: the stored history, a worker's cache, the prompt.
- `subagents/`: task_agent's children: started, decided, relayed, and answered (`fanin`).
"""
