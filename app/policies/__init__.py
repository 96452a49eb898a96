"""Tool policies: an admin's allow / deny / ask rules for tool calls, checked where a call is
decided (app/engine/life/calls.py `new_row`), before "always" and the workstream's auto-approve."""
