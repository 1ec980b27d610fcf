"""What operators see: counters of work done, live gauges, structured JSON logs."""
