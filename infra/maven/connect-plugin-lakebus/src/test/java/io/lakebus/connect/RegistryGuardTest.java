package io.lakebus.connect;

import static io.lakebus.connect.Envelopes.BET_PAYLOAD;
import static io.lakebus.connect.Envelopes.BET_V1_SCHEMA;
import static io.lakebus.connect.Envelopes.BET_V2_SCHEMA;
import static io.lakebus.connect.Envelopes.REGISTRY;
import static io.lakebus.connect.Envelopes.bet;
import static io.lakebus.connect.Envelopes.betWith;
import static io.lakebus.connect.Envelopes.bytes;
import static io.lakebus.connect.Envelopes.envelope;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RegistryGuardTest {
    private final StrictJsonConverter converter = new StrictJsonConverter();
    private RegistryGuard<SinkRecord> guard;

    @BeforeEach
    void setUp() {
        converter.configure(Map.of("schemas.enable", "true"), false);
        guard = new RegistryGuard<>();
        guard.configure(Map.of("registry", REGISTRY));
    }

    private SinkRecord record(String json) {
        SchemaAndValue sv = converter.toConnectData("events", bytes(json));
        return new SinkRecord("events", 0, Schema.STRING_SCHEMA, "k", sv.schema(), sv.value(), 42L);
    }

    private String rejected(String json) {
        SinkRecord r = record(json);
        return assertThrows(DataException.class, () -> guard.apply(r), json).getMessage();
    }

    @Test
    void registeredEventsPassUnchanged() {
        SinkRecord bet = record(bet(BET_PAYLOAD));
        assertSame(bet, guard.apply(bet));
        assertSame(bet, guard.apply(bet), "cached verdict");
        String recharge = envelope(Envelopes.RECHARGE_V1_SCHEMA, "{\"category\":\"biz\",\"event\":\"recharge\",\"log_date\":\"2025-11-27\","
                + "\"hour\":\"10\",\"plat_id\":1,\"app_id\":2,\"ts\":1,\"schema_version\":1,\"status\":\"success\",\"amount\":2.0}");
        SinkRecord r = record(recharge);
        assertSame(r, guard.apply(r));
    }

    @Test
    void tombstonePasses() {
        SinkRecord tombstone = new SinkRecord("events", 0, Schema.STRING_SCHEMA, "k", null, null, 1L);
        assertSame(tombstone, guard.apply(tombstone));
    }

    // -- route guard ----------------------------------------------------------------------------------
    @Test
    void unknownRouteNamesValueAndKnownRoutes() {
        assertEquals("route field 'event' value \"withdraw\" matches no route; known routes: bet, recharge",
                rejected(betWith("event", "\"withdraw\"")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"bet|recharge", ".*", "^bet$", "Bet", "bet ", " bet", "bet\\n", "bét", "bet\\u0000", "", "\\u202ebet"})
    void routeValuesAreMatchedExactlyNeverAsPatterns(String route) {
        String msg = rejected(betWith("event", "\"" + route + "\""));
        assertTrue(msg.startsWith("route field 'event' value \"") && msg.endsWith("matches no route; known routes: bet, recharge"), msg);
        assertTrue(!msg.contains("\n") && !msg.contains("\u0000"), msg);
    }

    @Test
    void nullOrMissingRouteIsRejected() {
        String optionalEvent = BET_V1_SCHEMA.replace("{\"field\":\"event\",\"type\":\"string\"}", "{\"field\":\"event\",\"type\":\"string\",\"optional\":true}");
        assertEquals("route field 'event' is null; known routes: bet, recharge",
                rejected(envelope(optionalEvent, BET_PAYLOAD.replace("\"event\":\"bet\"", "\"event\":null"))));
        String noEvent = "{\"type\":\"struct\",\"fields\":[{\"field\":\"category\",\"type\":\"string\"}]}";
        assertEquals("route field 'event' is missing; known routes: bet, recharge", rejected(envelope(noEvent, "{\"category\":\"biz\"}")));
    }

    @Test
    void nonStringRouteAndNonStructValueAreRejected() {
        String intEvent = BET_V1_SCHEMA.replace("{\"field\":\"event\",\"type\":\"string\"}", "{\"field\":\"event\",\"type\":\"int32\"}");
        assertEquals("route field 'event' is int32 7, expected a string; known routes: bet, recharge",
                rejected(envelope(intEvent, BET_PAYLOAD.replace("\"event\":\"bet\"", "\"event\":7"))));
        assertTrue(rejected(envelope("{\"type\":\"string\"}", "\"bet\"")).startsWith("record value is string, expected an event struct"));
    }

    // -- registry contract ------------------------------------------------------------------------------
    @Test
    void unknownVersionIsRejected() {
        assertEquals("event 'bet': schema_version 7 (int32) is not a registered version; registered versions: [1, 2]",
                rejected(betWith("schema_version", "7")));
    }

    @Test
    void typeChangeIsRejected() {
        String amountString = BET_V1_SCHEMA.replace("{\"field\":\"amount\",\"type\":\"double\"", "{\"field\":\"amount\",\"type\":\"string\"");
        assertEquals("event 'bet' schema_version 1: envelope schema is incompatible with the registry: field 'amount' is declared string, registered double",
                rejected(envelope(amountString, BET_PAYLOAD.replace("\"amount\":1.5", "\"amount\":\"1.5\""))));
        String platString = BET_V1_SCHEMA.replace("{\"field\":\"plat_id\",\"type\":\"int32\"}", "{\"field\":\"plat_id\",\"type\":\"string\"}");
        assertTrue(rejected(envelope(platString, BET_PAYLOAD.replace("\"plat_id\":1", "\"plat_id\":\"not-a-number\"")))
                .endsWith("field 'plat_id' is declared string, registered int32"));
        String wider = BET_V1_SCHEMA.replace("{\"field\":\"plat_id\",\"type\":\"int32\"}", "{\"field\":\"plat_id\",\"type\":\"int64\"}");
        assertTrue(rejected(envelope(wider, BET_PAYLOAD)).endsWith("field 'plat_id' is declared int64, registered int32"));
    }

    @Test
    void aDecimalOfAnotherPrecisionOrScaleIsATypeChange() {
        String pay = "{\"type\":\"struct\",\"name\":\"pay_record\",\"fields\":[{\"field\":\"event\",\"type\":\"string\"},"
                + "{\"field\":\"schema_version\",\"type\":\"int32\"},{\"field\":\"amount\",\"type\":\"bytes\","
                + "\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,"
                + "\"parameters\":{\"scale\":\"2\",\"connect.decimal.precision\":\"18\"}}]}";
        guard.configure(Map.of("registry", "{\"pay\":{\"1\":" + pay + "}}"));
        String payload = "{\"event\":\"pay\",\"schema_version\":1,\"amount\":12.30}";
        SinkRecord same = record(envelope(pay, payload));
        assertSame(same, guard.apply(same));
        assertTrue(rejected(envelope(pay.replace("\"18\"", "\"38\""), payload))
                .endsWith("field 'amount' is declared Decimal(scale=2,precision=38) bytes, registered Decimal(scale=2,precision=18) bytes"));
        assertTrue(rejected(envelope(pay.replace("\"scale\":\"2\"", "\"scale\":\"3\""), payload))
                .endsWith("field 'amount' is declared Decimal(scale=3,precision=18) bytes, registered Decimal(scale=2,precision=18) bytes"));
    }

    @Test
    void droppedRequiredFieldIsRejectedDroppedOptionalFieldPasses() {
        String noTs = BET_V1_SCHEMA.replace("{\"field\":\"ts\",\"type\":\"int64\"},", "");
        assertTrue(rejected(envelope(noTs, BET_PAYLOAD.replace("\"ts\":1764237600000,", "")))
                .endsWith("required field 'ts' (int64) is not declared"));
        String noGame = BET_V1_SCHEMA.replace(",{\"field\":\"game_id\",\"type\":\"int32\",\"optional\":true}", "");
        SinkRecord r = record(envelope(noGame, BET_PAYLOAD.replace(",\"game_id\":1", "")));
        assertSame(r, guard.apply(r));
    }

    @Test
    void requiredMadeOptionalIsRejected() {
        String optionalTs = BET_V1_SCHEMA.replace("{\"field\":\"ts\",\"type\":\"int64\"}", "{\"field\":\"ts\",\"type\":\"int64\",\"optional\":true}");
        assertTrue(rejected(envelope(optionalTs, BET_PAYLOAD)).endsWith("field 'ts' is declared optional, registered required"));
    }

    @Test
    void newOptionalFieldPassesNewRequiredFieldIsRejected() {
        String v1PlusOptional = BET_V1_SCHEMA.replace("]}", ",{\"field\":\"vip\",\"type\":\"boolean\",\"optional\":true}]}");
        SinkRecord r = record(envelope(v1PlusOptional, BET_PAYLOAD.replace("}", ",\"vip\":true}")));
        assertSame(r, guard.apply(r));
        String v1PlusRequired = BET_V1_SCHEMA.replace("]}", ",{\"field\":\"vip\",\"type\":\"boolean\"}]}");
        assertTrue(rejected(envelope(v1PlusRequired, BET_PAYLOAD.replace("}", ",\"vip\":true}")))
                .endsWith("field 'vip' is not in version 1 and is required; only optional fields may be added"));
    }

    @Test
    void registeredVersion2PassesAndItsFieldTypesBindVersion1Extras() {
        SinkRecord v2 = record(envelope(BET_V2_SCHEMA, BET_PAYLOAD.replace("\"schema_version\":1", "\"schema_version\":2").replace("}", ",\"channel\":\"web\"}")));
        assertSame(v2, guard.apply(v2));
        // a version-1 record adding 'channel' with another type than version 2 registers
        String clash = BET_V1_SCHEMA.replace("]}", ",{\"field\":\"channel\",\"type\":\"int32\",\"optional\":true}]}");
        assertTrue(rejected(envelope(clash, BET_PAYLOAD.replace("}", ",\"channel\":3}")))
                .endsWith("field 'channel' is declared int32, registered version 2 has string"));
    }

    // -- config -----------------------------------------------------------------------------------------
    @Test
    void badRegistryConfigIsAConfigError() {
        for (String bad : new String[] {"", "not json", "{}", "[]", "{\"bet\":{}}", "{\"bet\":{\"one\":" + BET_V1_SCHEMA + "}}",
                "{\"bet\":{\"1\":{\"type\":\"string\"}}}", "{\"bet\":{\"1\":{\"type\":\"struct\",\"fields\":[]}}}",
                "{\"bet\":{\"1\":{\"type\":\"int33\"}}}"}) {
            RegistryGuard<SinkRecord> g = new RegistryGuard<>();
            assertThrows(ConfigException.class, () -> g.configure(Map.of("registry", bad)), bad);
        }
        assertThrows(ConfigException.class, () -> new RegistryGuard<SinkRecord>().configure(Map.of()));
    }

    @Test
    void routeAndVersionFieldsAreConfigurable() {
        RegistryGuard<SinkRecord> g = new RegistryGuard<>();
        String schema = "{\"type\":\"struct\",\"fields\":[{\"field\":\"kind\",\"type\":\"string\"},{\"field\":\"v\",\"type\":\"int32\"}]}";
        g.configure(Map.of("registry", "{\"x\":{\"1\":" + schema + "}}", "route.field", "kind", "version.field", "v"));
        SinkRecord ok = record(envelope(schema, "{\"kind\":\"x\",\"v\":1}"));
        assertSame(ok, g.apply(ok));
        SinkRecord bad = record(envelope(schema, "{\"kind\":\"y\",\"v\":1}"));
        assertEquals("route field 'kind' value \"y\" matches no route; known routes: x",
                assertThrows(DataException.class, () -> g.apply(bad)).getMessage());
    }
}
