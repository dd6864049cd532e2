package io.lakebus.connect.sink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.iceberg.connect.IcebergSinkConfig;
import org.apache.iceberg.connect.IcebergSinkConnector;
import org.apache.iceberg.connect.IcebergSinkTask;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;

/**
 * The Apache Iceberg sink connector, with task configurations that do not change when the
 * connector restarts.
 *
 * <p>Why: the sink's {@code taskConfigs} stamps every task with a transactional-id suffix built
 * from a fresh random UUID ({@code -txn-<uuid>-<task>}), so each time the connector instance
 * starts — on another worker after a failover, after a restart — Connect finds the task
 * configurations changed, writes them again and restarts every task a second time. Measured on
 * lakebus's cluster profile: the tasks the survivor had started 3 ms earlier were stopped before
 * their consumers finished joining the sink's group; the group then waited a whole consumer session
 * for those pending members before it could elect a commit coordinator, and the first commit after
 * the kill came ~45 s later instead of ~30 s.
 *
 * <p>Here the suffix is derived from the connector's name and control topic, so it is the same on
 * every start: the task configurations match what Connect stored and no second restart happens.
 * A stable transactional id is also what Kafka's fencing expects: a task's new producers (the
 * worker's, and the coordinator's on task 0) fence the previous instance's and abort its open
 * transaction at once, instead of leaving it open on the control topic until it times out. Within
 * one connector instance the sink already reuses the suffix across every rebalance and coordinator
 * restart; this extends that to restarts of the connector.
 *
 * <p>Its tasks are {@link CoordinatorReleasingSinkTask}s: the sink's task, which also stops its
 * commit coordinator when it gives up the partition it was elected by. Setting
 * {@value #RELEASE_COORDINATOR_PROP} to {@code false} runs the sink's own task instead (the remedy
 * switched off, for comparisons).
 *
 * <p>Before it has tasks, it gives the commit coordinators' consumer group a committed position on
 * the control topic when the group has none ({@link ControlOffsetsAnchor}), so that a coordinator
 * elected after its predecessor died inside the connector's first commit cycles adopts the answers
 * in flight instead of starting past them. {@value #ANCHOR_CONTROL_OFFSETS_PROP}{@code =false}
 * starts without it (for comparisons).
 *
 * <p>Each task, when it starts, ends a dead predecessor's open transaction on its worker
 * transactional id ({@link WorkerTransactionFence}) so that its consumer does not wait out the
 * transaction timeout for its offsets; {@value #FENCE_WORKER_TRANSACTION_PROP}{@code =false}
 * starts without it (for comparisons).
 */
public class StableIcebergSinkConnector extends IcebergSinkConnector {

  /** The control topic the sink uses when the configuration names none (the sink's default). */
  static final String DEFAULT_CONTROL_TOPIC = "control-iceberg";

  /** Whether the tasks stop their coordinator on giving up their first partition (default true). */
  public static final String RELEASE_COORDINATOR_PROP = "lakebus.release-coordinator-on-close";

  /** Whether the connector anchors the coordinators' control offsets when it starts (default true). */
  public static final String ANCHOR_CONTROL_OFFSETS_PROP = "lakebus.anchor-control-offsets";

  /** Whether each task fences its worker transactional id when it starts (default true; {@link WorkerTransactionFence}). */
  public static final String FENCE_WORKER_TRANSACTION_PROP = "lakebus.fence-worker-transaction";

  private final ControlOffsetsAnchor anchor;
  private String stableId;
  private boolean releaseCoordinator = true;

  public StableIcebergSinkConnector() {
    this(new ControlOffsetsAnchor());
  }

  /** For tests: anchors the control offsets with this anchor. */
  StableIcebergSinkConnector(ControlOffsetsAnchor anchor) {
    this.anchor = anchor;
  }

  @Override
  public void start(Map<String, String> props) {
    super.start(props);
    String name = props.get("name");
    if (name == null || name.isEmpty()) {
      throw new ConnectException("StableIcebergSinkConnector: the connector configuration has no name");
    }
    stableId = stableId(name, props.getOrDefault("iceberg.control.topic", DEFAULT_CONTROL_TOPIC));
    releaseCoordinator = flag(RELEASE_COORDINATOR_PROP, props.getOrDefault(RELEASE_COORDINATOR_PROP, "true"));
    flag(FENCE_WORKER_TRANSACTION_PROP, props.getOrDefault(FENCE_WORKER_TRANSACTION_PROP, "true"));  // refused here, not in each task
    if (flag(ANCHOR_CONTROL_OFFSETS_PROP, props.getOrDefault(ANCHOR_CONTROL_OFFSETS_PROP, "true"))) {
      IcebergSinkConfig config = new IcebergSinkConfig(props);
      anchor.anchor(config.kafkaProps(), coordinatorGroup(config.connectGroupId()), config.controlTopic());
    }
  }

  /** The consumer group every commit coordinator of the connector reads the control topic in (the sink's naming). */
  static String coordinatorGroup(String connectGroupId) {
    return connectGroupId + "-coord";
  }

  /** Kafka's own boolean parsing (case and surrounding blanks ignored); a bad value names the key. */
  static boolean flag(String key, String value) {
    try {
      return (Boolean) ConfigDef.parseType(key, value, ConfigDef.Type.BOOLEAN);
    } catch (ConfigException e) {
      throw new ConnectException("StableIcebergSinkConnector: " + e.getMessage(), e);
    }
  }

  /** A name-based UUID (RFC 4122 version 3) of the connector's name and control topic. */
  static String stableId(String connectorName, String controlTopic) {
    byte[] key = ("lakebus-iceberg-sink\n" + connectorName + "\n" + controlTopic).getBytes(StandardCharsets.UTF_8);
    return UUID.nameUUIDFromBytes(key).toString();
  }

  @Override
  public Class<? extends Task> taskClass() {
    return releaseCoordinator ? CoordinatorReleasingSinkTask.class : IcebergSinkTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    if (stableId == null) {
      throw new IllegalStateException("taskConfigs before start");
    }
    List<Map<String, String>> configs = new ArrayList<>(maxTasks);
    int task = 0;
    for (Map<String, String> upstream : super.taskConfigs(maxTasks)) {
      Map<String, String> config = new HashMap<>(upstream);
      // the sink's own format, "-txn-<uuid>-<task>", with the stable id for the random one
      config.put(IcebergSinkConfig.INTERNAL_TRANSACTIONAL_SUFFIX_PROP, "-txn-" + stableId + "-" + task);
      configs.add(config);
      task++;
    }
    return configs;
  }
}
