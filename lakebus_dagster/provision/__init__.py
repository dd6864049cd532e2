"""Reconcilers: desired state (from the bus layout) vs the live cluster, changed only on difference.

Each reconciler returns :class:`~lakebus_dagster.provision.outcome.Outcome` records (created /
updated with a diff / unchanged / drift) and raises :class:`ProvisioningError` — before touching
anything — when the live state is one it must not "fix" (a control topic with several partitions,
a replication factor above the broker count, an invalid connector config).
"""

from lakebus_dagster.provision.outcome import Action, Outcome, ProvisioningError, outcomes_markdown

__all__ = ["Action", "Outcome", "ProvisioningError", "outcomes_markdown"]
