package io.lakebus.connect;

import java.nio.charset.StandardCharsets;

/** Test envelopes shaped like the lakebus SDK's (bet, version 1), built from JSON text. */
final class Envelopes {
    private Envelopes() {
    }

    static final String BET_V1_SCHEMA = """
            {"type":"struct","name":"bet_record","fields":[
              {"field":"category","type":"string"},{"field":"event","type":"string"},
              {"field":"log_date","type":"string"},{"field":"hour","type":"string"},
              {"field":"plat_id","type":"int32"},{"field":"app_id","type":"int32"},
              {"field":"ts","type":"int64"},{"field":"schema_version","type":"int32"},
              {"field":"user_id","type":"int32","optional":true},{"field":"order_id","type":"string","optional":true},
              {"field":"amount","type":"double","optional":true},{"field":"currency","type":"string","optional":true},
              {"field":"game_id","type":"int32","optional":true}]}""";

    static final String BET_V2_SCHEMA = BET_V1_SCHEMA.replace(
            "{\"field\":\"game_id\",\"type\":\"int32\",\"optional\":true}]}",
            "{\"field\":\"game_id\",\"type\":\"int32\",\"optional\":true},{\"field\":\"channel\",\"type\":\"string\",\"optional\":true}]}");

    static final String RECHARGE_V1_SCHEMA = """
            {"type":"struct","name":"recharge_record","fields":[
              {"field":"category","type":"string"},{"field":"event","type":"string"},
              {"field":"log_date","type":"string"},{"field":"hour","type":"string"},
              {"field":"plat_id","type":"int32"},{"field":"app_id","type":"int32"},
              {"field":"ts","type":"int64"},{"field":"schema_version","type":"int32"},
              {"field":"status","type":"string","optional":true},{"field":"amount","type":"double","optional":true}]}""";

    static final String BET_PAYLOAD = """
            {"category":"biz","event":"bet","log_date":"2025-11-27","hour":"10","plat_id":1,"app_id":2,
             "ts":1764237600000,"schema_version":1,"user_id":100,"order_id":"o1","amount":1.5,"currency":"BRL","game_id":1}""";

    /** {"bet": {"1": v1, "2": v2}, "recharge": {"1": v1}} as provisioning writes it. */
    static final String REGISTRY = "{\"bet\":{\"1\":" + BET_V1_SCHEMA + ",\"2\":" + BET_V2_SCHEMA + "},\"recharge\":{\"1\":"
            + RECHARGE_V1_SCHEMA + "}}";

    static String envelope(String schema, String payload) {
        return "{\"schema\":" + schema + ",\"payload\":" + payload + "}";
    }

    static String bet(String payload) {
        return envelope(BET_V1_SCHEMA, payload);
    }

    /** The good bet payload with one field's JSON replaced (the raw JSON text of the new value). */
    static String betWith(String field, String json) {
        String payload = BET_PAYLOAD.replaceFirst("\"" + field + "\":(\"[^\"]*\"|[^,}]+)", "\"" + field + "\":" + java.util.regex.Matcher.quoteReplacement(json));
        if (payload.equals(BET_PAYLOAD)) {
            throw new IllegalArgumentException("no field " + field);
        }
        return bet(payload);
    }

    /** The good bet payload without one field. */
    static String betWithout(String field) {
        String payload = BET_PAYLOAD.replaceFirst(",?\\s*\"" + field + "\":(\"[^\"]*\"|[^,}]+)", "");
        if (payload.startsWith("{,")) {
            payload = "{" + payload.substring(2);
        }
        return bet(payload);
    }

    static byte[] bytes(String json) {
        return json.getBytes(StandardCharsets.UTF_8);
    }
}
