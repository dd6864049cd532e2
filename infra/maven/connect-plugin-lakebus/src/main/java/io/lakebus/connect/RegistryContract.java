package io.lakebus.connect;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;

/**
 * The event registry's schemas as the guard receives them in its config, and the compatibility rule.
 *
 * <p>Config form (written by lakebus's provisioning from the Python event registry, which stays the
 * one source): {@code {"<event>": {"<version>": <Connect JSON schema>, ...}, ...}} — the same schema
 * JSON the SDK puts in every envelope.
 *
 * <p>A record's envelope schema is compatible with registered version {@code v} of its event when
 * every required field of {@code v} is declared with the same type and still required, every
 * optional field of {@code v} that it declares has the same type, and every field it declares
 * beyond {@code v} is optional and has the type any other registered version gives it. That is the
 * registry's own evolution rule (versions may only add optional fields) and what the Iceberg sink
 * can apply to a live table: add a nullable column. A type change, a dropped required field or a
 * new required field would fail the sink task or change the data, so they are refused at the door.
 */
final class RegistryContract {
    private final SortedMap<String, SortedMap<Integer, Schema>> events;

    private RegistryContract(SortedMap<String, SortedMap<Integer, Schema>> events) {
        this.events = events;
    }

    /** Parse and check the config value; problems are {@link ConfigException}s naming the config key. */
    static RegistryContract parse(String configKey, String json, String routeField, String versionField) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(json);
        } catch (JsonProcessingException e) {
            throw new ConfigException(configKey, "(not shown)", "not valid JSON: " + e.getOriginalMessage());
        }
        if (root == null || !root.isObject() || root.size() == 0) {
            throw new ConfigException(configKey, "(not shown)",
                    "expected a JSON object {\"<event>\": {\"<version>\": <schema>}} with at least one event");
        }
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "true"), false);
        SortedMap<String, SortedMap<Integer, Schema>> events = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> event = it.next();
            String name = event.getKey();
            if (!event.getValue().isObject() || event.getValue().size() == 0) {
                throw new ConfigException(configKey, "(not shown)", "event '" + name + "': expected {\"<version>\": <schema>, ...}");
            }
            SortedMap<Integer, Schema> versions = new TreeMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> vs = event.getValue().fields(); vs.hasNext(); ) {
                Map.Entry<String, JsonNode> version = vs.next();
                int number;
                try {
                    number = Integer.parseInt(version.getKey());
                } catch (NumberFormatException e) {
                    throw new ConfigException(configKey, "(not shown)", "event '" + name + "': version '" + version.getKey() + "' is not an integer");
                }
                Schema schema;
                try {
                    schema = converter.asConnectSchema(version.getValue());
                } catch (RuntimeException e) {
                    throw new ConfigException(configKey, "(not shown)", "event '" + name + "' version " + number + ": " + e.getMessage());
                }
                String where = "event '" + name + "' version " + number;
                if (schema == null || schema.type() != Schema.Type.STRUCT) {
                    throw new ConfigException(configKey, "(not shown)", where + ": schema must be a struct");
                }
                requireField(configKey, where, schema, routeField, Schema.Type.STRING);
                requireField(configKey, where, schema, versionField, Schema.Type.INT32);
                versions.put(number, schema);
            }
            events.put(name, versions);
        }
        converter.close();
        return new RegistryContract(events);
    }

    private static void requireField(String key, String where, Schema schema, String field, Schema.Type type) {
        Field f = schema.field(field);
        if (f == null || f.schema().type() != type || f.schema().isOptional()) {
            throw new ConfigException(key, "(not shown)", where + ": must declare a required " + type.getName() + " field '" + field + "'");
        }
    }

    /** Known events (routes), sorted. */
    List<String> events() {
        return new ArrayList<>(events.keySet());
    }

    boolean knows(String event) {
        return events.containsKey(event);
    }

    /** Registered versions of a known event, ascending. */
    SortedMap<Integer, Schema> versions(String event) {
        return Collections.unmodifiableSortedMap(events.get(event));
    }

    /** {@code null} when {@code record} is compatible with {@code version} of {@code event}, else why not. */
    String incompatibility(String event, int version, Schema record) {
        SortedMap<Integer, Schema> versions = events.get(event);
        Schema registered = versions.get(version);
        List<String> problems = new ArrayList<>();
        if (record.type() != Schema.Type.STRUCT) {
            return "the envelope schema is " + SchemaTypes.describe(record) + ", registered struct";
        }
        for (Field want : registered.fields()) {
            Field have = record.field(want.name());
            if (have == null) {
                if (!want.schema().isOptional()) {
                    problems.add("required field '" + want.name() + "' (" + SchemaTypes.describe(want.schema()) + ") is not declared");
                }
                continue;
            }
            if (!SchemaTypes.signature(have.schema()).equals(SchemaTypes.signature(want.schema()))) {
                problems.add("field '" + want.name() + "' is declared " + SchemaTypes.describe(have.schema())
                        + ", registered " + SchemaTypes.describe(want.schema()));
            } else if (!want.schema().isOptional() && have.schema().isOptional()) {
                problems.add("field '" + want.name() + "' is declared optional, registered required");
            }
        }
        for (Field have : record.fields()) {
            if (registered.field(have.name()) != null) {
                continue;
            }
            if (!have.schema().isOptional()) {
                problems.add("field '" + JsonValues.escape(have.name()) + "' is not in version " + version
                        + " and is required; only optional fields may be added");
                continue;
            }
            for (Map.Entry<Integer, Schema> other : versions.entrySet()) {
                Field known = other.getValue().field(have.name());
                if (known != null && !SchemaTypes.signature(known.schema()).equals(SchemaTypes.signature(have.schema()))) {
                    problems.add("field '" + have.name() + "' is declared " + SchemaTypes.describe(have.schema())
                            + ", registered version " + other.getKey() + " has " + SchemaTypes.describe(known.schema()));
                    break;
                }
            }
        }
        return problems.isEmpty() ? null : String.join("; ", problems);
    }
}
