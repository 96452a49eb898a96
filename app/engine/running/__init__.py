"""Running a turn's phases as tasks: the model step and the tool batch, the claim each holds
and keeps alive, the chain that runs them back to back, and the recovery beat runs."""
