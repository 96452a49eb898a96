"""The boundary around what a model's tools reach: the `[sandbox]` policy, the bubblewrap jail
that bash calls and watch polls run in, and the egress proxy a jailed command may use."""
