package io.lakebus.connect;

import static io.lakebus.connect.Envelopes.BET_PAYLOAD;
import static io.lakebus.connect.Envelopes.BET_V1_SCHEMA;
import static io.lakebus.connect.Envelopes.bet;
import static io.lakebus.connect.Envelopes.betWith;
import static io.lakebus.connect.Envelopes.betWithout;
import static io.lakebus.connect.Envelopes.bytes;
import static io.lakebus.connect.Envelopes.envelope;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class StrictJsonConverterTest {
    private StrictJsonConverter strict;
    private JsonConverter plain;

    @BeforeEach
    void setUp() {
        strict = new StrictJsonConverter();
        strict.configure(Map.of("schemas.enable", "true"), false);
        plain = new JsonConverter();
        plain.configure(Map.of("schemas.enable", "true"), false);
    }

    private SchemaAndValue convert(String json) {
        return strict.toConnectData("events", bytes(json));
    }

    private String rejected(String json) {
        return assertThrows(DataException.class, () -> convert(json), json).getMessage();
    }

    @Test
    void goodRecordConvertsExactlyAsJsonConverterDoes() {
        String good = bet(BET_PAYLOAD);
        SchemaAndValue expected = plain.toConnectData("events", bytes(good));
        SchemaAndValue actual = convert(good);
        assertEquals(expected.schema(), actual.schema());
        assertEquals(expected.value(), actual.value());
        Struct struct = (Struct) actual.value();
        assertEquals(1, struct.getInt32("plat_id"));
        assertEquals(1.5, struct.getFloat64("amount"));
    }

    @Test
    void optionalFieldsMayBeNullOrAbsentAndIntegersFitDoubles() {
        convert(betWith("user_id", "null"));
        convert(betWithout("currency"));
        SchemaAndValue whole = convert(betWith("amount", "10"));
        assertEquals(10.0, ((Struct) whole.value()).getFloat64("amount"));
        convert(betWith("plat_id", "-2147483648"));
        convert(betWith("plat_id", "2147483647"));
        convert(betWith("ts", "9223372036854775807"));
    }

    @Test
    void tombstonePassesAsNull() {
        assertEquals(SchemaAndValue.NULL, strict.toConnectData("events", null));
    }

    // -- the table ------------------------------------------------------------------------
    @Test
    void stringInIntegerFieldIsRejectedNotZero() {
        assertEquals(0, ((Struct) plain.toConnectData("t", bytes(betWith("plat_id", "\"abc\""))).value()).getInt32("plat_id"),
                "precondition: JsonConverter coerces");
        assertEquals("field 'plat_id': expected int32, got string \"abc\"", rejected(betWith("plat_id", "\"abc\"")));
    }

    @Test
    void integerOutOfRangeIsRejectedNotWrapped() {
        assertEquals("field 'plat_id': expected int32, got number 3000000000 (out of range -2147483648..2147483647)",
                rejected(betWith("plat_id", "3000000000")));
        assertTrue(rejected(betWith("ts", "9223372036854775808")).startsWith("field 'ts': expected int64, got number 9223372036854775808 (out of range"));
    }

    @Test
    void fractionInIntegerFieldIsRejectedNotTruncated() {
        assertEquals("field 'ts': expected int64, got number 1.5 (not an integer)", rejected(betWith("ts", "1.5")));
        assertTrue(rejected(betWith("ts", "1.0")).contains("not an integer"));
        assertTrue(rejected(betWith("ts", "1e3")).contains("not an integer"));
    }

    @Test
    void missingOrNullRequiredFieldIsRejected() {
        assertEquals("field 'plat_id': expected int32, got no value (required field is missing)", rejected(betWithout("plat_id")));
        assertEquals("field 'event': expected string, got null (field is required)", rejected(betWith("event", "null")));
    }

    // -- more wrong types -------------------------------------------------------------------------
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "amount|\"12.5\"|field 'amount': expected double, got string \"12.5\"",
        "amount|\"NaN\"|field 'amount': expected double, got string \"NaN\"",
        "amount|\"Infinity\"|field 'amount': expected double, got string \"Infinity\"",
        "amount|1e400|field 'amount': expected double, got number 1E+400 (not a finite double)",
        "amount|true|field 'amount': expected double, got boolean true",
        "plat_id|true|field 'plat_id': expected int32, got boolean true",
        "plat_id|{\"v\":1}|field 'plat_id': expected int32, got object {\"v\":1}",
        "plat_id|[1]|field 'plat_id': expected int32, got array [1]",
        "currency|7|field 'currency': expected string, got number 7",
        "currency|{}|field 'currency': expected string, got object {}",
    })
    void wrongJsonTypesAreRejected(String field, String json, String message) {
        assertEquals(message, rejected(betWith(field, json)));
    }

    @Test
    void int8AndInt16Widths() {
        String schema = "{\"type\":\"struct\",\"fields\":[{\"field\":\"a\",\"type\":\"int8\"},{\"field\":\"b\",\"type\":\"int16\"}]}";
        convert(envelope(schema, "{\"a\":-128,\"b\":32767}"));
        assertEquals("field 'a': expected int8, got number 128 (out of range -128..127)", rejected(envelope(schema, "{\"a\":128,\"b\":1}")));
        assertEquals("field 'b': expected int16, got number -32769 (out of range -32768..32767)", rejected(envelope(schema, "{\"a\":1,\"b\":-32769}")));
    }

    @Test
    void float32RangeBooleanAndBytes() {
        String schema = "{\"type\":\"struct\",\"fields\":[{\"field\":\"f\",\"type\":\"float\"},{\"field\":\"ok\",\"type\":\"boolean\"},"
                + "{\"field\":\"raw\",\"type\":\"bytes\",\"optional\":true}]}";
        convert(envelope(schema, "{\"f\":1.5,\"ok\":false,\"raw\":\"AAEC\"}"));
        assertTrue(rejected(envelope(schema, "{\"f\":1e39,\"ok\":true}")).contains("(out of float range)"));
        assertEquals("field 'ok': expected boolean, got number 1", rejected(envelope(schema, "{\"f\":1,\"ok\":1}")));
        assertEquals("field 'raw': expected bytes, got string \"not base64!\" (not valid base64)",
                rejected(envelope(schema, "{\"f\":1,\"ok\":true,\"raw\":\"not base64!\"}")));
    }

    private static final String MONEY_SCHEMA = "{\"type\":\"struct\",\"fields\":["
            + "{\"field\":\"amount\",\"type\":\"bytes\",\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,"
            + "\"parameters\":{\"scale\":\"2\",\"connect.decimal.precision\":\"18\"}},"
            + "{\"field\":\"at\",\"type\":\"int64\",\"name\":\"org.apache.kafka.connect.data.Timestamp\",\"version\":1,\"optional\":true}]}";

    @Test
    void decimalsThatFitConvertExactly() {
        Struct money = (Struct) convert(envelope(MONEY_SCHEMA, "{\"amount\":12.30,\"at\":1764237600000}")).value();
        assertEquals(new java.math.BigDecimal("12.30"), money.get("amount"));
        assertEquals(new java.util.Date(1764237600000L), money.get("at"));
        // fewer digits than the scale, an exponent, and the base64 form (unscaled 1234 = 0x04D2) are exact too
        convert(envelope(MONEY_SCHEMA, "{\"amount\":12.3}"));
        convert(envelope(MONEY_SCHEMA, "{\"amount\":1.5E+3}"));
        convert(envelope(MONEY_SCHEMA, "{\"amount\":9999999999999999.99}"));
        Struct base64 = (Struct) convert(envelope(MONEY_SCHEMA, "{\"amount\":\"BNI=\"}")).value();
        assertEquals(new java.math.BigDecimal("12.34"), base64.get("amount"));
    }

    @Test
    void decimalsThatWouldBeRoundedOrOverflowAreRejected() {
        assertEquals("field 'amount': expected Decimal(scale=2,precision=18) bytes, got number 12.345 "
                + "(more than 2 digits after the point; the sink would round it)",
                rejected(envelope(MONEY_SCHEMA, "{\"amount\":12.345}")));
        assertTrue(rejected(envelope(MONEY_SCHEMA, "{\"amount\":10000000000000000.00}"))
                .endsWith("(does not fit precision 18 with scale 2)"));
        assertTrue(rejected(envelope(MONEY_SCHEMA, "{\"amount\":\"12.30\"}")).endsWith("(not valid base64)"));
        assertTrue(rejected(envelope(MONEY_SCHEMA, "{\"amount\":true}")).contains("got boolean true"));
        assertEquals("field 'at': expected Timestamp int64, got number 1.5 (not an integer)",
                rejected(envelope(MONEY_SCHEMA, "{\"amount\":1,\"at\":1.5}")));
    }

    @Test
    void nestedArraysMapsAndStructsNameThePath() {
        String schema = "{\"type\":\"struct\",\"fields\":["
                + "{\"field\":\"tags\",\"type\":\"array\",\"items\":{\"type\":\"int32\"}},"
                + "{\"field\":\"attrs\",\"type\":\"map\",\"keys\":{\"type\":\"string\"},\"values\":{\"type\":\"int64\"}},"
                + "{\"field\":\"byId\",\"type\":\"map\",\"keys\":{\"type\":\"int32\"},\"values\":{\"type\":\"string\"}},"
                + "{\"field\":\"inner\",\"type\":\"struct\",\"fields\":[{\"field\":\"x\",\"type\":\"int32\"}]}]}";
        convert(envelope(schema, "{\"tags\":[1,2],\"attrs\":{\"k\":1},\"byId\":[[1,\"a\"]],\"inner\":{\"x\":1}}"));
        assertEquals("field 'tags[1]': expected int32, got string \"2\"",
                rejected(envelope(schema, "{\"tags\":[1,\"2\"],\"attrs\":{},\"byId\":[],\"inner\":{\"x\":1}}")));
        assertEquals("field 'tags[0]': expected int32, got null (array elements are required)",
                rejected(envelope(schema, "{\"tags\":[null],\"attrs\":{},\"byId\":[],\"inner\":{\"x\":1}}")));
        assertEquals("field 'attrs[\\\"k\\\"]': expected int64, got number 0.5 (not an integer)",
                rejected(envelope(schema, "{\"tags\":[],\"attrs\":{\"k\":0.5},\"byId\":[],\"inner\":{\"x\":1}}")));
        assertEquals("field 'byId[0]': expected a [key, value] pair, got array [1]",
                rejected(envelope(schema, "{\"tags\":[],\"attrs\":{},\"byId\":[[1]],\"inner\":{\"x\":1}}")));
        assertEquals("field 'inner.x': expected int32, got string \"1\"",
                rejected(envelope(schema, "{\"tags\":[],\"attrs\":{},\"byId\":[],\"inner\":{\"x\":\"1\"}}")));
        assertEquals("field 'inner.y': not declared in the envelope schema, got number 2; an undeclared field would be dropped silently",
                rejected(envelope(schema, "{\"tags\":[],\"attrs\":{},\"byId\":[],\"inner\":{\"x\":1,\"y\":2}}")));
    }

    @Test
    void undeclaredPayloadFieldsAreRejectedNotDropped() {
        String extra = bet(BET_PAYLOAD.replace("\"game_id\":1}", "\"game_id\":1,\"vip\":true,\"bonus\":5}"));
        assertEquals("field 'vip': not declared in the envelope schema, got boolean true (2 undeclared fields); "
                + "an undeclared field would be dropped silently", rejected(extra));
    }

    @Test
    void schemaDefaultsAreDeclaredBehaviourNotCoercion() {
        String schema = "{\"type\":\"struct\",\"fields\":[{\"field\":\"n\",\"type\":\"int32\",\"default\":7}]}";
        assertEquals(7, ((Struct) convert(envelope(schema, "{}")).value()).getInt32("n"));
    }

    // -- envelope shape -----------------------------------------------------------------------------
    @ParameterizedTest
    @ValueSource(strings = {"{}", "[]", "[1,2]", "\"bet\"", "42", "null", "{\"payload\":{}}", "{\"schema\":{\"type\":\"struct\",\"fields\":[]}}"})
    void notAnEnvelopeIsRejected(String json) {
        assertTrue(rejected(json).startsWith("envelope: "), json);
    }

    @Test
    void envelopeMessagesNameTheProblem() {
        assertEquals("envelope: expected exactly \"schema\" and \"payload\": \"schema\" is missing, \"payload\" is missing", rejected("{}"));
        assertEquals("envelope: expected a JSON object with \"schema\" and \"payload\", got array [1,2]", rejected("[1,2]"));
        assertEquals("envelope: expected exactly \"schema\" and \"payload\": unexpected top-level key \"extra\"",
                rejected("{\"schema\":" + BET_V1_SCHEMA + ",\"payload\":" + BET_PAYLOAD + ",\"extra\":1}"));
        assertEquals("envelope: \"schema\" must be a Connect schema object, got null", rejected("{\"schema\":null,\"payload\":" + BET_PAYLOAD + "}"));
        assertTrue(rejected("{\"schema\": not json").startsWith("envelope: not valid JSON"));
        assertTrue(rejected("").startsWith("envelope: empty value"));
    }

    @Test
    void unknownSchemaTypeNameIsRejected() {
        String msg = rejected(envelope("{\"type\":\"struct\",\"fields\":[{\"field\":\"a\",\"type\":\"int33\"}]}", "{\"a\":1}"));
        assertTrue(msg.startsWith("envelope schema: ") && msg.contains("int33"), msg);
    }

    @Test
    void duplicateKeysAndTrailingGarbageAreRejected() {
        String dup = bet(BET_PAYLOAD.replace("\"event\":\"bet\",", "\"event\":\"bet\",\"event\":\"recharge\","));
        assertTrue(rejected(dup).contains("Duplicate field 'event'"), rejected(dup));
        assertTrue(rejected(bet(BET_PAYLOAD) + " {}").startsWith("envelope: not valid JSON"));
    }

    @Test
    void nullPayloadForRequiredStructIsRejected() {
        assertEquals("payload: expected struct, got null (field is required)", rejected(envelope(BET_V1_SCHEMA, "null")));
        assertEquals("payload: expected struct, got array []", rejected(envelope(BET_V1_SCHEMA, "[]")));
    }

    @Test
    void hostileValuesAreEscapedAndCut() {
        String msg = rejected(betWith("plat_id", "\"\\u0000\\n" + "x".repeat(200) + "\""));
        assertTrue(msg.startsWith("field 'plat_id': expected int32, got string \"\\u0000\\n"), msg);
        assertTrue(msg.length() < 200 && msg.contains("chars)"), msg);
        assertTrue(!msg.contains("\n") && !msg.contains("\u0000"), msg);
    }

    @Test
    void schemasEnableFalseIsAConfigError() {
        assertThrows(ConfigException.class, () -> new StrictJsonConverter().configure(Map.of("schemas.enable", "false"), false));
    }

    @Test
    void fromConnectDataRoundTrips() {
        SchemaAndValue good = convert(bet(BET_PAYLOAD));
        byte[] back = strict.fromConnectData("events", good.schema(), good.value());
        assertEquals(good.value(), convert(new String(back, java.nio.charset.StandardCharsets.UTF_8)).value());
        assertNull(strict.fromConnectData("events", null, null));
    }
}
