"""The bus, declared once: topics, routes and the sink connector (layout), and the desired Kafka /
Connect state derived from it (desired). Provisioning diffs the desired state against the live one."""
