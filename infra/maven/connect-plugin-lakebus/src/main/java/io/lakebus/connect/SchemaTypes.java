package io.lakebus.connect;

import java.util.StringJoiner;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;

/** Readable names and comparable signatures of Connect schemas, for messages and the registry check. */
final class SchemaTypes {
    private SchemaTypes() {
    }

    /** {@code int32}, {@code double}, {@code array<string>}, {@code map<string,float64>}, {@code struct}, {@code Timestamp(int64)}. */
    static String describe(Schema schema) {
        String base;
        switch (schema.type()) {
            case ARRAY:
                base = "array<" + describe(schema.valueSchema()) + ">";
                break;
            case MAP:
                base = "map<" + describe(schema.keySchema()) + "," + describe(schema.valueSchema()) + ">";
                break;
            case FLOAT32:
                base = "float"; // the envelope's (JsonConverter's) names for float32/float64
                break;
            case FLOAT64:
                base = "double";
                break;
            default:
                base = schema.type().getName();
        }
        String logical = schema.name();
        if (logical != null && logical.startsWith("org.apache.kafka.connect.data.")) {
            String shortName = logical.substring("org.apache.kafka.connect.data.".length());
            if (Decimal.LOGICAL_NAME.equals(logical) && schema.parameters() != null) {
                String precision = schema.parameters().get(StrictPayloadValidator.DECIMAL_PRECISION);
                shortName += "(scale=" + schema.parameters().get(Decimal.SCALE_FIELD)
                        + (precision == null ? "" : ",precision=" + precision) + ")";
            }
            return shortName + " " + base;
        }
        return base;
    }

    /**
     * Type identity as the sink's table sees it: type, logical name, element/key/value types and
     * struct fields (name, type, optional), recursively. Struct names, docs, versions and defaults
     * are not part of it: they do not change a column.
     */
    static String signature(Schema schema) {
        StringBuilder out = new StringBuilder();
        appendSignature(schema, out);
        return out.toString();
    }

    private static void appendSignature(Schema schema, StringBuilder out) {
        out.append(describe(schema));
        if (schema.type() == Schema.Type.ARRAY) {
            out.append(schema.valueSchema().isOptional() ? "?" : "").append('[');
            appendSignature(schema.valueSchema(), out);
            out.append(']');
        } else if (schema.type() == Schema.Type.MAP) {
            out.append('[');
            appendSignature(schema.keySchema(), out);
            out.append(schema.valueSchema().isOptional() ? ",?" : ",");
            appendSignature(schema.valueSchema(), out);
            out.append(']');
        } else if (schema.type() == Schema.Type.STRUCT) {
            StringJoiner fields = new StringJoiner(",", "{", "}");
            for (Field field : schema.fields()) {
                StringBuilder f = new StringBuilder(field.name()).append(field.schema().isOptional() ? "?:" : ":");
                appendSignature(field.schema(), f);
                fields.add(f);
            }
            out.append(fields);
        }
    }
}
