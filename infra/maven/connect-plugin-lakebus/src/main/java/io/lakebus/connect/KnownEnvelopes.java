package io.lakebus.connect;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.kafka.connect.data.Schema;

/**
 * The schema part of envelopes already checked: the bytes {@code {"schema":<schema>,"payload":}
 * up to the payload, and the Connect schema they declare.
 *
 * <p>The SDK writes that part byte for byte the same for every record of an event version (it is
 * ~80 % of an envelope). A record that starts with a known part needs only its payload parsed: the
 * schema it declares is the one already read and checked. Envelopes in another key order, with
 * other top-level keys or a payload that is not an object are never learned and always take the
 * full path. At most {@link #MAX} parts are kept (event versions on one bus); beyond that, new ones
 * take the full path too.
 */
final class KnownEnvelopes {

    static final int MAX = 64;

    private final List<byte[]> prefixes = new ArrayList<>();
    private final List<Schema> schemas = new ArrayList<>();

    /** The index of the known part {@code value} starts with (and goes beyond), or -1. */
    int match(byte[] value) {
        for (int i = 0; i < prefixes.size(); i++) {
            byte[] prefix = prefixes.get(i);
            if (value.length > prefix.length
                    && Arrays.mismatch(value, 0, prefix.length, prefix, 0, prefix.length) < 0) {
                return i;
            }
        }
        return -1;
    }

    int length(int index) {
        return prefixes.get(index).length;
    }

    Schema schema(int index) {
        return schemas.get(index);
    }

    /**
     * Remember the schema part of {@code value}, an envelope that passed the full check and declares
     * {@code schema}, if it reads {@code {"schema":{...},"payload":{} in that order.
     */
    void learn(byte[] value, Schema schema, JsonFactory json) {
        if (prefixes.size() >= MAX || !PayloadConverter.covers(schema)) {
            return;
        }
        try (JsonParser parser = json.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT || parser.nextToken() != JsonToken.FIELD_NAME
                    || !"schema".equals(parser.currentName()) || parser.nextToken() != JsonToken.START_OBJECT) {
                return;
            }
            parser.skipChildren();
            if (parser.nextToken() != JsonToken.FIELD_NAME || !"payload".equals(parser.currentName())
                    || parser.nextToken() != JsonToken.START_OBJECT) {
                return;
            }
            long start = parser.currentTokenLocation().getByteOffset();
            if (start <= 0 || start >= value.length) {
                return;
            }
            byte[] prefix = Arrays.copyOf(value, (int) start);
            if (match(prefix) < 0) {
                prefixes.add(prefix);
                schemas.add(schema);
            }
        } catch (IOException e) {
            // not learned: the record already passed the full check, it only keeps the full path
        }
    }
}
