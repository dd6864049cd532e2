package io.lakebus.connect;

import static io.lakebus.connect.Envelopes.BET_PAYLOAD;
import static io.lakebus.connect.Envelopes.BET_V1_SCHEMA;
import static io.lakebus.connect.Envelopes.bet;
import static io.lakebus.connect.Envelopes.betWith;
import static io.lakebus.connect.Envelopes.betWithout;
import static io.lakebus.connect.Envelopes.bytes;
import static io.lakebus.connect.Envelopes.envelope;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The fast path (a record whose schema part was checked before: its payload parsed alone and built
 * from the tree) converts and refuses exactly as the full path and as Kafka's {@code JsonConverter}.
 * Each case runs on a cold converter (full path) and on a warm one that has converted a good record
 * of the same schema first; the warm one must have taken the fast path where it can.
 */
class KnownEnvelopesTest {

    static final String MONEY_SCHEMA = "{\"type\":\"struct\",\"name\":\"money\",\"fields\":["
            + "{\"field\":\"amount\",\"type\":\"bytes\",\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,"
            + "\"parameters\":{\"scale\":\"2\",\"connect.decimal.precision\":\"18\"},\"optional\":true},"
            + "{\"field\":\"at\",\"type\":\"int64\",\"name\":\"org.apache.kafka.connect.data.Timestamp\",\"version\":1,\"optional\":true},"
            + "{\"field\":\"day\",\"type\":\"int32\",\"name\":\"org.apache.kafka.connect.data.Date\",\"version\":1,\"optional\":true},"
            + "{\"field\":\"clock\",\"type\":\"int32\",\"name\":\"org.apache.kafka.connect.data.Time\",\"version\":1,\"optional\":true},"
            + "{\"field\":\"small\",\"type\":\"int8\",\"optional\":true},{\"field\":\"mid\",\"type\":\"int16\",\"optional\":true},"
            + "{\"field\":\"f\",\"type\":\"float\",\"optional\":true},{\"field\":\"ok\",\"type\":\"boolean\",\"optional\":true},"
            + "{\"field\":\"n\",\"type\":\"int32\",\"optional\":true,\"default\":7},"
            + "{\"field\":\"inner\",\"type\":\"struct\",\"optional\":true,\"fields\":[{\"field\":\"x\",\"type\":\"int64\"}]}]}";

    /** one good record per schema: what warms a converter */
    static final Map<String, String> SEED = Map.of(
            BET_V1_SCHEMA, bet(BET_PAYLOAD),
            MONEY_SCHEMA, envelope(MONEY_SCHEMA, "{\"amount\":1.00}"));

    static Stream<String> good() {
        return Stream.of(
                bet(BET_PAYLOAD),
                betWithout("user_id"),
                betWith("amount", "null"),
                betWith("amount", "1"),
                betWith("amount", "-0.0"),
                betWith("plat_id", "2147483647"),
                betWith("ts", "-9223372036854775808"),
                betWith("order_id", "\"\\u00e9\\n\\\"quoted\\\" \u4e2d\""),
                bet(BET_PAYLOAD) + " \n",
                envelope(MONEY_SCHEMA, "{\"amount\":12.30,\"at\":1764237600000,\"day\":20419,\"clock\":3600000}"),
                envelope(MONEY_SCHEMA, "{\"amount\":12.3}"),
                envelope(MONEY_SCHEMA, "{\"amount\":1.5E+3,\"small\":-128,\"mid\":32767,\"f\":1.5,\"ok\":true}"),
                envelope(MONEY_SCHEMA, "{\"amount\":9999999999999999.99,\"n\":null}"),
                envelope(MONEY_SCHEMA, "{\"amount\":\"BNI=\"}"),
                envelope(MONEY_SCHEMA, "{\"inner\":{\"x\":5},\"n\":3}"),
                envelope(MONEY_SCHEMA, "{ \"amount\" : 2.00 }"));
    }

    static Stream<String> bad() {
        return Stream.of(
                betWith("plat_id", "\"abc\""),
                betWith("plat_id", "3000000000"),
                betWith("ts", "1.5"),
                betWithout("plat_id"),
                bet(BET_PAYLOAD.replace("\"game_id\":1}", "\"game_id\":1,\"extra\":2}")),
                bet(BET_PAYLOAD.replace("\"game_id\":1}", "\"game_id\":1,\"game_id\":2}")),
                bet(BET_PAYLOAD).replaceFirst("}$", ",\"more\":1}"),
                bet(BET_PAYLOAD).replaceFirst("}$", ",\"payload\":{}}"),
                bet(BET_PAYLOAD).replaceFirst("}$", "} trailing"),
                bet(BET_PAYLOAD).substring(0, bet(BET_PAYLOAD).length() - 2),
                envelope(BET_V1_SCHEMA, "5"),
                envelope(BET_V1_SCHEMA, "null"),
                bet(BET_PAYLOAD) + "\f",
                envelope(MONEY_SCHEMA, "{\"amount\":12.345}"),
                envelope(MONEY_SCHEMA, "{\"amount\":10000000000000000.00}"),
                envelope(MONEY_SCHEMA, "{\"inner\":{\"x\":\"5\"}}"));
    }

    private static StrictJsonConverter converter() {
        StrictJsonConverter strict = new StrictJsonConverter();
        strict.configure(Map.of("schemas.enable", "true"), false);
        return strict;
    }

    private static StrictJsonConverter warm(String record) {
        StrictJsonConverter strict = converter();
        String schema = SEED.keySet().stream().filter(record::contains).findFirst().orElseThrow();
        strict.toConnectData("events", bytes(SEED.get(schema)));
        assertEquals(0, strict.recordsFromKnownSchema(), "the seed record takes the full path");
        return strict;
    }

    @ParameterizedTest
    @MethodSource("good")
    void aKnownSchemaConvertsAsTheFullPathAndJsonConverter(String record) {
        JsonConverter kafka = new JsonConverter();
        kafka.configure(Map.of("schemas.enable", "true"), false);
        SchemaAndValue expected = kafka.toConnectData("events", bytes(record));
        SchemaAndValue cold = converter().toConnectData("events", bytes(record));
        StrictJsonConverter warm = warm(record);
        SchemaAndValue fast = warm.toConnectData("events", bytes(record));
        assertEquals(expected, cold);
        assertEquals(expected, fast);
        boolean base64Decimal = record.contains("\"BNI=\"");  // JsonConverter decodes it: the full path
        assertEquals(base64Decimal ? 0 : 1, warm.recordsFromKnownSchema(), record);
    }

    @ParameterizedTest
    @MethodSource("bad")
    void aKnownSchemaRefusesWithTheFullPathsMessage(String record) {
        String cold = assertThrows(DataException.class, () -> converter().toConnectData("events", bytes(record))).getMessage();
        StrictJsonConverter warm = warm(record);
        String fast = assertThrows(DataException.class, () -> warm.toConnectData("events", bytes(record))).getMessage();
        assertEquals(cold, fast, record);
        // and the converter still converts a good record afterwards, on the fast path
        warm.toConnectData("events", bytes(SEED.get(SEED.keySet().stream().filter(record::contains).findFirst().orElseThrow())));
        assertEquals(1, warm.recordsFromKnownSchema());
    }

    @Test
    void onlyTheSchemaThenPayloadOrderIsLearnedAndAtMostMaxSchemas() {
        StrictJsonConverter strict = converter();
        String payloadFirst = "{\"payload\":" + BET_PAYLOAD + ",\"schema\":" + BET_V1_SCHEMA + "}";
        for (int i = 0; i < 3; i++) {
            strict.toConnectData("events", bytes(payloadFirst));
        }
        assertEquals(0, strict.recordsFromKnownSchema());
        for (int i = 0; i < KnownEnvelopes.MAX + 2; i++) {  // schemas that differ by a field name
            String schema = "{\"type\":\"struct\",\"fields\":[{\"field\":\"f" + i + "\",\"type\":\"int32\"}]}";
            for (String record : List.of(envelope(schema, "{\"f" + i + "\":1}"), envelope(schema, "{\"f" + i + "\":2}"))) {
                strict.toConnectData("events", bytes(record));
            }
        }
        assertEquals(KnownEnvelopes.MAX, strict.recordsFromKnownSchema(), "the second record of each of the first MAX schemas");
    }
}
