package io.lakebus.connect.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.connect.IcebergSinkConfig;
import org.apache.iceberg.connect.IcebergSinkConnector;
import org.apache.kafka.connect.errors.ConnectException;
import org.junit.jupiter.api.Test;

class StableIcebergSinkConnectorTest {

  private static final String SUFFIX = IcebergSinkConfig.INTERNAL_TRANSACTIONAL_SUFFIX_PROP;

  private static Map<String, String> props(String name, String controlTopic) {
    Map<String, String> props = new HashMap<>();
    props.put("name", name);
    props.put("topics", "events");
    props.put("iceberg.control.topic", controlTopic);
    props.put("iceberg.tables", "demo.dwd_biz_bet");
    props.put("iceberg.catalog.type", "rest");  // the sink's config refuses a start without a catalog
    return props;
  }

  /** Records what the connector asked to anchor instead of reaching Kafka. */
  private static final class RecordingAnchor extends ControlOffsetsAnchor {
    final List<List<String>> calls = new ArrayList<>();
    Map<String, String> kafkaProps;

    @Override
    Outcome anchor(Map<String, String> kafkaProps, String group, String controlTopic) {
      this.kafkaProps = kafkaProps;
      calls.add(List.of(group, controlTopic));
      return Outcome.ANCHORED;
    }
  }

  private static StableIcebergSinkConnector connector() {
    return new StableIcebergSinkConnector(new RecordingAnchor());
  }

  private static List<Map<String, String>> started(Map<String, String> props, int tasks) {
    StableIcebergSinkConnector connector = connector();
    connector.start(props);
    return connector.taskConfigs(tasks);
  }

  @Test
  void theUpstreamConnectorChangesItsTaskConfigsOnEveryStart() {
    // what this class exists for: were this to stop failing, the upstream sink fixed it
    IcebergSinkConnector first = new IcebergSinkConnector();
    first.start(props("sink", "control"));
    IcebergSinkConnector second = new IcebergSinkConnector();
    second.start(props("sink", "control"));
    assertNotEquals(first.taskConfigs(2), second.taskConfigs(2));
  }

  @Test
  void aRestartedConnectorProducesTheSameTaskConfigs() {
    Map<String, String> props = props("events-iceberg-sink", "iceberg-control-events");
    assertEquals(started(props, 2), started(props, 2));
    assertEquals(started(props, 2), started(new HashMap<>(props), 2));
  }

  @Test
  void eachTaskKeepsTheSinksSuffixFormatAndItsOwnId() {
    List<Map<String, String>> configs = started(props("events-iceberg-sink", "iceberg-control-events"), 3);
    String id = StableIcebergSinkConnector.stableId("events-iceberg-sink", "iceberg-control-events");
    for (int task = 0; task < 3; task++) {
      assertEquals("-txn-" + id + "-" + task, configs.get(task).get(SUFFIX));
      assertEquals(String.valueOf(task), configs.get(task).get("task.id"));
      assertEquals("events", configs.get(task).get("topics"));  // the rest is the sink's own
    }
  }

  @Test
  void anotherConnectorOrControlTopicGetsAnotherId() {
    String suffix = started(props("a", "control"), 1).get(0).get(SUFFIX);
    assertNotEquals(suffix, started(props("b", "control"), 1).get(0).get(SUFFIX));
    assertNotEquals(suffix, started(props("a", "control-2"), 1).get(0).get(SUFFIX));
  }

  @Test
  void aConfigurationWithoutANameIsRefused() {
    Map<String, String> props = props("x", "control");
    props.remove("name");
    ConnectException error = assertThrows(ConnectException.class, () -> connector().start(props));
    assertEquals("StableIcebergSinkConnector: the connector configuration has no name", error.getMessage());
  }

  @Test
  void itsTasksReleaseTheirCoordinatorUnlessSwitchedOff() {
    Map<String, String> props = props("events-iceberg-sink", "iceberg-control-events");
    StableIcebergSinkConnector connector = connector();
    connector.start(props);
    assertEquals(CoordinatorReleasingSinkTask.class, connector.taskClass());
    props.put(StableIcebergSinkConnector.RELEASE_COORDINATOR_PROP, "False");
    connector.start(props);
    assertEquals(org.apache.iceberg.connect.IcebergSinkTask.class, connector.taskClass());
    props.put(StableIcebergSinkConnector.RELEASE_COORDINATOR_PROP, "no");
    ConnectException error = assertThrows(ConnectException.class, () -> connector().start(props));
    assertTrue(error.getMessage().contains(StableIcebergSinkConnector.RELEASE_COORDINATOR_PROP), error.getMessage());
  }

  @Test
  void itAnchorsTheCoordinatorsGroupOnTheControlTopicWithTheSinksKafkaSettings() {
    Map<String, String> props = props("events-iceberg-sink", "iceberg-control-events");
    props.put("iceberg.kafka.bootstrap.servers", "broker:9092");
    RecordingAnchor anchor = new RecordingAnchor();
    new StableIcebergSinkConnector(anchor).start(props);
    // the group the sink's Coordinator reads in: its Channel's "<connect group id>-coord"
    assertEquals(List.of(List.of("connect-events-iceberg-sink-coord", "iceberg-control-events")), anchor.calls);
    assertEquals("broker:9092", anchor.kafkaProps.get("bootstrap.servers"));
  }

  @Test
  void theSinksConnectGroupIsConnectDashTheConnectorsName() {
    // the anchor's group is derived from it; were upstream to rename it, this fails first
    IcebergSinkConfig config = new IcebergSinkConfig(props("events-iceberg-sink", "iceberg-control-events"));
    assertEquals("connect-events-iceberg-sink", config.connectGroupId());
    assertEquals("iceberg-control-events", config.controlTopic());
  }

  @Test
  void theAnchorCanBeSwitchedOffAndABadValueNamesTheKey() {
    Map<String, String> props = props("events-iceberg-sink", "iceberg-control-events");
    props.put(StableIcebergSinkConnector.ANCHOR_CONTROL_OFFSETS_PROP, " FALSE ");
    RecordingAnchor anchor = new RecordingAnchor();
    new StableIcebergSinkConnector(anchor).start(props);
    assertEquals(List.of(), anchor.calls);
    props.put(StableIcebergSinkConnector.ANCHOR_CONTROL_OFFSETS_PROP, "maybe");
    ConnectException error = assertThrows(ConnectException.class, () -> connector().start(props));
    assertTrue(error.getMessage().contains(StableIcebergSinkConnector.ANCHOR_CONTROL_OFFSETS_PROP), error.getMessage());
  }

  @Test
  void aFailedAnchorFailsTheStart() {
    ControlOffsetsAnchor failing = new ControlOffsetsAnchor() {
      @Override
      Outcome anchor(Map<String, String> kafkaProps, String group, String controlTopic) {
        throw new ConnectException("could not anchor the control offsets of group " + group);
      }
    };
    Map<String, String> props = props("events-iceberg-sink", "iceberg-control-events");
    ConnectException error = assertThrows(ConnectException.class, () -> new StableIcebergSinkConnector(failing).start(props));
    assertTrue(error.getMessage().contains("connect-events-iceberg-sink-coord"), error.getMessage());
  }
}
