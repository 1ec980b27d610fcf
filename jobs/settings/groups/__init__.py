"""The groups of ``Settings``, one concern each (store, broker, serving, limits, sinks, webhooks, ...);
each reads its own ``POOLQ_*`` variables."""
