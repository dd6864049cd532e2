package io.lakebus.connect;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.DataException;

/**
 * Checks a Schema+JSON payload against the Connect schema its envelope declares, exactly.
 *
 * <p>The rules are the ones {@code JsonConverter} does not apply: every value has the JSON type
 * its schema type needs (no {@code "7"} for an int, no {@code 1} for a boolean, no object for a
 * string), integers fit their declared width (int8/16/32/64) and carry no fraction or exponent,
 * floats are finite in their width, {@code bytes} are valid base64, required fields are present and
 * not null, and a struct has no field its schema does not declare (the converter would drop it
 * silently). A field with a schema default may be absent or null: {@code JsonConverter} fills in
 * the default, which is declared behaviour, not coercion.
 *
 * <p>The first problem found is thrown as a {@link DataException} whose message names the field
 * path, the expected type and the JSON value's type, e.g.
 * {@code field 'plat_id': expected int32, got string "abc"}.
 */
final class StrictPayloadValidator {

    private static final BigInteger LONG_MIN = BigInteger.valueOf(Long.MIN_VALUE);
    private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);
    private static final BigDecimal FLOAT_MAX = new BigDecimal(Float.MAX_VALUE);
    /** Connect's parameter naming a Decimal's precision (JsonConverter, Debezium and the SDK write it). */
    static final String DECIMAL_PRECISION = "connect.decimal.precision";
    /** Iceberg's largest decimal precision: the sink creates every decimal column as decimal(38, scale). */
    private static final int MAX_PRECISION = 38;

    private StrictPayloadValidator() {
    }

    /** Validate the envelope's {@code payload} against its declared {@code schema}. */
    static void validate(Schema schema, JsonNode payload) {
        check(schema, payload, "");
    }

    private static String where(String path) {
        // field names come from the producer: escaped (no control characters in headers and logs)
        return path.isEmpty() ? "payload" : "field '" + JsonValues.escape(path) + "'";
    }

    private static DataException mismatch(String path, Schema schema, JsonNode value, String why) {
        String message = where(path) + ": expected " + SchemaTypes.describe(schema) + ", got " + JsonValues.describe(value);
        return new DataException(why == null ? message : message + " (" + why + ")");
    }

    private static void check(Schema schema, JsonNode value, String path) {
        if (value == null || value.isMissingNode() || value.isNull()) {
            if (schema.isOptional() || schema.defaultValue() != null) {
                return;
            }
            throw mismatch(path, schema, value, value == null || value.isMissingNode()
                    ? "required field is missing" : "field is required");
        }
        if (Decimal.LOGICAL_NAME.equals(schema.name())) {
            checkDecimal(schema, value, path);
            return;
        }
        switch (schema.type()) {
            case INT8:
                checkInteger(schema, value, path, Byte.MIN_VALUE, Byte.MAX_VALUE);
                return;
            case INT16:
                checkInteger(schema, value, path, Short.MIN_VALUE, Short.MAX_VALUE);
                return;
            case INT32:
                checkInteger(schema, value, path, Integer.MIN_VALUE, Integer.MAX_VALUE);
                return;
            case INT64:
                checkInteger(schema, value, path, Long.MIN_VALUE, Long.MAX_VALUE);
                return;
            case FLOAT32:
                checkFloat(schema, value, path, true);
                return;
            case FLOAT64:
                checkFloat(schema, value, path, false);
                return;
            case BOOLEAN:
                if (!value.isBoolean()) {
                    throw mismatch(path, schema, value, null);
                }
                return;
            case STRING:
                if (!value.isTextual()) {
                    throw mismatch(path, schema, value, null);
                }
                return;
            case BYTES:
                checkBase64(schema, value, path);
                return;
            case ARRAY:
                checkArray(schema, value, path);
                return;
            case MAP:
                checkMap(schema, value, path);
                return;
            case STRUCT:
                checkStruct(schema, value, path);
                return;
            default:
                throw mismatch(path, schema, value, "unsupported schema type");
        }
    }

    private static void checkInteger(Schema schema, JsonNode value, String path, long min, long max) {
        if (!value.isNumber()) {
            throw mismatch(path, schema, value, null);
        }
        if (!value.isIntegralNumber()) {
            // 1.5, and also 1.0 or 1e3: an integer field takes integer literals only
            throw mismatch(path, schema, value, "not an integer");
        }
        if (value.canConvertToLong()) {
            long v = value.longValue();
            if (v >= min && v <= max) {
                return;
            }
        } else {
            BigInteger big = value.bigIntegerValue();
            if (big.compareTo(LONG_MIN) >= 0 && big.compareTo(LONG_MAX) <= 0) {
                return; // unreachable in practice: canConvertToLong covers the long range
            }
        }
        throw mismatch(path, schema, value, "out of range " + min + ".." + max);
    }

    private static void checkFloat(Schema schema, JsonNode value, String path, boolean single) {
        if (!value.isNumber()) {
            // includes the strings "NaN" and "Infinity", which JsonConverter would read as 0.0
            throw mismatch(path, schema, value, null);
        }
        double d = value.doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw mismatch(path, schema, value, "not a finite " + SchemaTypes.describe(schema));
        }
        if (single && value.decimalValue().abs().compareTo(FLOAT_MAX) > 0) {
            throw mismatch(path, schema, value, "out of float range");
        }
    }

    /**
     * A Decimal: a JSON number (decimal.format=NUMERIC) or base64 bytes of the unscaled value, as
     * {@code JsonConverter} reads it, that fits the declared scale and precision. The Iceberg sink
     * writes a decimal with {@code setScale(scale, HALF_UP)}: a number with more digits after the
     * point than the scale would be rounded silently, so it is refused here. The precision is the
     * schema's {@code connect.decimal.precision} parameter, else Iceberg's largest (38).
     */
    private static void checkDecimal(Schema schema, JsonNode value, String path) {
        int scale;
        int precision;
        try {
            Map<String, String> parameters = schema.parameters();
            scale = Integer.parseInt(parameters.get(Decimal.SCALE_FIELD));
            String declared = parameters.get(DECIMAL_PRECISION);
            precision = declared == null ? MAX_PRECISION : Integer.parseInt(declared);
        } catch (RuntimeException e) {
            throw mismatch(path, schema, value, "the schema's Decimal has no valid scale/precision parameters");
        }
        BigDecimal number;
        if (value.isNumber()) {
            number = value.decimalValue();
        } else {
            checkBase64(schema, value, path);
            try {
                number = new BigDecimal(new BigInteger(value.binaryValue()), scale);
            } catch (IOException | NumberFormatException e) {
                throw mismatch(path, schema, value, "not the bytes of a decimal's unscaled value");
            }
        }
        BigDecimal exact;
        try {
            exact = number.setScale(scale, RoundingMode.UNNECESSARY);
        } catch (ArithmeticException e) {
            throw mismatch(path, schema, value, "more than " + scale + " digits after the point; the sink would round it");
        }
        if (exact.precision() - exact.scale() > precision - scale) {
            throw mismatch(path, schema, value, "does not fit precision " + precision + " with scale " + scale);
        }
    }

    private static void checkBase64(Schema schema, JsonNode value, String path) {
        if (!value.isTextual()) {
            throw mismatch(path, schema, value, null);
        }
        try {
            value.binaryValue();
        } catch (IOException | IllegalArgumentException e) {
            throw mismatch(path, schema, value, "not valid base64");
        }
    }

    private static void checkArray(Schema schema, JsonNode value, String path) {
        if (!value.isArray()) {
            throw mismatch(path, schema, value, null);
        }
        Schema element = schema.valueSchema();
        for (int i = 0; i < value.size(); i++) {
            JsonNode item = value.get(i);
            String itemPath = path + "[" + i + "]";
            if (item.isNull() && !element.isOptional()) {
                throw mismatch(itemPath, element, item, "array elements are required");
            }
            check(element, item, itemPath);
        }
    }

    private static void checkMap(Schema schema, JsonNode value, String path) {
        Schema keySchema = schema.keySchema();
        Schema valueSchema = schema.valueSchema();
        if (keySchema.type() == Schema.Type.STRING && !keySchema.isOptional()) {
            // string keys: JsonConverter writes and reads the map as a JSON object
            if (!value.isObject()) {
                throw mismatch(path, schema, value, null);
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> entry = it.next();
                String entryPath = path + "[" + JsonValues.quote(entry.getKey()) + "]";
                if (entry.getValue().isNull() && !valueSchema.isOptional()) {
                    throw mismatch(entryPath, valueSchema, entry.getValue(), "map values are required");
                }
                check(valueSchema, entry.getValue(), entryPath);
            }
            return;
        }
        // other keys: an array of [key, value] pairs
        if (!value.isArray()) {
            throw mismatch(path, schema, value, "a map with " + SchemaTypes.describe(keySchema)
                    + " keys is an array of [key, value] pairs");
        }
        for (int i = 0; i < value.size(); i++) {
            JsonNode pair = value.get(i);
            String entryPath = path + "[" + i + "]";
            if (!pair.isArray() || pair.size() != 2) {
                throw new DataException(where(entryPath) + ": expected a [key, value] pair, got " + JsonValues.describe(pair));
            }
            if (pair.get(0).isNull() && !keySchema.isOptional()) {
                throw mismatch(entryPath + ".key", keySchema, pair.get(0), "map keys are required");
            }
            check(keySchema, pair.get(0), entryPath + ".key");
            if (pair.get(1).isNull() && !valueSchema.isOptional()) {
                throw mismatch(entryPath + ".value", valueSchema, pair.get(1), "map values are required");
            }
            check(valueSchema, pair.get(1), entryPath + ".value");
        }
    }

    private static void checkStruct(Schema schema, JsonNode value, String path) {
        if (!value.isObject()) {
            throw mismatch(path, schema, value, null);
        }
        int declaredPresent = 0;
        for (Field field : schema.fields()) {
            JsonNode child = value.get(field.name());
            if (child != null) {
                declaredPresent++;
            }
            check(field.schema(), child, path.isEmpty() ? field.name() : path + "." + field.name());
        }
        if (declaredPresent != value.size()) {
            List<String> undeclared = new ArrayList<>();
            for (Iterator<String> names = value.fieldNames(); names.hasNext(); ) {
                String name = names.next();
                if (schema.field(name) == null) {
                    undeclared.add(name);
                }
            }
            String first = undeclared.get(0);
            String firstPath = path.isEmpty() ? first : path + "." + first;
            throw new DataException(where(firstPath) + ": not declared in the envelope schema, got "
                    + JsonValues.describe(value.get(first))
                    + (undeclared.size() > 1 ? " (" + undeclared.size() + " undeclared fields)" : "")
                    + "; an undeclared field would be dropped silently");
        }
    }
}
