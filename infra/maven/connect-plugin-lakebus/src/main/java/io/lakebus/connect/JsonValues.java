package io.lakebus.connect;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.JsonNode;

/**
 * How error messages show a JSON value: its JSON type and a short, escaped rendering.
 *
 * <p>The messages end up in DLQ headers, logs and alerts, so values are JSON-escaped (no raw
 * control characters or newlines from a hostile producer) and cut to {@link #MAX_CHARS}.
 */
final class JsonValues {
    static final int MAX_CHARS = 64;

    private JsonValues() {
    }

    /** {@code string "abc"}, {@code number 3000000000}, {@code object {"a":1}}, {@code null}. */
    static String describe(JsonNode node) {
        if (node == null || node.isMissingNode()) {
            return "no value";
        }
        if (node.isNull()) {
            return "null";
        }
        return typeName(node) + " " + truncate(node.toString());
    }

    static String typeName(JsonNode node) {
        switch (node.getNodeType()) {
            case STRING:
                return "string";
            case NUMBER:
                return "number";
            case BOOLEAN:
                return "boolean";
            case OBJECT:
                return "object";
            case ARRAY:
                return "array";
            case NULL:
                return "null";
            case BINARY:
                return "binary";
            default:
                return node.getNodeType().name().toLowerCase();
        }
    }

    /** A Java string as a JSON string literal, escaped and cut. */
    static String quote(String value) {
        return truncate("\"" + new String(JsonStringEncoder.getInstance().quoteAsString(value)) + "\"");
    }

    /** A Java string JSON-escaped (no quotes added) and cut. */
    static String escape(String value) {
        return truncate(new String(JsonStringEncoder.getInstance().quoteAsString(value)));
    }

    static String truncate(String text) {
        return text.length() <= MAX_CHARS ? text : text.substring(0, MAX_CHARS) + "...(" + text.length() + " chars)";
    }
}
