package io.lakebus.connect;

import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.SortedMap;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.components.Versioned;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * The sink's door for routing and the registry's contract: an SMT that passes a record through
 * unchanged or throws a {@link DataException} saying why it may not reach a table.
 *
 * <p>Rules, in order: (1) the value is a struct with the route field ({@code route.field}, lakebus's
 * {@code event}); (2) the route field is a non-null string naming a registered event — the Iceberg
 * sink's static routing silently skips a record that matches no route, so the guard refuses it
 * first, naming the value and the known routes; (3) the version field ({@code schema_version})
 * names a registered version of that event; (4) the record's envelope schema is compatible with
 * that version ({@link RegistryContract}), so it cannot fail the sink task or change a column.
 * Tombstones (null values) pass: they carry no event and the sink ignores them.
 *
 * <p>Why an SMT next to {@link StrictJsonConverter} rather than inside it: the converter's rules
 * are generic (a record must match its own declared schema), these are lakebus's (which events and
 * versions exist), and their config — the registry's schemas — belongs to the connector, checked
 * by Connect's config validation through {@link #config()}. Transformation-stage errors are
 * tolerated like converter errors ({@code errors.tolerance=all}): the original record bytes go to
 * the DLQ with the {@code __connect.errors.*} headers. The guard must be the first transform, so
 * later ones (provenance columns) see only accepted records.
 *
 * <p>Known routes are the registry's events: provisioning writes the registry of exactly the
 * routed events, so registering an event adds its route here with no other change.
 */
public class RegistryGuard<R extends ConnectRecord<R>> implements Transformation<R>, Versioned {

    public static final String ROUTE_FIELD_CONFIG = "route.field";
    public static final String VERSION_FIELD_CONFIG = "version.field";
    public static final String REGISTRY_CONFIG = "registry";

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(ROUTE_FIELD_CONFIG, ConfigDef.Type.STRING, "event", new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "Top-level payload field whose value names the event (the sink's route field).")
            .define(VERSION_FIELD_CONFIG, ConfigDef.Type.STRING, "schema_version", new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "Top-level int32 payload field selecting the registered event version.")
            .define(REGISTRY_CONFIG, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "The event registry: {\"<event>\": {\"<version>\": <Connect JSON schema>}}; "
                            + "its events are the known routes.");

    /** Verdicts per schema instance: JsonConverter caches schemas, so one instance per distinct envelope schema. */
    private static final int MAX_CACHED_SCHEMAS = 1024;

    private String routeField;
    private String versionField;
    private RegistryContract contract;
    private String knownRoutes;
    private final Map<Schema, Map<Verdict, String>> verdicts = new IdentityHashMap<>();

    @Override
    public String version() {
        return PluginVersion.get();
    }

    @Override
    public ConfigDef config() {
        return CONFIG_DEF;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        AbstractConfig config = new AbstractConfig(CONFIG_DEF, configs);
        routeField = config.getString(ROUTE_FIELD_CONFIG);
        versionField = config.getString(VERSION_FIELD_CONFIG);
        contract = RegistryContract.parse(REGISTRY_CONFIG, config.getString(REGISTRY_CONFIG), routeField, versionField);
        knownRoutes = String.join(", ", contract.events());
        verdicts.clear();
    }

    @Override
    public R apply(R record) {
        Object value = record.value();
        if (value == null) {
            return record;
        }
        Schema schema = record.valueSchema();
        if (!(value instanceof Struct) || schema == null || schema.type() != Schema.Type.STRUCT) {
            throw new DataException("record value is " + (schema == null ? "schemaless " + value.getClass().getSimpleName()
                    : SchemaTypes.describe(schema)) + ", expected an event struct with route field '" + routeField
                    + "'; known routes: " + knownRoutes);
        }
        Struct struct = (Struct) value;
        String event = route(schema, struct);
        int version = version(event, schema, struct);
        String problem = verdict(event, version, schema);
        if (problem != null) {
            throw new DataException("event '" + event + "' " + versionField + " " + version
                    + ": envelope schema is incompatible with the registry: " + problem);
        }
        return record;
    }

    private String route(Schema schema, Struct struct) {
        Field field = schema.field(routeField);
        if (field == null) {
            throw new DataException("route field '" + routeField + "' is missing; known routes: " + knownRoutes);
        }
        Object route = struct.get(field);
        if (route == null) {
            throw new DataException("route field '" + routeField + "' is null; known routes: " + knownRoutes);
        }
        if (!(route instanceof String)) {
            throw new DataException("route field '" + routeField + "' is " + SchemaTypes.describe(field.schema()) + " "
                    + JsonValues.truncate(String.valueOf(route)) + ", expected a string; known routes: " + knownRoutes);
        }
        String event = (String) route;
        if (!contract.knows(event)) {
            // exact match: the value is never used as a pattern ("bet|recharge" and ".*" are just unknown names)
            throw new DataException("route field '" + routeField + "' value " + JsonValues.quote(event)
                    + " matches no route; known routes: " + knownRoutes);
        }
        return event;
    }

    private int version(String event, Schema schema, Struct struct) {
        SortedMap<Integer, Schema> versions = contract.versions(event);
        String registered = "registered versions: " + versions.keySet();
        Field field = schema.field(versionField);
        Object raw = field == null ? null : struct.get(field);
        if (raw == null) {
            throw new DataException("event '" + event + "': field '" + versionField + "' is "
                    + (field == null ? "missing" : "null") + "; " + registered);
        }
        if (!(raw instanceof Integer) || !versions.containsKey(raw)) {
            throw new DataException("event '" + event + "': " + versionField + " " + JsonValues.truncate(String.valueOf(raw))
                    + " (" + SchemaTypes.describe(field.schema()) + ") is not a registered version; " + registered);
        }
        return (Integer) raw;
    }

    private String verdict(String event, int version, Schema schema) {
        Map<Verdict, String> known = verdicts.get(schema);
        if (known == null) {
            if (verdicts.size() >= MAX_CACHED_SCHEMAS) {
                verdicts.clear();
            }
            known = new HashMap<>();
            verdicts.put(schema, known);
        }
        // the route value varies per record under one schema, so the verdict is per (event, version)
        Verdict key = new Verdict(event, version);
        String problem = known.get(key);
        if (problem == null) {
            String found = contract.incompatibility(event, version, schema);
            problem = found == null ? "" : found;
            known.put(key, problem);
        }
        return problem.isEmpty() ? null : problem;
    }

    private record Verdict(String event, int version) {
    }

    @Override
    public void close() {
        verdicts.clear();
    }
}
