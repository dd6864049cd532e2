package io.lakebus.connect;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

/**
 * A payload that {@link StrictPayloadValidator} accepted, as a Connect value: what
 * {@code JsonConverter} makes of the same JSON, built from the tree already parsed.
 *
 * <p>Why: {@link StrictJsonConverter} parses every record to check it, and handing the bytes to
 * {@code JsonConverter} parses them a second time (most of the sink task's converter time, see
 * BENCHMARKS.md "The Iceberg sink against a plain writer"). It covers the types the SDK emits —
 * structs of booleans, integers, floats, strings, {@code Decimal} as a JSON number, {@code Timestamp},
 * {@code Date} and {@code Time}; a schema with anything else ({@code bytes}, arrays, maps) is left to
 * {@code JsonConverter} ({@link #covers}). The JUnit tests hold the two to equal values.
 *
 * <p>Values are taken as {@code JsonConverter} takes them: {@code intValue()} for int8/16/32 narrowed
 * as it narrows, {@code decimalValue()} from an exact-decimal tree, the schema default for an absent
 * or null field that has one ({@code replace.null.with.default}, Kafka's default), else null.
 */
final class PayloadConverter {

    private PayloadConverter() {
    }

    /** Whether every value of {@code schema} is built here (a struct of the SDK's types). */
    static boolean covers(Schema schema) {
        if (schema.type() != Schema.Type.STRUCT) {
            return false;
        }
        for (Field field : schema.fields()) {
            if (!coversValue(field.schema())) {
                return false;
            }
        }
        return true;
    }

    private static boolean coversValue(Schema schema) {
        if (schema.name() != null) {
            return Decimal.LOGICAL_NAME.equals(schema.name()) || Timestamp.LOGICAL_NAME.equals(schema.name())
                    || Date.LOGICAL_NAME.equals(schema.name()) || Time.LOGICAL_NAME.equals(schema.name())
                    || (schema.type() == Schema.Type.STRUCT && covers(schema));
        }
        switch (schema.type()) {
            case BOOLEAN: case INT8: case INT16: case INT32: case INT64: case FLOAT32: case FLOAT64: case STRING:
                return true;
            case STRUCT:
                return covers(schema);
            default:
                return false;
        }
    }

    /**
     * The Connect value of {@code value}, checked against {@code schema} by the validator; null when
     * a {@code Decimal} comes as base64 text (the caller then asks {@code JsonConverter}).
     */
    static Struct struct(Schema schema, JsonNode value) {
        Struct result = new Struct(schema);
        for (Field field : schema.fields()) {
            JsonNode node = value.get(field.name());
            Object converted = value(field.schema(), node);
            if (converted == NOT_HERE) {
                return null;
            }
            result.put(field, converted);
        }
        return result;
    }

    private static final Object NOT_HERE = new Object();

    private static Object value(Schema schema, JsonNode value) {
        if (value == null || value.isNull()) {
            return schema.defaultValue();  // null for an optional field without one
        }
        String logical = schema.name();
        if (logical != null) {
            switch (logical) {
                case Decimal.LOGICAL_NAME:
                    return value.isNumber() ? value.decimalValue() : NOT_HERE;
                case Timestamp.LOGICAL_NAME:
                    return Timestamp.toLogical(schema, value.longValue());
                case Date.LOGICAL_NAME:
                    return Date.toLogical(schema, value.intValue());
                case Time.LOGICAL_NAME:
                    return Time.toLogical(schema, value.intValue());
                default:
                    break;
            }
        }
        switch (schema.type()) {
            case BOOLEAN:
                return value.booleanValue();
            case INT8:
                return (byte) value.intValue();
            case INT16:
                return (short) value.intValue();
            case INT32:
                return value.intValue();
            case INT64:
                return value.longValue();
            case FLOAT32:
                return value.floatValue();
            case FLOAT64:
                return value.doubleValue();
            case STRING:
                return value.textValue();
            case STRUCT:
                Struct nested = struct(schema, value);
                return nested == null ? NOT_HERE : nested;
            default:
                return NOT_HERE;
        }
    }
}
