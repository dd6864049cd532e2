package io.lakebus.connect.sink;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.iceberg.connect.IcebergSinkConfig;
import org.apache.iceberg.connect.IcebergSinkTask;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.apache.kafka.connect.sink.SinkTaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Apache Iceberg sink task, which also stops its commit coordinator when it gives up the
 * partition it was elected by.
 *
 * <p>Why: the sink's committer decides in {@code close()} whether the closed partitions held the
 * leader partition by describing the whole consumer group again. During a rebalance that
 * description often shows no assignment at all ("found no partitions assigned across all
 * members"), so a coordinator started on an interim leader is never stopped, and once the rightful
 * task is elected the sink runs two coordinators (apache/iceberg#17637). Measured on lakebus's
 * cluster profile: after most failovers and rejoins, task 1 was elected while task 0 was still
 * starting, closed its partitions 3 s later without stopping its coordinator, and the coordinators'
 * consumer group kept two members until the status sensor restarted the sink.
 *
 * <p>This task keeps the sink's election as it is and adds one local rule: when a close takes the
 * smallest partition this task holds — the only partition a coordinator here can have been elected
 * by — the sink task is stopped and started again (its catalog, committer and coordinator), and
 * re-opened for the partitions it keeps. Stopping a task that coordinates nothing costs a catalog
 * reload; the sink's own close has already stopped its writer and rewound it to the committed
 * offsets, so nothing is lost or written twice. When the close kept nothing (the sink's consumer
 * rebalances eagerly, so every rebalance closes everything, and so does a task being stopped), the
 * sink is started again only at the next {@code open()} — or not at all when Connect stops the task.
 */
public class CoordinatorReleasingSinkTask extends SinkTask {

  private static final Logger LOG = LoggerFactory.getLogger(CoordinatorReleasingSinkTask.class);

  private final SinkTask sink;
  /** Ends a predecessor's open worker transaction before the sink starts (given the task's props). */
  private final Consumer<Map<String, String>> fence;
  private final AssignedPartitions assigned = new AssignedPartitions();
  private Map<String, String> props;
  /** The sink was stopped by a release that kept no partition; the next open starts it again. */
  private boolean sinkStopped;

  public CoordinatorReleasingSinkTask() {
    this(IcebergSinkTask::new, CoordinatorReleasingSinkTask::fenceWorkerTransaction);
  }

  /** For tests: wraps another sink task, and fences with {@code fence}. */
  CoordinatorReleasingSinkTask(Supplier<SinkTask> sinkTask, Consumer<Map<String, String>> fence) {
    this.sink = sinkTask.get();
    this.fence = fence;
  }

  /** Fences the task's worker transactional id with the sink's own Kafka client settings. */
  static void fenceWorkerTransaction(Map<String, String> props) {
    IcebergSinkConfig config = new IcebergSinkConfig(props);
    String task = props.get("name") + "-" + props.get("task.id");
    if (config.transactionalSuffix() == null) {
      LOG.warn("Task {} has no transactional suffix in its configuration: nothing to fence", task);
      return;
    }
    String id = WorkerTransactionFence.workerTransactionalId(config.transactionalPrefix(), config.transactionalSuffix());
    WorkerTransactionFence.fence(WorkerTransactionFence.kafka(config.kafkaProps()), id, task);
  }

  @Override
  public String version() {
    return sink.version();
  }

  @Override
  public void initialize(SinkTaskContext context) {
    super.initialize(context);
    sink.initialize(context);
  }

  @Override
  public void start(Map<String, String> props) {
    this.props = Map.copyOf(props);
    assigned.clear();
    sinkStopped = false;
    if (StableIcebergSinkConnector.flag(StableIcebergSinkConnector.FENCE_WORKER_TRANSACTION_PROP,
        props.getOrDefault(StableIcebergSinkConnector.FENCE_WORKER_TRANSACTION_PROP, "true"))) {
      fence.accept(props);  // before the consumer subscribes: Connect starts the task first
    }
    sink.start(props);
  }

  @Override
  public void open(Collection<TopicPartition> partitions) {
    assigned.opened(partitions);
    if (sinkStopped) {
      startSink();
    } else {
      sink.open(partitions);
    }
  }

  @Override
  public void close(Collection<TopicPartition> partitions) {
    boolean releases = assigned.closedTakesFirst(partitions);
    if (sinkStopped) {
      return;  // nothing is open in a stopped sink
    }
    sink.close(partitions);
    if (releases) {
      release(partitions);
    }
  }

  /** Stops the sink task — and so any coordinator it runs — and starts it again for what it keeps. */
  private void release(Collection<TopicPartition> closed) {
    List<TopicPartition> kept = assigned.held();
    LOG.info(
        "Task {}-{} closed its first partition among {}: stopping the sink task so that no commit"
            + " coordinator elected by it keeps running; {}",
        props.get("name"), props.get("task.id"), closed,
        kept.isEmpty() ? "starting it at the next open" : "re-opening " + kept);
    sink.stop();
    sinkStopped = true;
    if (!kept.isEmpty()) {
      startSink();
    }
  }

  /** Starts the stopped sink task and opens every partition this task holds. */
  private void startSink() {
    sink.start(props);
    sinkStopped = false;
    List<TopicPartition> held = assigned.held();
    if (!held.isEmpty()) {
      sink.open(held);
    }
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    if (sinkStopped) {
      if (records.isEmpty()) {
        return;  // Connect polls between a rebalance's close and open: nothing to hand over
      }
      startSink();  // records with no open: never seen, but never dropped either
    }
    sink.put(records);
  }

  @Override
  public void flush(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    if (!sinkStopped) {
      sink.flush(currentOffsets);
    }
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> preCommit(
      Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    // the sink commits its offsets itself (its preCommit answers nothing either)
    return sinkStopped ? Map.of() : sink.preCommit(currentOffsets);
  }

  @Override
  public void stop() {
    assigned.clear();
    if (!sinkStopped) {
      sink.stop();
    }
    sinkStopped = false;
  }
}
