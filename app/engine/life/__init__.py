"""The turn's life: opened for a message and queued, its calls asked, decided and answered,
cancelled or ended; each transition written once (`transition`)."""
