package io.lakebus.connect.rest;

import java.util.Map;
import javax.security.auth.login.Configuration;
import org.apache.kafka.connect.rest.ConnectRestExtension;
import org.apache.kafka.connect.rest.ConnectRestExtensionContext;
import org.apache.kafka.connect.rest.basic.auth.extension.JaasBasicAuthFilter;

/**
 * Kafka's HTTP basic auth for the Connect REST API ({@link JaasBasicAuthFilter}: the JAAS section
 * {@code KafkaConnect}, e.g. its {@code PropertyFileLoginModule}), except for the two unauthenticated
 * probes a platform needs: {@code GET /} and {@code GET /health} (Strimzi's liveness and readiness
 * probes call them without credentials, so Kafka's own {@code BasicAuthSecurityRestExtension}, which
 * guards every path, leaves the worker pods unready and restarted). Everything else — connectors,
 * plugins, offsets, loggers — needs the login, as with Kafka's extension.
 *
 * <p>Like Kafka's extension, the JAAS configuration is captured when this class is loaded, before
 * any connector runs, so a connector cannot swap it.
 */
public class BasicAuthRestExtension implements ConnectRestExtension {

    private static final Configuration CONFIGURATION = Configuration.getConfiguration();

    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void register(ConnectRestExtensionContext restPluginContext) {
        restPluginContext.configurable().register(new ProbeExemptFilter(new JaasBasicAuthFilter(CONFIGURATION)));
    }

    @Override
    public void close() {
    }

    @Override
    public String version() {
        String version = BasicAuthRestExtension.class.getPackage().getImplementationVersion();
        return version == null ? "dev" : version;
    }
}
