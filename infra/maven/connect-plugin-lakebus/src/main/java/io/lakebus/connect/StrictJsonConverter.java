package io.lakebus.connect;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.connect.components.Versioned;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.storage.Converter;

/**
 * Kafka's {@link JsonConverter} with {@code schemas.enable=true}, minus its leniency.
 *
 * <p>{@code JsonConverter} reads each payload value with Jackson's coercing accessors: the string
 * {@code "abc"} in an {@code int32} field becomes {@code 0}, {@code 3000000000} wraps to a
 * negative {@code int}, {@code 1.5} in an {@code int64} field is truncated to {@code 1}, and an
 * undeclared payload field is dropped. None of that raises, so the record lands changed and nobody
 * knows. This converter first checks the whole envelope against the schema the record declares
 * ({@link StrictPayloadValidator}) and throws a {@link DataException} naming the field, the
 * declared type and the JSON value; only a record that matches exactly is handed to the wrapped
 * {@code JsonConverter}, so accepted records convert exactly as before (same schemas, same
 * logical types, same schema cache). Nothing is coerced.
 *
 * <p>Once an envelope has passed, its schema part is remembered ({@link KnownEnvelopes}): a later
 * record with the same bytes up to its payload has only the payload parsed and checked, and is
 * built from that tree ({@link PayloadConverter}) instead of being parsed again by
 * {@code JsonConverter}. A record the fast path cannot take (another key order, a payload that does
 * not parse) goes the full way, so every error reads the same on both.
 *
 * <p>Why a converter and not an SMT: after conversion the JSON is gone — an SMT sees the already
 * coerced {@code 0}. Why wrap: a record the fast path below does not cover (a first record of a
 * schema, another key order, bytes, arrays, maps) is converted by Kafka's own code, after the check.
 * Errors thrown here are converter-stage errors: with {@code errors.tolerance=all}
 * Connect routes the original record bytes to the DLQ with {@code __connect.errors.*} headers.
 *
 * <p>A {@code null} value (a tombstone) passes through as {@link SchemaAndValue#NULL}, as in
 * {@code JsonConverter}. Only value conversion is supported: keys are plain strings on the bus.
 */
public class StrictJsonConverter implements Converter, Versioned, AutoCloseable {

    private static final String SCHEMA = "schema";
    private static final String PAYLOAD = "payload";

    /** Jackson as {@code JsonConverter} reads it (exact decimals), plus duplicate keys and trailing garbage refused. */
    private final ObjectMapper mapper = new ObjectMapper()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true));

    private final JsonConverter delegate = new JsonConverter();
    private final KnownEnvelopes known = new KnownEnvelopes();
    /** records built on the fast path (tests read it) */
    private long fromKnownSchema;

    @Override
    public String version() {
        return PluginVersion.get();
    }

    @Override
    public ConfigDef config() {
        return JsonConverterConfig.configDef();
    }

    @Override
    public void configure(Map<String, ?> configs, boolean isKey) {
        Object schemasEnable = configs.get(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG);
        if (schemasEnable != null && !"true".equalsIgnoreCase(schemasEnable.toString().trim())) {
            throw new ConfigException(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, schemasEnable,
                    "StrictJsonConverter checks every value against its declared schema; schemas.enable must be true");
        }
        Map<String, Object> withSchemas = new HashMap<>(configs);
        withSchemas.put(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "true");
        delegate.configure(withSchemas, isKey);
    }

    @Override
    public byte[] fromConnectData(String topic, Schema schema, Object value) {
        return delegate.fromConnectData(topic, schema, value);
    }

    @Override
    public SchemaAndValue toConnectData(String topic, Headers headers, byte[] value) {
        return toConnectData(topic, value);
    }

    @Override
    public SchemaAndValue toConnectData(String topic, byte[] value) {
        if (value == null) {
            return SchemaAndValue.NULL;
        }
        SchemaAndValue fast = fromKnownSchema(value);
        if (fast != null) {
            fromKnownSchema++;
            return fast;
        }
        check(readEnvelope(value));
        SchemaAndValue converted = delegate.toConnectData(topic, value);
        known.learn(value, converted.schema(), mapper.getFactory());
        return converted;
    }

    private static boolean isJsonWhitespace(byte b) {
        return b == ' ' || b == '\n' || b == '\r' || b == '\t';
    }

    long recordsFromKnownSchema() {
        return fromKnownSchema;
    }

    /**
     * The record, if it starts with a schema part already checked: its payload parsed alone, checked
     * against that schema (a bad value throws here with the full path's message) and built from the
     * tree; null when it must take the full path.
     */
    private SchemaAndValue fromKnownSchema(byte[] value) {
        int index = known.match(value);
        if (index < 0) {
            return null;
        }
        int start = known.length(index);
        int end = value.length;
        while (end > start && isJsonWhitespace(value[end - 1])) {
            end--;
        }
        if (end - start < 2 || value[end - 1] != '}') {
            return null;
        }
        JsonNode payload;
        try {
            payload = mapper.readTree(value, start, end - 1 - start);
        } catch (IOException e) {
            return null;  // the full path names the problem (or finds the payload was not the last key)
        }
        if (payload == null || !payload.isObject()) {
            return null;
        }
        Schema schema = known.schema(index);
        StrictPayloadValidator.validate(schema, payload);
        Struct struct = PayloadConverter.struct(schema, payload);
        return struct == null ? null : new SchemaAndValue(schema, struct);
    }

    /** Parse the record value; a parse error becomes a {@link DataException} with Jackson's reason. */
    private JsonNode readEnvelope(byte[] value) {
        try {
            return mapper.readTree(value);
        } catch (JsonProcessingException e) {
            throw new DataException("envelope: not valid JSON (" + e.getOriginalMessage() + ")", e);
        } catch (IOException e) {
            throw new DataException("envelope: not readable as JSON (" + e.getMessage() + ")", e);
        }
    }

    /** The envelope's shape, then the payload against the declared schema. */
    private void check(JsonNode envelope) {
        if (envelope == null || envelope.isMissingNode()) {
            throw new DataException("envelope: empty value; expected a JSON object with \"schema\" and \"payload\"");
        }
        if (!envelope.isObject()) {
            throw new DataException("envelope: expected a JSON object with \"schema\" and \"payload\", got "
                    + JsonValues.describe(envelope));
        }
        List<String> problems = new ArrayList<>();
        if (!envelope.has(SCHEMA)) {
            problems.add("\"schema\" is missing");
        }
        if (!envelope.has(PAYLOAD)) {
            problems.add("\"payload\" is missing");
        }
        for (Iterator<String> names = envelope.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!SCHEMA.equals(name) && !PAYLOAD.equals(name)) {
                problems.add("unexpected top-level key " + JsonValues.quote(name));
            }
        }
        if (!problems.isEmpty()) {
            throw new DataException("envelope: expected exactly \"schema\" and \"payload\": " + String.join(", ", problems));
        }
        JsonNode schemaNode = envelope.get(SCHEMA);
        if (!schemaNode.isObject()) {
            throw new DataException("envelope: \"schema\" must be a Connect schema object, got "
                    + JsonValues.describe(schemaNode));
        }
        Schema schema;
        try {
            schema = delegate.asConnectSchema(schemaNode);
        } catch (RuntimeException e) {
            // DataException for unknown type names, missing "type", bad "fields"; anything else
            // (a malformed parameter map, say) gets the same readable prefix
            throw new DataException("envelope schema: " + e.getMessage(), e);
        }
        StrictPayloadValidator.validate(schema, envelope.get(PAYLOAD));
    }

    /** Connect closes converters that are {@link AutoCloseable}; the delegate releases its schema caches. */
    @Override
    public void close() {
        delegate.close();
    }
}
